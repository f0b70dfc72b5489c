"""Optional parts: nothing of a part is imported before it is configured, and a configured part
whose package is missing is off with one log line that names the ``pip install`` turning it on.

The plugin here is a real distribution on ``sys.path`` (a ``.dist-info`` with entry points and
an extra), found through ``importlib.metadata`` like kernelcup's own parts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from kernelcup.core.config import load_settings
from kernelcup.core.plugins import ADAPTERS, RUNNERS, build_adapters, install_hint, load_runners

ROOT = Path(__file__).resolve().parents[2]
OPTIONAL = ("discord", "slack_bolt", "aiohttp", "fastapi", "uvicorn", "jinja2", "multipart", "httpx", "modal",
            "matplotlib")


def install_plugin(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ghostplug``: an adapter whose SDK is not installed, and one that is never configured."""
    info = site / "ghostplug-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ghostplug\nVersion: 0.1\nProvides-Extra: ghost\n")
    (info / "entry_points.txt").write_text(
        "[kernelcup.adapters]\nghost = ghost_entry:CONFIGURED\nquiet = ghost_entry:NOT_CONFIGURED\n"
        "[kernelcup.runners]\nghost = ghost_runner:GhostRunner\n"
    )
    (site / "ghost_entry.py").write_text(
        "from kernelcup.core.plugins import DeferredAdapter\n"
        "CONFIGURED = DeferredAdapter('ghost_adapter:GhostAdapter', lambda env: True)\n"
        "NOT_CONFIGURED = DeferredAdapter('quiet_adapter:QuietAdapter', lambda env: False)\n"
    )
    (site / "ghost_adapter.py").write_text("import ghost_sdk_that_is_not_installed\n")
    (site / "quiet_adapter.py").write_text("raise AssertionError('imported although not configured')\n")
    (site / "ghost_runner.py").write_text("import ghost_sdk_that_is_not_installed\n")
    monkeypatch.syspath_prepend(str(site))


def test_a_configured_adapter_without_its_package_is_off_with_one_line(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    install_plugin(tmp_path, monkeypatch)
    with capture_logs() as logs:
        built = build_adapters(load_settings(env={}), {}, lambda name, factory: name in ("ghost", "quiet")
                               and factory.configured({}))
    assert built == []
    said = [line for line in logs if "ghost" in line["event"]]
    assert [line["event"] for line in said] == ["adapter ghost is off: pip install 'ghostplug[ghost]' turns it on"]
    assert said[0]["missing"] == "ghost_sdk_that_is_not_installed"
    assert "quiet_adapter" not in sys.modules


def test_a_runner_the_registry_names_without_its_package_serves_nothing(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    install_plugin(tmp_path, monkeypatch)
    settings = load_settings(env={"KERNELCUP_GPUS__GHOSTGPU__RUNNER": "ghost"})
    with capture_logs() as logs:
        runners = load_runners(settings)
    assert "ghost" not in runners and "local" in runners
    assert [line["event"] for line in logs if "ghost" in line["event"]] == [
        "runner ghost is off: pip install 'ghostplug[ghost]' turns it on"
    ]


@pytest.mark.parametrize(("group", "name"), [(RUNNERS, "modal"), (RUNNERS, "github"), (ADAPTERS, "discord"),
                                             (ADAPTERS, "slack"), (ADAPTERS, "web")])
def test_each_built_in_part_names_the_extra_of_its_own_name(group: str, name: str) -> None:
    entry = entry_points(group=group)[name]
    assert install_hint(entry, ModuleNotFoundError(name="anything")) == f"pip install 'kernelcup[{name}]'"


def test_a_terminal_command_imports_no_optional_package_its_config_does_not_use(tmp_path: Path) -> None:
    """Every optional package is installed here (``.[dev]``); none is configured, none is imported."""
    config = tmp_path / "kernelcup.yml"
    config.write_text(f"database_url: sqlite:///{tmp_path}/kc.db\nleaderboards_dir: {ROOT / 'leaderboards'}\n"
                      "gpus:\n  cpu: {runner: local}\n")
    probe = (
        "import atexit, sys\n"
        f"atexit.register(lambda: print('IMPORTED', sorted(m for m in {OPTIONAL!r} if m in sys.modules)))\n"
        "sys.argv = ['kernelcup', 'list']\n"
        "from kernelcup.adapters.terminal.cli import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "KERNELCUP_CONFIG": str(config), "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert "vectoradd" in done.stdout
    assert done.stdout.splitlines()[-1] == "IMPORTED []"

"""kernelcup next to another distribution that owns a top-level ``adapters`` (AdapterHub's, for
transformers): both must import, and removing one must leave the other whole.

Before issue #15 kernelcup shipped ``core``, ``adapters``, ``runners`` and ``harness`` at the top
of site-packages, so pip put both distributions' files in one ``adapters/`` folder without a
word: the last one installed won ``adapters/__init__.py``, which both listed as theirs, and
uninstalling kernelcup deleted the other distribution's package with it. Now the wheel holds one
top-level package, ``kernelcup``.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def dummy_wheel(folder: Path) -> Path:
    """A distribution ``adapters`` whose package ``adapters`` says who it is."""
    files = {
        "adapters/__init__.py": b"WHO = 'the other adapters'\n",
        "adapters-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: adapters\nVersion: 1.0\n",
        "adapters-1.0.dist-info/WHEEL": (b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                         b"Tag: py3-none-any\n"),
    }
    record = [f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
              f"{len(data)}" for name, data in files.items()]
    path = folder / "adapters-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
        wheel.writestr("adapters-1.0.dist-info/RECORD", "\n".join([*record, "adapters-1.0.dist-info/RECORD,,"]) + "\n")
    return path


def run(*command: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=300, check=False,
                          cwd=cwd)


def checkout_copy(folder: Path) -> Path:
    """The checkout's files (tracked, and untracked but not ignored) copied into ``folder``.

    setuptools builds in the source tree: it writes build/ and rewrites kernelcup.egg-info in
    place, the metadata importlib reads for our entry points in every test process, while other
    tests run beside this one (pytest-xdist, and the wheel check in .ci/run)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source, target = ROOT / name, folder / name
        if not source.is_symlink() and not source.is_file():
            continue  # deleted in the working tree
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)
    return folder


@pytest.mark.slow
def test_kernelcup_and_another_adapters_distribution_both_survive(tmp_path: Path) -> None:
    source = checkout_copy(tmp_path / "source")
    built = run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp_path, source)
    assert built.returncode == 0, built.stderr
    kernelcup = next(tmp_path.glob("kernelcup-*.whl"))
    with zipfile.ZipFile(kernelcup) as archive:
        tops = {name.split("/")[0] for name in archive.namelist() if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"kernelcup"}
    venv = tmp_path / "venv"
    assert run(sys.executable, "-m", "venv", "--without-pip", venv).returncode == 0
    python = venv / "bin" / "python"
    pip = (sys.executable, "-m", "pip", "--python", python)
    for wheel in (kernelcup, dummy_wheel(tmp_path)):
        installed = run(*pip, "install", "-q", "--no-deps", wheel)
        assert installed.returncode == 0, installed.stderr
    probe = ("import adapters, importlib.util, kernelcup.adapters; print(getattr(adapters, 'WHO', None), "
             "kernelcup.adapters.__name__, importlib.util.find_spec('kernelcup.adapters.terminal') is not None)")
    both = run(python, "-c", probe, cwd=tmp_path)
    assert both.stdout.split() == ["the", "other", "adapters", "kernelcup.adapters", "True"], both.stderr
    removed = run(*pip, "uninstall", "-q", "-y", "kernelcup")
    assert removed.returncode == 0, removed.stderr
    survivor = run(python, "-c", "import adapters; print(adapters.WHO)", cwd=tmp_path)
    assert survivor.stdout.strip() == "the other adapters", survivor.stderr

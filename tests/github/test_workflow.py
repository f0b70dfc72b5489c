"""The workflow file teams copy (deploy/github/kernelcup-submit.yml): valid YAML with the steps
it promises, and its submit step's shell run as GitHub runs it, against a real server."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kernelcup.core.store.db import make_engine, upgrade
from tests.web.conftest import ALICE, ROOT, Clock, ScriptedRunner, ServerThread, build_app, token_for

WORKFLOW = ROOT / "deploy" / "github" / "kernelcup-submit.yml"


def workflow() -> dict[Any, Any]:
    loaded: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text())
    return loaded


def step(name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in workflow()["jobs"]["submit"]["steps"] if s.get("name") == name)
    return found


def test_the_workflow_runs_on_pull_requests_that_touch_submissions_and_skips_forks() -> None:
    flow = workflow()
    triggers = flow.get("on", flow.get(True))  # YAML 1.1 reads a bare `on` as true; GitHub does not
    assert triggers == {"pull_request": {"paths": ["submissions/**"]}}
    assert flow["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert "head.repo.full_name == github.repository" in flow["jobs"]["submit"]["if"]


def test_the_workflow_submits_with_the_token_from_secrets_and_comments_the_result() -> None:
    names = [s.get("name") for s in workflow()["jobs"]["submit"]["steps"]]
    assert names == ["Check out the pull request", "Set up Python", "Install the kernelcup CLI",
                     "Submit the changed files", "Post the result on the pull request"]
    assert step("Check out the pull request")["uses"].startswith("actions/checkout@")
    submit = step("Submit the changed files")
    assert submit["env"]["KERNELCUP_TOKEN"] == "${{ secrets.KERNELCUP_TOKEN }}"
    assert 'kernelcup --server "$KERNELCUP_SERVER" submit' in submit["run"] and "--json" in submit["run"]
    post = step("Post the result on the pull request")
    assert "gh pr comment" in post["run"] and "--body-file kernelcup-result.md" in post["run"]
    assert post["env"]["GH_TOKEN"] == "${{ github.token }}"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('workflow')}/kernelcup.db")
    upgrade(engine)
    with ServerThread(lambda: build_app(engine, ScriptedRunner(), Clock())) as running:
        yield running
    engine.dispose()


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=ci", "-c", "user.email=ci@example.org", *args], cwd=repo,
                          check=True, capture_output=True, text=True)
    return done.stdout.strip()


def pull_request_checkout(repo: Path) -> str:
    """A repository whose head commit adds two submissions on top of a base commit; the base's sha."""
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README.md").write_text("kernels\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "base")
    base = git(repo, "rev-parse", "HEAD")
    source = (ROOT / "leaderboards/identity/solutions/pytorch.py").read_text()
    (repo / "submissions" / "identity").mkdir(parents=True)
    (repo / "submissions" / "identity" / "good.py").write_text(source)
    (repo / "submissions" / "identity" / "bad.py").write_text(source + "\n# WRONG\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "two kernels")
    return base


def test_the_submit_step_runs_its_json_command_against_a_real_server(tmp_path: Path, server: ServerThread) -> None:
    assert server.app is not None
    repo = tmp_path / "repo"
    base = pull_request_checkout(repo)
    script = tmp_path / "submit.sh"
    script.write_text(step("Submit the changed files")["run"])
    environ = {k: v for k, v in os.environ.items() if not k.startswith("KERNELCUP_")}
    environ.update({
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{environ.get('PATH', '')}",  # kernelcup, python3
        "KERNELCUP_DATABASE_URL": "postgresql+psycopg://nobody@127.0.0.1:1/none",  # never the embedded one
        "KERNELCUP_SERVER": server.url, "KERNELCUP_TOKEN": token_for(server.app, ALICE),
        "KERNELCUP_GPU": "cpu", "KERNELCUP_MODE": "", "BASE_SHA": base,
    })
    # As GitHub runs a `shell: bash` step.
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=repo, env=environ,
                          capture_output=True, text=True, timeout=300)
    result = (repo / "kernelcup-result.md").read_text()
    assert done.returncode == 1, done.stdout + done.stderr + result  # one of the two failed its tests
    sections = dict(part.split("`", 1) for part in result.split("### `")[1:])  # path -> its answer
    good, bad = sections["submissions/identity/good.py"], sections["submissions/identity/bad.py"]
    assert "(test) by alice" in good and "[cpu] ✅ all tests passed" in good
    assert "❌ a test failed" in bad and "<details><summary>" in bad  # its log, collapsed

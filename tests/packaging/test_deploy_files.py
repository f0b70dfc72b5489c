"""deploy/: the compose file and the Dockerfile that run ``kernelcup serve`` with PostgreSQL and a
GPU, checked without a container runtime (their syntax, the services, the GPU reservation, the
healthchecks, that every secret comes from the environment and that every variable passed is one
kernelcup reads), and with ``docker compose config`` where a Docker daemon and Compose are here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kernelcup.adapters.terminal.starter import ENVIRONMENT
from kernelcup.core.config import DEFAULT_CONFIG, ENV_PREFIX

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
DOCKERFILE = DEPLOY / "Dockerfile"

INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME", "USER",
                "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL", "MAINTAINER"}
SECRET_NAME = re.compile(r"PASSWORD|TOKEN|SECRET|_KEY$")
# ``${NAME}``, ``${NAME:?message}`` or ``${NAME?message}``: from the environment, no default to fall back on.
FROM_ENVIRONMENT = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::?\?[^}]*)?\}")
URL_PASSWORD = re.compile(r"://[^:/@\s]+:(?P<password>[^@]+)@")  # the message of ${X:?...} may hold spaces
GPU_RESERVATION = {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}


@dataclass(frozen=True)
class Instruction:
    line: int  # where it starts in the file, from 1
    keyword: str
    arguments: str


def parse_dockerfile(text: str) -> list[Instruction]:
    """The Dockerfile's instructions, continuations joined. Raises ValueError naming the line of
    anything that is not a known instruction, and of a continuation at the end of the file."""
    instructions: list[Instruction] = []
    pending: tuple[int, str] | None = None  # (first line, text so far) of an instruction continued
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue  # comments and blank lines may stand inside a continued instruction too
        start, joined = pending if pending else (number, "")
        joined = f"{joined} {line}".strip()
        if line.endswith("\\"):
            pending = (start, joined[:-1].rstrip())
            continue
        pending = None
        keyword, _, arguments = joined.partition(" ")
        if keyword.upper() not in INSTRUCTIONS:
            raise ValueError(f"line {start}: {keyword!r} is not a Dockerfile instruction")
        instructions.append(Instruction(start, keyword.upper(), arguments.strip()))
    if pending:
        raise ValueError(f"line {pending[0]}: the instruction's last line ends in a continuation")
    return instructions


def exec_form(instruction: Instruction) -> list[str]:
    """CMD and ENTRYPOINT in their JSON (exec) form: no shell between Docker and kernelcup, so a
    stop signal reaches serve itself."""
    arguments = json.loads(instruction.arguments)
    assert isinstance(arguments, list) and all(isinstance(a, str) for a in arguments), instruction
    return arguments


def environment_names() -> set[str]:
    """What kernelcup reads from the environment: the names .env.example lists (kernelcup init) and
    KERNELCUP_<SECTION>__<KEY> for every key of the shipped config file."""
    names = {name for _, variables in ENVIRONMENT for name, _ in variables}
    names |= {ENV_PREFIX + "__".join(path).upper() for path in config_keys(yaml.safe_load(DEFAULT_CONFIG.read_text()))}
    return names


def config_keys(node: dict[str, Any], above: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    keys = set()
    for key, value in node.items():
        path = (*above, str(key))
        keys.add(path)
        if isinstance(value, dict):
            keys |= config_keys(value, path)
    return keys


def as_mapping(environment: Any) -> dict[str, str]:
    """A service's ``environment:``, written as a mapping or as a list of NAME=value."""
    if isinstance(environment, list):
        return dict(str(item).partition("=")[::2] for item in environment)
    return {str(k): "" if v is None else str(v) for k, v in (environment or {}).items()}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(loaded, dict), "compose.yaml must hold a mapping"
    return loaded


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return parse_dockerfile(DOCKERFILE.read_text())


def test_compose_has_the_database_and_the_bot(compose):
    assert {"db", "kernelcup"} <= set(compose["services"])
    assert str(compose["services"]["db"]["image"]).startswith("postgres:16")
    build = compose["services"]["kernelcup"]["build"]
    assert (COMPOSE.parent / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE


def test_the_database_keeps_its_data_in_a_named_volume_and_has_a_healthcheck(compose):
    db = compose["services"]["db"]
    assert "pgdata:/var/lib/postgresql/data" in db["volumes"] and "pgdata" in compose["volumes"]
    assert "pg_isready" in " ".join(db["healthcheck"]["test"])


def test_the_bot_starts_once_the_database_is_healthy(compose):
    assert compose["services"]["kernelcup"]["depends_on"]["db"]["condition"] == "service_healthy"


def test_the_bot_reserves_every_gpu_of_the_host(compose):
    devices = compose["services"]["kernelcup"]["deploy"]["resources"]["reservations"]["devices"]
    assert GPU_RESERVATION in devices


def test_the_bot_serves_port_8080_and_keeps_leaderboards_and_var_in_volumes(compose):
    bot = compose["services"]["kernelcup"]
    assert any(str(port).endswith(":8080") for port in bot["ports"])
    targets = {str(volume).split(":")[1] for volume in bot["volumes"]}
    assert {"/srv/kernelcup/leaderboards", "/srv/kernelcup/var"} <= targets
    assert [entry["path"] for entry in bot["env_file"]] == [".env"]


def test_every_secret_in_compose_comes_from_the_environment(compose):
    for name, service in compose["services"].items():
        for key, value in as_mapping(service.get("environment")).items():
            if SECRET_NAME.search(key):
                assert FROM_ENVIRONMENT.fullmatch(value), f"{name}: {key} is not taken from the environment"
            password = URL_PASSWORD.search(value)
            if "://" in value and "@" in value:
                assert password, f"{name}: {key} has credentials this check cannot read"
                assert FROM_ENVIRONMENT.fullmatch(password["password"]), f"{name}: {key} holds a password"
    assert "DISCORD_TOKEN" not in COMPOSE.read_text()  # tokens reach the bot from .env, never named here


def test_the_database_url_is_built_from_the_same_password_as_the_database(compose):
    url = as_mapping(compose["services"]["kernelcup"]["environment"])["KERNELCUP_DATABASE_URL"]
    password = as_mapping(compose["services"]["db"]["environment"])["POSTGRES_PASSWORD"]
    assert url.startswith("postgresql+psycopg://kernelcup:") and url.endswith("@db:5432/kernelcup")
    found = URL_PASSWORD.search(url)
    assert found and found["password"] == password


def test_every_variable_compose_and_the_dockerfile_pass_is_one_kernelcup_reads(compose, dockerfile):
    known = environment_names()
    passed = set(as_mapping(compose["services"]["kernelcup"].get("environment")))
    for instruction in dockerfile:
        if instruction.keyword == "ENV":
            passed |= {pair.split("=", 1)[0] for pair in instruction.arguments.split()}
    ours = {name for name in passed if name.startswith(ENV_PREFIX)}
    assert ours, "compose passes no KERNELCUP_ variable"
    assert ours <= known, f"kernelcup reads none of {sorted(ours - known)}"


def test_the_dockerfile_is_well_formed_and_starts_from_a_pinned_image(dockerfile):
    assert dockerfile[0].keyword == "FROM", "a Dockerfile starts with FROM"
    image = dockerfile[0].arguments.split()[0]
    assert ":" in image and not image.endswith(":latest"), f"{image}: pin a tag"


def test_the_dockerfile_runs_kernelcup_serve_without_the_terminal_chat(dockerfile):
    starts = [exec_form(i) for i in dockerfile if i.keyword in {"CMD", "ENTRYPOINT"}]
    command = [word for form in starts for word in form]
    assert command[:2] == ["kernelcup", "serve"] and "--no-console" in command


def test_the_dockerfile_installs_a_pinned_torch_and_the_extras_a_gpu_deployment_needs(dockerfile):
    args = dict(i.arguments.split("=", 1) for i in dockerfile if i.keyword == "ARG" and "=" in i.arguments)
    assert re.fullmatch(r"\d+\.\d+\.\d+", args["TORCH_VERSION"]) and "/whl/cu" in args["TORCH_INDEX"]
    assert {"web", "postgres"} <= set(args["EXTRAS"].split(","))


def test_the_dockerfile_checks_the_health_of_the_web_port(dockerfile):
    checks = [i.arguments for i in dockerfile if i.keyword == "HEALTHCHECK"]
    assert len(checks) == 1 and " CMD " in f" {checks[0]} " and "8080" in checks[0]


def test_a_misspelled_instruction_is_refused():
    with pytest.raises(ValueError, match="line 2: 'RUNN'"):
        parse_dockerfile("FROM debian:13\nRUNN true\n")
    with pytest.raises(ValueError, match="continuation"):
        parse_dockerfile("FROM debian:13\nRUN true \\\n")


def docker_compose_reason() -> str | None:
    """Why ``docker compose config`` cannot run here, or None where it can."""
    if not shutil.which("docker"):
        return "no docker on PATH"
    if subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode != 0:
        return "docker is installed but no daemon answers (docker info fails)"
    if subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30).returncode != 0:
        return "docker has no compose plugin"
    return None


def test_docker_compose_accepts_the_file():
    reason = docker_compose_reason()
    if reason:
        pytest.skip(reason)
    env = {**os.environ, "POSTGRES_PASSWORD": "only-for-this-check"}
    result = subprocess.run(["docker", "compose", "-f", str(COMPOSE), "config", "--quiet"],
                            capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr

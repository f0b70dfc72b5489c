"""List-valued settings from the environment are lists of items, never of characters: a role
list that fell apart into letters would lock every admin out without a word."""

from __future__ import annotations

import pytest

from kernelcup.core.access.permissions import role_of
from kernelcup.core.config import load_settings
from kernelcup.core.messages import Actor
from kernelcup.core.store.models import Role


@pytest.mark.parametrize(("value", "expected"), [
    ("slack:T1/U2 discord:42", ["slack:T1/U2", "discord:42"]),
    ("slack:T1/U2,discord-role:Problem setters", ["slack:T1/U2", "discord-role:Problem setters"]),
    ('["discord:42"]', ["discord:42"]),
    ("discord:42", ["discord:42"]),
])
def test_roles_from_the_environment_are_lists_of_identities(value: str, expected: list[str]) -> None:
    settings = load_settings(env={"KERNELCUP_ROLES__ADMIN": value, "KERNELCUP_ROLES__CREATOR": value})
    assert settings.roles["admin"] == expected and settings.roles["creator"] == expected


def test_an_admin_named_in_the_environment_is_an_admin() -> None:
    settings = load_settings(env={"KERNELCUP_ROLES__ADMIN": "console:alice console:bob"})
    assert role_of(Actor("console:bob", "bob"), settings) is Role.ADMIN
    assert role_of(Actor("console:eve", "eve"), settings) is not Role.ADMIN


def test_an_empty_variable_is_unset_and_an_empty_list_is_emptied() -> None:
    """A line of .env left blank (`KERNELCUP_DATABASE_URL=`, as .env.example and compose files
    leave them) keeps the documented default; a list set empty is an empty list."""
    defaults = load_settings(env={})
    blank = load_settings(env={"KERNELCUP_DATABASE_URL": "", "KERNELCUP_LEADERBOARDS_DIR": " ",
                               "KERNELCUP_LIMITS__MAX_FILE_BYTES": "", "KERNELCUP_ROLES__ADMIN": ""})
    assert blank.database_url == defaults.database_url and blank.database_url.startswith("sqlite:///")
    assert blank.leaderboards_dir == defaults.leaderboards_dir
    assert blank.limits.max_file_bytes == defaults.limits.max_file_bytes
    assert blank.roles["admin"] == []

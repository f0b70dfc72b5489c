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

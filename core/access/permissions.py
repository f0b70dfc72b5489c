"""The one place that decides who may do what: config maps identities and platform roles to roles."""

from __future__ import annotations

from kernelcup.core.config import Settings
from kernelcup.core.errors import Forbidden
from kernelcup.core.messages import Actor
from kernelcup.core.roles import Role

_ORDER = {Role.USER: 0, Role.CREATOR: 1, Role.ADMIN: 2}


def role_of(actor: Actor, settings: Settings) -> Role:
    platform = actor.identity.split(":", 1)[0]
    keys = {actor.identity, f"{platform}:*", *actor.platform_roles}
    for role in (Role.ADMIN, Role.CREATOR):
        if keys & set(settings.roles.get(role.value, [])):
            return role
    return Role.USER


def allows(have: Role, need: Role) -> bool:
    return _ORDER[have] >= _ORDER[need]


def require(have: Role, need: Role, what: str) -> None:
    if not allows(have, need):
        raise Forbidden(f"Only {need.value}s may {what}.", "Ask an admin of this bot for the role.")

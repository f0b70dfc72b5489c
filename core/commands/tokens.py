"""``token``: a personal API token for the web API and the remote CLI, on every platform.

The token is shown once, ephemerally; only its sha256 is stored (kernelcup.core.access.tokens).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelcup.core.access.permissions import require
from kernelcup.core.commands.registry import CommandContext, Kind, Param, command
from kernelcup.core.errors import NotFound
from kernelcup.core.messages import Actor, Code, Reply, Request, Text
from kernelcup.core.roles import Role

if TYPE_CHECKING:  # the store is imported by the handlers as they run: the registry loads without it
    from sqlmodel import Session

    from kernelcup.core.store.models import User



@command(
    "token",
    "a new personal API token for the web API and the remote CLI (shown once)",
    Param("user", Kind.USER, "admins: a token for this user (created if it is a new identity)", positional=True),
    Param("revoke", Kind.FLAG, "revoke every token instead of issuing one"),
)
def token_command(app: CommandContext, request: Request) -> Reply:
    from kernelcup.core.access.tokens import issue_token, revoke_tokens
    from kernelcup.core.access.users import user_for
    from kernelcup.core.store.db import session_scope

    other = request.args["user"]
    now = app.now()
    with session_scope(app.engine) as session:
        if other and other != request.actor.identity:
            require(request.role, Role.ADMIN, "issue or revoke tokens for others")
            user = _user_for_admin(session, str(other))
        else:
            user = user_for(session, request.actor)
        if request.args["revoke"]:
            count = revoke_tokens(session, user, now=now)
            return Reply([Text(f"Revoked {count} token(s) of {user.display_name} ({user.identity}).",
                               style="success")], ephemeral=True)
        token = issue_token(session, user, label=f"issued by {request.actor.identity}", now=now)
    return Reply(
        [
            Text(f"A new API token for {user.display_name} ({user.identity}). It is shown only this once:",
                 style="success"),
            Code(token),
            Text("Send it as `Authorization: Bearer <token>`, or set KERNELCUP_TOKEN for "
                 "`kernelcup --server URL ...`. `token --revoke` revokes all of them.", style="hint"),
        ],
        ephemeral=True,
    )


def _user_for_admin(session: Session, identity: str) -> User:
    """An existing user by identity or name; a new identity (``platform:id``) becomes a user, so an
    admin can issue a token for an account that has not written yet (a CI job, say)."""
    from kernelcup.core.access.users import find_user, user_for

    try:
        return find_user(session, identity)
    except NotFound:
        platform, _, name = identity.partition(":")
        if not platform or not name:
            raise
        return user_for(session, Actor(identity=identity, display_name=name))

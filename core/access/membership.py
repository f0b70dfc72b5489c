"""Private leaderboards: who is a member, and how one becomes one.

A private leaderboard (``visibility == "private"``) is seen and entered by its members, its
creator and admins; to everyone else it answers as a leaderboard that does not exist. One
becomes a member with its invite code (``join NAME --code CODE``), or by holding an entry of its
role list: the same keys as the config's roles (an identity such as ``slack:T1/U2``, a
platform's wildcard ``discord:*``, a platform role ``discord-role:Class-2026`` or
``slack-group:S123``). A role holder is admitted on their first command from a platform that
knows the role; the membership is a row, so the web pages and the API (which know no chat
roles) then let them in too. Only the code's sha256 is stored; the code is shown once.
"""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import select as select_rows
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import object_session
from sqlmodel import Session, col, select

from kernelcup.core.access.users import user_for
from kernelcup.core.messages import Actor
from kernelcup.core.store.models import Leaderboard, LeaderboardMember, User

PRIVATE = "private"


def actor_keys(actor: Actor) -> set[str]:
    """What a role list is matched against: as ``kernelcup.core.access.permissions.role_of`` does."""
    platform = actor.identity.split(":", 1)[0]
    return {actor.identity, f"{platform}:*", *actor.platform_roles}


def role_list(board: Leaderboard) -> list[str]:
    return board.member_roles.split()


def code_digest(code: str) -> str:
    return hashlib.sha256(code.strip().encode()).hexdigest()


def new_code(board: Leaderboard) -> str:
    """A fresh invite code for ``board`` (the old one stops working); only its digest is kept."""
    code = secrets.token_urlsafe(9)
    board.invite_code_sha256 = code_digest(code)
    return code


def code_matches(board: Leaderboard, code: str) -> bool:
    stored = board.invite_code_sha256
    return stored is not None and bool(code) and secrets.compare_digest(stored, code_digest(code))


def is_member(board: Leaderboard, user_id: int) -> bool:
    """Read through the session ``board`` was loaded in, so every caller of
    ``kernelcup.core.access.visibility.may_see_board`` gets the rule without passing one; a
    board outside a session has no members (fail closed)."""
    session = object_session(board)
    if session is None or board.id is None:
        return False
    found = session.execute(
        select_rows(col(LeaderboardMember.id)).where(
            col(LeaderboardMember.leaderboard_id) == board.id, col(LeaderboardMember.user_id) == user_id)
    ).first()
    return found is not None


def admit(session: Session, board: Leaderboard, user: User, via: str) -> bool:
    """Make ``user`` a member; False when they were one already."""
    assert board.id is not None and user.id is not None
    if is_member(board, user.id):
        return False
    try:
        with session.begin_nested():
            session.add(LeaderboardMember(leaderboard_id=board.id, user_id=user.id, via=via))
    except IntegrityError:  # another process admitted them first
        return False
    return True


def admit_by_role(session: Session, actor: Actor) -> list[str]:
    """Admit ``actor`` to every private leaderboard whose role list names one of their keys (run
    before each command); the names of those newly joined. Losing the role later does not end
    the membership: ``private NAME --remove USER`` does."""
    keys = actor_keys(actor)
    listed = session.exec(select(Leaderboard).where(col(Leaderboard.visibility) == PRIVATE,
                                                    col(Leaderboard.member_roles) != "")).all()
    matching = [board for board in listed if keys & set(role_list(board))]
    if not matching:
        return []
    user = user_for(session, actor)
    return [board.name for board in matching if admit(session, board, user, "role")]


def remove(session: Session, board: Leaderboard, user: User) -> bool:
    member = session.exec(select(LeaderboardMember).where(
        col(LeaderboardMember.leaderboard_id) == board.id, col(LeaderboardMember.user_id) == user.id)).first()
    if member is None:
        return False
    session.delete(member)
    return True


def member_count(session: Session, board: Leaderboard) -> int:
    return len(session.exec(select(LeaderboardMember.id).where(col(LeaderboardMember.leaderboard_id) == board.id))
               .all())

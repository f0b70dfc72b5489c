"""Private leaderboards: an organizer makes one invite-only (``private``), and people join it with
its code or a role on its list (``join``). The rule itself: ``kernelcup.core.access.membership``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelcup.core.access.permissions import allows
from kernelcup.core.commands.registry import CommandContext, Kind, Param, command
from kernelcup.core.errors import Forbidden
from kernelcup.core.messages import Block, Reply, Request, Text
from kernelcup.core.roles import Role

if TYPE_CHECKING:
    from sqlmodel import Session

    from kernelcup.core.store.models import Leaderboard


@command(
    "private",
    "make a leaderboard invite-only (members join with a code or a role), or show who may join",
    Param("leaderboard", Kind.LEADERBOARD, "leaderboard name", required=True, positional=True),
    Param("code", Kind.FLAG, "issue a new invite code (shown once; the old one stops working)"),
    Param("roles", Kind.TEXT, "roles whose holders are members, as in the config's roles "
          "(discord-role:NAME, slack-group:ID, an identity); 'none' empties the list", many=True),
    Param("remove", Kind.USER, "take a member out"),
    Param("public", Kind.FLAG, "open it to everyone again (members and roles are kept)"),
    role=Role.CREATOR,
)
def private_command(app: CommandContext, request: Request) -> Reply:
    from kernelcup.core.store.db import session_scope

    with session_scope(app.engine) as session:
        board = _organized_board(session, request)
        blocks = _apply(session, board, request)
        blocks.append(_status(session, board))
    return Reply(blocks, ephemeral=True)  # an invite code is never posted to a channel


def _organized_board(session: Session, request: Request) -> Leaderboard:
    from kernelcup.core.access.users import user_for
    from kernelcup.core.access.visibility import visible_leaderboard

    user = user_for(session, request.actor)
    board = visible_leaderboard(session, str(request.args["leaderboard"]), user_id=user.id, role=request.role)
    if board.creator_id != user.id and not allows(request.role, Role.ADMIN):
        raise Forbidden(f"Only {board.name}'s creator or an admin may change who may join it.")
    return board


def _apply(session: Session, board: Leaderboard, request: Request) -> list[Block]:
    import structlog

    from kernelcup.core.access.membership import PRIVATE, new_code, remove
    from kernelcup.core.access.users import find_user

    args, blocks = request.args, list[Block]()
    if args["public"]:
        board.visibility = "public"
    elif board.visibility != PRIVATE:
        board.visibility = PRIVATE
        blocks.append(Text(f"{board.name} is now private: only its members, its creator and admins see it "
                           "and may submit.", style="success"))
    if args["roles"]:
        given = [entry for value in args["roles"] for entry in str(value).replace(",", " ").split()]
        entries = [] if [e.lower() for e in given] == ["none"] else list(dict.fromkeys(given))
        board.member_roles = " ".join(entries)
    if args["remove"]:
        user = find_user(session, str(args["remove"]))
        gone = remove(session, board, user)
        blocks.append(Text(f"{user.display_name} {'is no longer' if gone else 'was not'} a member.", style="hint"))
    if args["code"]:
        code = new_code(board)
        blocks.append(Text(f"Invite code: {code}  (shown once; members join with `join {board.name} --code {code}`)",
                           style="success"))
    session.add(board)
    structlog.get_logger(__name__).info(
        "leaderboard access changed", leaderboard=board.name, by=request.actor.identity,
        visibility=board.visibility, roles=board.member_roles, new_code=bool(args["code"]),
        removed=str(args["remove"] or ""))
    return blocks


def _status(session: Session, board: Leaderboard) -> Text:
    from kernelcup.core.access.membership import PRIVATE, member_count, role_list

    if board.visibility != PRIVATE:
        return Text(f"{board.name} is {board.visibility}.", style="hint")
    roles = ", ".join(role_list(board)) or "none"
    code = "set" if board.invite_code_sha256 else "none (`--code` issues one)"
    return Text(f"{board.name} is private: {member_count(session, board)} member(s); invite code {code}; "
                f"roles {roles}.", style="hint")


@command(
    "join",
    "join an invite-only leaderboard with its code (or a role on its list)",
    Param("leaderboard", Kind.TEXT, "leaderboard name", required=True, positional=True),
    Param("code", Kind.TEXT, "the invite code its organizer gave you"),
)
def join_command(app: CommandContext, request: Request) -> Reply:
    from sqlmodel import select

    from kernelcup.core.access.membership import PRIVATE, actor_keys, admit, code_matches, role_list
    from kernelcup.core.access.users import user_for
    from kernelcup.core.access.visibility import may_see_board
    from kernelcup.core.leaderboards.catalog import missing_leaderboard
    from kernelcup.core.store.db import session_scope
    from kernelcup.core.store.models import Leaderboard

    name = str(request.args["leaderboard"])
    with session_scope(app.engine) as session:
        user = user_for(session, request.actor)
        board = session.exec(select(Leaderboard).where(Leaderboard.name == name)).first()
        if board is not None and may_see_board(board, user_id=user.id, role=request.role):
            if board.visibility != PRIVATE:
                return Reply([Text(f"{board.name} is open to everyone: no need to join.", style="hint")],
                             ephemeral=True)
            return Reply([Text(f"You are already in {board.name}.", style="hint")], ephemeral=True)
        # A wrong code answers as an unknown name does: codes cannot find private leaderboards.
        if board is None or board.visibility != PRIVATE:
            raise missing_leaderboard(session, name)
        if code_matches(board, str(request.args["code"] or "")):
            via = "code"
        elif actor_keys(request.actor) & set(role_list(board)):
            via = "role"
        else:
            raise missing_leaderboard(session, name)
        admit(session, board, user, via)
    return Reply([Text(f"You joined {board.name}: `show {board.name}`, `task {board.name}`, and submit to it.",
                       style="success")], ephemeral=True)

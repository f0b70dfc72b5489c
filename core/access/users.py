"""Users are identified by a platform-namespaced identity; they are created on first contact."""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from kernelcup.core.errors import NotFound
from kernelcup.core.messages import Actor
from kernelcup.core.store.models import User


def user_for(session: Session, actor: Actor) -> User:
    user = session.exec(select(User).where(User.identity == actor.identity)).first()
    if user is None:
        user = User(identity=actor.identity, display_name=actor.display_name)
        try:
            with session.begin_nested():
                session.add(user)
        except IntegrityError:  # another process created it first
            user = session.exec(select(User).where(User.identity == actor.identity)).one()
    elif user.display_name != actor.display_name and actor.display_name:
        user.display_name = actor.display_name
        session.add(user)
    return user


def find_user(session: Session, identity_or_name: str) -> User:
    user = session.exec(select(User).where(User.identity == identity_or_name)).first()
    if user is None:
        matches = session.exec(select(User).where(User.display_name == identity_or_name)).all()
        if len(matches) == 1:
            return matches[0]
        raise NotFound(
            f"No user {identity_or_name!r}.",
            "Give the platform identity, e.g. discord:1234 or console:alice.",
        )
    return user

"""Webhook deliveries acted on once: a platform that delivers one again (its retry, or someone
pressing "Redeliver") finds its id here and nothing runs twice, across restarts too."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import WebhookDelivery


def first_delivery(engine: Engine, source: str, delivery_id: str, now: datetime) -> bool:
    """Record the delivery; True the first time its id is seen, False ever after. The primary
    key decides, so two processes that receive it at once cannot both act on it."""
    try:
        with session_scope(engine) as session:
            session.add(WebhookDelivery(source=source, delivery_id=delivery_id, received_at=now))
    except IntegrityError:
        return False
    return True

"""Inbound message ids a surface has already handled, so a redelivered message decides nothing."""

from __future__ import annotations

from contracts.enums import SurfaceType
from storage.ledger import get_flag, mark_once
from storage.work import Work


def namespace(surface: SurfaceType) -> str:
    """The `flags` namespace of one surface's handled inbound message ids."""
    return f"{surface.value}_in"


def record(tx: Work, surface: SurfaceType, message_id: str, now: float) -> bool:
    """Record a handled message; True the first time, False for a copy."""
    return mark_once(tx, namespace(surface), message_id, now)


def seen(tx: Work, surface: SurfaceType, message_id: str) -> bool:
    """True if the message was handled before."""
    return get_flag(tx, namespace(surface), message_id) is not None

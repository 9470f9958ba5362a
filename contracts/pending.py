"""What a surface may ask about the requests waiting for one person (Home tab, `/cosigner pending`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from contracts.enums import SurfaceType
from contracts.ports import Delivered, Placed, Route


@runtime_checkable
class PendingDesk(Protocol):
    """The pending requests of a tenant that name a person as an approver on a surface."""

    async def pending_of(self, tenant: str, surface: SurfaceType, person: str) -> Sequence[Placed]:
        """Pending requests of `tenant` routed to `surface` that `person` may answer, newest first."""
        ...


@runtime_checkable
class Permalinks(Protocol):
    """A surface that can link to where it asked (Slack's `chat.getPermalink`)."""

    async def permalink(self, route: Route, delivered: Delivered) -> str | None:
        """A link to the delivered card, or None when the surface cannot give one."""
        ...

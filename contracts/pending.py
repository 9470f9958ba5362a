"""What a surface may ask about the requests waiting for one person (Home tab, `/cosigner pending`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from contracts.enums import SurfaceType
from contracts.ports import Placed


@runtime_checkable
class PendingDesk(Protocol):
    """The pending requests of a tenant that name a person as an approver on a surface."""

    async def pending_of(self, tenant: str, surface: SurfaceType, person: str) -> Sequence[Placed]:
        """Pending requests of `tenant` routed to `surface` that `person` may answer, newest first."""
        ...

"""Standing allows: their wire models (from the agent SDK), the lengths an approver may
choose, and the narrow port a surface uses to let a person see and revoke their own.

An "Allow for …" answer approves one call and allows calls like it for a while: the same
tool, tenant, requester and conversation, the arguments the policy's `allow_for_match`
names equal, the numbers `allow_for_at_most` names at most the approved call's, for at most
`allow_for_uses` calls. It is offered only where the policy sets `allow_for` on the tool,
and only for the lengths up to that cap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from contracts.enums import SurfaceType
from cosigner.allowances import ALLOWANCE_ID_PATTERN, Allowance, AllowanceGrantor, AllowanceList

__all__ = [
    "ALLOWANCE_ID_PATTERN",
    "CHOICES",
    "Allowance",
    "AllowanceDesk",
    "AllowanceGrantor",
    "AllowanceList",
    "Choice",
    "choice_named",
    "choices_up_to",
]


@dataclass(frozen=True)
class Choice:
    """One length an approver may allow for: its seconds, its short name and its words."""

    seconds: float
    name: str  # "1h": what SMS `ALLOW 1H` and a button's value carry
    words: str  # "1 hour": what a card says


CHOICES = (
    Choice(900.0, "15m", "15 minutes"),
    Choice(3600.0, "1h", "1 hour"),
    Choice(28800.0, "8h", "8 hours"),
)


def choices_up_to(cap: float | None) -> tuple[Choice, ...]:
    """The lengths offered under a tool's `allow_for` cap (none without one)."""
    if cap is None:
        return ()
    return tuple(c for c in CHOICES if c.seconds <= cap)


def choice_named(name: str) -> Choice | None:
    """The length a button or a text names (`1h`, case ignored), or None for any other."""
    wanted = name.strip().lower()
    return next((c for c in CHOICES if c.name == wanted), None)


@runtime_checkable
class AllowanceDesk(Protocol):
    """What a surface may do with standing allows: show a person theirs and revoke one."""

    async def allowances_of(self, tenant: str, surface: SurfaceType, person: str) -> Sequence[Allowance]:
        """The standing allows in force that `person` granted on `surface` in `tenant`."""
        ...

    async def revoke_own(
        self, tenant: str, surface: SurfaceType, person: str, allowance_id: str
    ) -> Allowance:
        """Revoke a standing allow `person` granted; `AllowanceNotFound` for any other (or none)."""
        ...

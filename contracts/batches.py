"""Answer many at once: the requests offered together, a batch answer, and the ports for them.

When two or more pending requests for one tool wait for the same approvers in one Slack
conversation, the surface shows them together on one batch card. Its buttons carry the exact
list of (approval id, digest of the call as shown) they answer: an answer to a list that is
not what waits now is refused as stale, and nothing is decided. Each call is then answered on
its own, through the same checks as a press on its own card.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from contracts.enums import SurfaceType, Verdict
from contracts.ports import ApprovalCard, Delivered, Route

MIN_BATCH = 2
"""Fewer waiting requests than this are answered on their own cards only."""

MAX_BATCH = 20
"""The most requests one batch card lists (a button's value holds the ids and digests of all)."""

BATCH_VERDICTS = frozenset({Verdict.APPROVE, Verdict.DENY})
"""What a batch answer may say: Approve all, Deny all (no run grant, no standing deny)."""

Listed = tuple[tuple[str, str], ...]
"""(approval id, digest of the call as shown) of each request a batch answer is for, in order."""


@dataclass(frozen=True)
class Batch:
    """The requests waiting together: the same tenant, tool, conversation and approvers.

    `key` names the group; `cards` are the pending requests, oldest first (none: the card
    is to be withdrawn, as nothing or only one request waits)."""

    key: str
    tool_name: str
    conversation: str  # where the requests' cards are (a Slack channel id as posted, `D…` for a DM)
    cards: tuple[ApprovalCard, ...]

    @property
    def listed(self) -> Listed:
        """The (approval id, digest) pairs a batch answer to these cards must carry."""
        return tuple((c.approval_id, c.digest) for c in self.cards)


@dataclass(frozen=True)
class BatchShown:
    """What showing a batch did: where its card is (None: no card was posted) and whether
    its buttons offer the batch now (False: withdrawn, or it does not fit whole)."""

    delivered: Delivered | None
    offered: bool


@dataclass(frozen=True)
class BatchAnswer:
    """A person's answer to a batch card, as the surface verified and parsed it: the same
    where-and-who fields as an `Answer`, the verdict, and the list its button carried."""

    surface: SurfaceType
    verdict: Verdict
    listed: Listed
    actor: str
    org: str | None
    actor_org: str | None
    conversation: str
    message_ref: str | None = None
    app_id: str | None = None
    enterprise_id: str | None = None


@runtime_checkable
class BatchSurface(Protocol):
    """What a surface that shows batch cards offers besides (`SurfaceAdapter`)."""

    async def show_batch(self, batch: Batch, route: Route, delivered: Delivered | None) -> BatchShown:
        """Post the batch card (`delivered` None) or update it in place; a batch of fewer than
        `MIN_BATCH` cards, or one that does not fit whole, withdraws the buttons of a card
        already posted and posts none."""
        ...


@runtime_checkable
class BatchDesk(Protocol):
    """What a surface hands a batch answer to."""

    async def answer_batch(self, answer: BatchAnswer) -> tuple[ApprovalCard, ...]:
        """Check the whole batch first (stale: `ParametersMismatch`, nothing decided), then
        answer each call as a press on its own card; the cards as they stand after."""
        ...

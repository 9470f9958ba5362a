"""What the engine is built of, in four groups (`Engine(stores, rules, observe, reach)`).

- `Stores`: where approvals and standing denies are kept (`db`, `denials`).
- `Rules`: what decides and vouches (`policy`, its `shadow`, `callback_allow`, the grant
  `signer`, the `seal` of parameters kept for later).
- `Observe`: what watches (`metrics`, `tracing`).
- `Reach`: whom the engine reaches and wakes (`surfaces`, `sms_sender`, `notifier`,
  `oncall`, `handoffs`, `wakeups`).

The engine keeps each collaborator under its own name (`engine.db`, `engine.policy`, …);
the groups only carry them in. Also here: `Wakeups`, the events that wake the workers, and
`HandoffKind`, the handoff request kind plugged in through `Reach`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from bot.approvals.denials import Denials
from bot.approvals.grants import GrantSigner
from bot.approvals.notifier import Notifier
from bot.egress import AllowList
from bot.observability import Metrics, Tracing
from bot.oncall import OnCall
from bot.policy import Policy, SmsSender
from contracts.answers import PersonDecider
from contracts.enums import SurfaceType
from contracts.ports import ApprovalCard
from contracts.wire import ApprovalRequest
from storage.database import Database
from storage.records import Record
from storage.sealing import TokenSeal

if TYPE_CHECKING:
    from bot.approvals.engine import Engine


class Wakeups:
    """The events that wake the background workers: `jobs` when work was queued, `expiry`
    when an approval's deadline may have moved. Made once by the app and handed to the
    engine and to whatever queues or runs that work."""

    def __init__(self) -> None:
        self.jobs = asyncio.Event()
        self.expiry = asyncio.Event()

    def all(self) -> None:
        """Wake both (time moved, or the app stops)."""
        self.jobs.set()
        self.expiry.set()


class HandoffKind(Protocol):
    """The handoff request kind, plugged in at construction (`bot.handoffs.lifecycle.Handoffs`)."""

    done_wait: float

    def sealed(self, tenant: str, req: ApprovalRequest) -> str | None:
        """A new handoff's parameters sealed for its check (None: this server cannot seal);
        `bot.approvals.prepare` builds the handoff's state."""
        ...

    async def press_done(
        self,
        engine: Engine,
        approval_id: str,
        decider: PersonDecider,
        check: Callable[[Record], None],
        *,
        tenant: str | None = None,
        message: tuple[SurfaceType, str] | None = None,
    ) -> ApprovalCard:
        """Done pressed: on the dashboard (`tenant`), or on a surface (`message` carried it)."""
        ...


@dataclass(frozen=True)
class Stores:
    """Where approvals are kept, and the standing denies (None: made on `db`)."""

    db: Database
    denials: Denials | None = None


@dataclass(frozen=True)
class Rules:
    """What decides and vouches: the policy, the grant signer, the shadow policy decided
    alongside (acts on nothing, COSIGNER_POLICY_SHADOW), where callbacks may go, and the
    seal of parameters kept for a handoff's check or an edit."""

    policy: Policy
    signer: GrantSigner
    shadow: Policy | None = None
    callback_allow: AllowList | None = None
    seal: TokenSeal | None = None


@dataclass(frozen=True)
class Observe:
    """What watches the engine: its metrics and its spans (None: none exported)."""

    metrics: Metrics
    tracing: Tracing | None = None


@dataclass(frozen=True)
class Reach:
    """Whom the engine reaches and wakes: the surfaces requests may be routed to (read at each
    request: the app's own set, which its adapters join once built; None: the dashboard),
    the SMS sender, the waiters' notifier, the on-call lookup, the handoff kind, and the
    workers' wakeups."""

    surfaces: Collection[str] | None = None
    sms_sender: SmsSender | None = None
    notifier: Notifier | None = None
    oncall: OnCall | None = None
    handoffs: HandoffKind | None = None
    wakeups: Wakeups | None = None

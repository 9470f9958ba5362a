"""A Temporal recipe: a workflow waits for Cosigner's decision as an update, expiry as its timeout.

In the workflow module (Cosigner's code is passed through the workflow sandbox):

    with workflow.unsafe.imports_passed_through():
        from cosigner.adapters.temporal import UPDATE, ApprovalAsk, ApprovalInbox, ApprovalState, approval

    @workflow.defn
    class Refund:
        def __init__(self) -> None:
            self.inbox = ApprovalInbox()

        @workflow.update(name=UPDATE)
        def cosigner_decision(self, state: ApprovalState) -> None:
            self.inbox.deliver(state)

        @workflow.run
        async def run(self, order_id: str) -> str:
            ask = ApprovalAsk(workflow.info().workflow_id, "refund", "issue_refund", {...}, CALLBACK_URL)
            state = await approval(self.inbox, ask)
            ...  # run the refund activity only if state.approved; else state.message says why

The worker registers `CosignerActivities(client, surface).activities`; the application's
callback endpoint calls `deliver(temporal_client, body, headers, secret)`, which checks the
signature and sends the update. The update only wakes the workflow: before anything runs,
an activity reads the decision from Cosigner again and checks its digest and grant. The
execution id is the workflow id (so a callback finds its workflow); the tool call id is
the workflow's own name for the step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from temporalio import activity, workflow
from temporalio.client import Client

from cosigner import AsyncCosigner, Cosigner, webhooks
from cosigner.adapters.verdict import Approver, ToolCall, Verdict, expiry_message, result_report
from cosigner.errors import AlreadyDecided
from cosigner.surfaces import Surface
from cosigner.webhooks import DeliveryLog

__all__ = [
    "UPDATE",
    "ApprovalAsk",
    "ApprovalInbox",
    "ApprovalState",
    "CosignerActivities",
    "ResultReport",
    "approval",
    "deliver",
]

UPDATE: Final = "cosigner_decision"
"""The name of the workflow update a decision arrives as."""

ASK, CONFIRM, CANCEL, REPORT = "cosigner.ask", "cosigner.confirm", "cosigner.cancel", "cosigner.report"


@dataclass
class ApprovalAsk:
    """One gated step of a workflow: the call, and where Cosigner sends its decision."""

    execution_id: str
    tool_call_id: str
    tool_name: str
    parameters: dict[str, Any]
    callback_url: str | None = None

    def call(self) -> ToolCall:
        """The adapters' view of the step."""
        return ToolCall(self.execution_id, self.tool_call_id, self.tool_name, self.parameters)


@dataclass
class ApprovalState:
    """Where an approval stands: `pending`, `approved`, `denied`, `expired`, `cancelled` or `refused`."""

    approval_id: str | None
    status: str
    message: str | None = None
    expires_in: float | None = None

    @property
    def approved(self) -> bool:
        """True only for an approval Cosigner confirmed for exactly this call."""
        return self.status == "approved" and self.message is None

    @classmethod
    def of(cls, verdict: Verdict) -> ApprovalState:
        """The state of an adapter verdict."""
        decision = verdict.decision
        if decision is None:
            return cls(None, "refused", verdict.message)
        expires_in = None
        if decision.pending and decision.expires_at is not None:
            expires_in = max(0.0, (decision.expires_at - datetime.now(UTC)).total_seconds())
        return cls(decision.approval_id, decision.status.value, verdict.message, expires_in)


@dataclass
class ResultReport:
    """What an approved step returned (or the error it raised), for the audit record."""

    ask: ApprovalAsk
    result: Any = None
    error: str | None = None


@dataclass
class ApprovalInbox:
    """The workflow's record of decisions delivered by update, by approval id."""

    decided: dict[str, str] = field(default_factory=dict)
    waiting: str | None = None
    """The approval the workflow is waiting for, if any (worth exposing through a query)."""

    def deliver(self, state: ApprovalState) -> None:
        """Record a delivered decision (call from the workflow's update handler)."""
        if state.approval_id is not None and state.status != "pending":
            self.decided[state.approval_id] = state.status


async def approval(
    inbox: ApprovalInbox, ask: ApprovalAsk, *, activity_timeout: timedelta = timedelta(seconds=60)
) -> ApprovalState:
    """In a workflow: ask Cosigner, wait for the decision's update or the deadline, confirm it."""
    state: ApprovalState = await workflow.execute_activity(
        ASK, ask, result_type=ApprovalState, start_to_close_timeout=activity_timeout
    )
    if state.status != "pending" or state.approval_id is None:
        return state
    approval_id = inbox.waiting = state.approval_id
    try:
        await workflow.wait_condition(
            lambda: approval_id in inbox.decided, timeout=timedelta(seconds=state.expires_in or 0)
        )
    except TimeoutError:
        # Expiry means deny: withdraw the request so that no late answer can approve it.
        await workflow.execute_activity(
            CANCEL, approval_id, result_type=ApprovalState, start_to_close_timeout=activity_timeout
        )
        return ApprovalState(approval_id, "expired", expiry_message(ask.tool_name))
    finally:
        inbox.waiting = None
    confirmed: ApprovalState = await workflow.execute_activity(
        CONFIRM, ask, result_type=ApprovalState, start_to_close_timeout=activity_timeout
    )
    return confirmed


class CosignerActivities:
    """The activities `approval` runs: ask, confirm, cancel, and report a result."""

    def __init__(
        self,
        client: Cosigner | AsyncCosigner,
        surface: Surface,
        *,
        reason: str | None = None,
        timeout_seconds: int | None = None,
    ) -> None:
        self.approver = Approver(client, surface, reason=reason, timeout_seconds=timeout_seconds)

    @property
    def activities(self) -> list[Callable[..., Any]]:
        """Register these with the worker."""
        return [self.ask, self.confirm, self.cancel, self.report]

    @activity.defn(name=ASK)
    async def ask(self, ask: ApprovalAsk) -> ApprovalState:
        """Create the approval (idempotent on workflow id and step), without waiting."""
        return ApprovalState.of(
            await self.approver.aask(ask.call(), wait=False, callback_url=ask.callback_url)
        )

    @activity.defn(name=CONFIRM)
    async def confirm(self, ask: ApprovalAsk) -> ApprovalState:
        """Read the decision from Cosigner itself and check it is for exactly this call."""
        return ApprovalState.of(
            await self.approver.aask(ask.call(), wait=False, callback_url=ask.callback_url)
        )

    @activity.defn(name=CANCEL)
    async def cancel(self, approval_id: str) -> ApprovalState:
        """Withdraw a request the workflow stopped waiting for."""
        client = self.approver.client
        try:
            if isinstance(client, AsyncCosigner):
                decision = await client.cancel(approval_id)
            else:
                decision = await asyncio.to_thread(client.cancel, approval_id)
        except AlreadyDecided:
            return ApprovalState(approval_id, "decided")
        return ApprovalState(decision.approval_id, decision.status.value)

    @activity.defn(name=REPORT)
    async def report(self, report: ResultReport) -> None:
        """Put an approved step's result on the audit record."""
        verdict = await self.approver.aask(report.ask.call(), wait=False)
        if verdict.allowed:
            body = result_report(report.result) if report.error is None else {"error": report.error}
            await self.approver.areport(verdict, body)


async def deliver(
    client: Client,
    body: bytes | str,
    headers: Mapping[str, str],
    secret: str,
    *,
    seen: DeliveryLog | None = None,
) -> None:
    """From the callback endpoint: verify Cosigner's signed callback and send it to its workflow."""
    decision = webhooks.verify(body, headers, secret, seen=seen)
    state = ApprovalState(decision.approval_id, decision.status.value)
    await client.get_workflow_handle(decision.execution_id).execute_update(UPDATE, state)

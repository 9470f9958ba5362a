"""The Temporal recipe's workflow: a refund that runs only once Cosigner approved it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from cosigner.adapters.temporal import (
        REPORT,
        UPDATE,
        ApprovalAsk,
        ApprovalInbox,
        ApprovalState,
        ResultReport,
        approval,
    )

RAN: list[dict[str, Any]] = []


@activity.defn
async def issue_refund(order: dict[str, Any]) -> str:
    """The gated step itself (records each run)."""
    RAN.append(order)
    return f"refunded {order['amount_cents']} on {order['order_id']}"


@workflow.defn
class Refund:
    """Ask Cosigner, wait for its decision as an update (or the deadline), refund only if approved."""

    def __init__(self) -> None:
        self.inbox = ApprovalInbox()

    @workflow.update(name=UPDATE)
    def cosigner_decision(self, state: ApprovalState) -> None:
        """Cosigner's decision, delivered from its signed callback."""
        self.inbox.deliver(state)

    @workflow.query
    def waiting_for(self) -> str | None:
        """The approval the workflow waits for."""
        return self.inbox.waiting

    @workflow.run
    async def run(self, order: dict[str, Any], callback_url: str) -> str:
        """The refund, gated."""
        ask = ApprovalAsk(workflow.info().workflow_id, "refund", "issue_refund", order, callback_url)
        state = await approval(self.inbox, ask)
        if not state.approved:
            return state.message or state.status
        done: str = await workflow.execute_activity(
            issue_refund, order, start_to_close_timeout=timedelta(seconds=30)
        )
        await workflow.execute_activity(
            REPORT, ResultReport(ask, done), start_to_close_timeout=timedelta(seconds=30)
        )
        return done

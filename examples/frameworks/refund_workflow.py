"""The Temporal example's workflow and activity (a module of its own: Temporal sandboxes workflows)."""

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


@activity.defn
async def issue_refund(order: dict[str, Any]) -> str:
    """The gated step."""
    return f"refunded {order['amount_cents']} cents on {order['order_id']}"


@workflow.defn
class Refund:
    """Refund an order once Cosigner approved exactly this refund."""

    def __init__(self) -> None:
        self.inbox = ApprovalInbox()

    @workflow.update(name=UPDATE)
    def cosigner_decision(self, state: ApprovalState) -> None:
        """Cosigner's decision, from its signed callback."""
        self.inbox.deliver(state)

    @workflow.run
    async def run(self, order: dict[str, Any], callback_url: str) -> str:
        """Ask, wait (expiry is the deadline), then refund or say why not."""
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

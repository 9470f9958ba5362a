"""The half of the engine that surfaces talk to: the `ApprovalDesk` of `contracts.ports`.

Slack and SMS hand in verified, parsed answers and ask where approvals were delivered;
everything that changes an approval's status still goes through `Engine._close`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bot.checks import check_answer
from bot.policy import Policy
from bot.redaction import redact
from contracts.answers import DecidedBy, PersonDecider
from contracts.enums import ApprovalStatus, JobKind, SurfaceType, Verdict
from contracts.ports import Answer, ApprovalCard, Delivered, Placed, inbound_namespace
from storage import approvals as ledger
from storage import jobs
from storage.audit import Event
from storage.database import Database, Tx
from storage.records import Record, delivered_to_json


class Desk:
    """Answers from surfaces, delivery receipts, surface notes and durable flags."""

    db: Database
    policy: Policy
    clock: Callable[[], float]
    jobs_wakeup: asyncio.Event

    async def _close(
        self,
        approval_id: str,
        to: ApprovalStatus,
        decided_by: DecidedBy,
        *,
        comment: str | None = None,
        tenant: str | None = None,
        check: Callable[[Record], None] | None = None,
        audit_refusal: bool = False,
        run_grant: str | None = None,
        once: tuple[str, str] | None = None,
    ) -> Record:
        raise NotImplementedError  # Engine._close

    async def answer(self, answer: Answer) -> ApprovalCard:
        """Check an answer from Slack or SMS and apply it; refusals are audited."""
        team = (answer.actor_org or answer.org) if answer.surface == SurfaceType.SLACK else None
        actor = PersonDecider(surface=SurfaceType(answer.surface), userId=answer.actor, teamId=team or None)
        to = ApprovalStatus.DENIED if answer.verdict is Verdict.DENY else ApprovalStatus.APPROVED
        run_grant = None
        if answer.verdict is Verdict.APPROVE_FOR_RUN:
            run_grant = f"{answer.surface}:{answer.actor}"
        rec = await self._close(
            answer.approval_id,
            to,
            actor,
            comment=answer.comment,
            check=lambda rec: check_answer(rec, answer),
            audit_refusal=True,
            run_grant=run_grant,
            once=(inbound_namespace(answer.surface), answer.message_id) if answer.message_id else None,
        )
        return rec.card()

    async def placed(self, approval_id: str) -> Placed | None:
        """An approval with its route and receipt, whatever its tenant."""
        rec = await self.db.run_read(lambda tx: ledger.load(tx, approval_id))
        return rec.placed() if rec else None

    async def sending(self, approval_id: str, receipt: Delivered) -> None:
        """Store a receipt without messages before the surface sends anything, so an answer
        racing the delivery is matched; only while the approval is pending and has none."""
        stored = delivered_to_json(receipt)
        await self.db.run_write(lambda tx: ledger.set_receipt_if_pending(tx, approval_id, stored))

    async def _by_number(
        self, to_number: str, from_number: str, *, pending: bool, limit: int
    ) -> list[Placed]:
        recs = await self.db.run_read(
            lambda tx: ledger.by_delivery(tx, f"sms:{to_number}", pending=pending, limit=limit)
        )
        found = [r.placed() for r in recs]
        return [p for p in found if p is not None and from_number in p.route.approvers]

    async def pending_for_number(self, to_number: str, from_number: str) -> Sequence[Placed]:
        """Pending SMS approvals sent from `to_number` (or service) to approver `from_number`."""
        return await self._by_number(to_number, from_number, pending=True, limit=200)

    async def latest_for_number(self, to_number: str, from_number: str) -> Placed | None:
        """The newest SMS approval between these numbers, in any state."""
        found = await self._by_number(to_number, from_number, pending=False, limit=50)
        return found[0] if found else None

    async def delivered(self, approval_id: str, receipt: Delivered) -> None:
        """Store a delivery receipt; if the approval closed meanwhile, queue the card update."""

        def step(tx: Tx) -> bool:
            rec = ledger.load(tx, approval_id, lock=True)
            if rec is None:
                return False
            now = self.clock()
            rec = ledger.append(
                tx,
                rec,
                now,
                [
                    Event(
                        "delivered",
                        {"kind": "system"},
                        {
                            "surface": receipt.surface,
                            "conversation": receipt.conversation,
                            "messages": list(receipt.message_refs),
                        },
                    )
                ],
                {"delivered": delivered_to_json(receipt)},
            )
            if rec.closed:
                jobs.queue(tx, JobKind.SHOW, rec.id, {}, now, now + 3600)
            return rec.closed

        if await self.db.run_write(step):
            self.jobs_wakeup.set()

    async def note(self, approval_id: str, event: str, data: Mapping[str, Any]) -> None:
        """Append a surface event to the approval's audit chain (redacted)."""

        def step(tx: Tx) -> None:
            rec = ledger.load(tx, approval_id, lock=True)
            if rec is not None:
                ledger.append(tx, rec, self.clock(), [Event(event, {"kind": "surface"}, redact(dict(data)))])

        await self.db.run_write(step)

    async def mark_once(self, namespace: str, key: str) -> bool:
        """True the first time `key` is seen in `namespace`."""

        now = self.clock()
        return await self.db.run_write(lambda tx: ledger.mark_once(tx, namespace, key, now))

    async def set_flag(self, namespace: str, key: str, value: str | None) -> None:
        """Set or clear a durable flag."""
        now = self.clock()
        await self.db.run_write(lambda tx: ledger.set_flag(tx, namespace, key, value, now))

    async def get_flag(self, namespace: str, key: str) -> str | None:
        """Read a durable flag."""
        return await self.db.run_read(lambda tx: ledger.get_flag(tx, namespace, key))

    def tenant_for_org(self, surface: str, org: str) -> str | None:
        """The tenant whose policy names this Slack team/enterprise or SMS number."""
        return self.policy.tenant_for_org(surface, org)

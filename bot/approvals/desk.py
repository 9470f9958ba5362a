"""The desk surfaces talk to: the `ApprovalDesk` (and `SmsDesk`) of `contracts.ports`.

Slack and SMS hand in verified, parsed answers; SMS also asks where approvals were texted.
The SMS surface keeps its own state in the `SmsStore` (`contracts.sms`) its factory hands
it, `sms_store` here (`storage.sms_state.SmsState`), which the desk itself never uses.
Everything that changes an approval goes through the engine, and every answer through the
one transition of `bot.approvals.lifecycle`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from bot.approvals import allowances, denials, edits
from bot.approvals.allowances import Allowances
from bot.approvals.answerers import check_answer, check_reader
from bot.approvals.batches import BatchAnswers
from bot.approvals.collaborators import HandoffKind
from bot.approvals.denials import Denials
from bot.approvals.engine import Engine
from bot.approvals.judging import closed_error
from bot.approvals.lifecycle import Closing
from bot.policy import Policy
from contracts.allowances import Allowance
from contracts.answers import PersonDecider
from contracts.batches import BatchAnswer
from contracts.denials import Denial
from contracts.edits import EditForm, EditPreview
from contracts.enums import ApprovalStatus, AuditEvent, SurfaceType, Verdict
from contracts.errors import ApprovalNotFound, InvalidRequest
from contracts.ports import Answer, ApprovalCard, Delivered, Look, Placed
from contracts.sms import SmsStore
from storage import inbox as pending
from storage import ledger
from storage.database import Database
from storage.records import Record
from storage.work import Work

T = TypeVar("T")
CLOSING_VERDICTS = {
    Verdict.APPROVE: ApprovalStatus.APPROVED,
    Verdict.APPROVE_FOR_RUN: ApprovalStatus.APPROVED,
    Verdict.ALLOW_FOR: ApprovalStatus.APPROVED,
    Verdict.CANCEL: ApprovalStatus.CANCELLED,
}


def inbound_of(answer: Answer) -> tuple[SurfaceType, str] | None:
    """The surface message that carried an answer, recorded with it (SMS MessageSid)."""
    return (SurfaceType(answer.surface), answer.message_id) if answer.message_id else None


class Desk:
    """Answers from surfaces and delivery lookups; and the SMS surfaces' store, for their factories."""

    def __init__(
        self,
        engine: Engine,
        *,
        db: Database,
        clock: Callable[[], float],
        policy: Policy,
        denials: Denials,
        handoffs: HandoffKind | None,
        sms_store: SmsStore,
        allowances: Allowances | None = None,
    ) -> None:
        self.engine = engine
        self.db = db
        self.clock = clock
        self.policy = policy
        self.denials = denials
        self.handoffs = handoffs
        self.batches = BatchAnswers(db, clock, lambda: self.policy.people, self.answer)
        self.allowances = allowances or Allowances(db, clock)
        # Handed to the SMS and WhatsApp surfaces when they are built (`bot.http.surface_config`).
        self.sms_store = sms_store

    async def answer(self, answer: Answer) -> ApprovalCard:
        """Check an answer from Slack or SMS and apply it; refusals are audited."""
        surface = SurfaceType(answer.surface)
        team = (answer.actor_org or answer.org) if surface is SurfaceType.SLACK else None
        actor = PersonDecider(surface=surface, userId=answer.actor, teamId=team or None)
        if answer.edit is not None:
            return await self._approve_edited(answer, actor)
        if answer.verdict is Verdict.DONE:
            if self.handoffs is None:
                raise InvalidRequest("handoffs need COSIGNER_SECRET on this server")
            return await self.handoffs.press_done(
                self.engine,
                answer.approval_id,
                actor,
                lambda rec: check_answer(rec, answer),
                message=inbound_of(answer),
            )
        # Only the two approving verdicts approve; cancel cancels; any other (deny, always
        # deny) denies.
        to = CLOSING_VERDICTS.get(answer.verdict, ApprovalStatus.DENIED)
        run_grant = None
        if answer.verdict is Verdict.APPROVE_FOR_RUN:
            run_grant = f"{surface.value}:{answer.actor}"
        check: denials.Check = lambda rec: check_answer(rec, answer)  # noqa: E731
        standing = None
        if answer.verdict is Verdict.ALWAYS_DENY:
            check, standing = denials.checked(check, answer.actor), denials.setting(answer.actor, team)
        elif answer.verdict is Verdict.ALLOW_FOR:
            check = allowances.checked(check, self.policy, answer.allow_for)
            standing = allowances.granting(self.policy, surface, answer.actor, team, answer.allow_for or 0.0)
        closing = Closing(
            to,
            actor,
            comment=answer.comment,
            check=check,
            audit_refusal=True,
            run_grant=run_grant,
            inbound=inbound_of(answer),
            also=standing,
            seen=answer.seen,
        )
        rec = await self.engine.close(answer.approval_id, closing)
        return rec.card()

    async def answer_batch(self, answer: BatchAnswer) -> tuple[ApprovalCard, ...]:
        """Answer every call a batch card lists, checked whole first (`contracts.batches.BatchDesk`)."""
        return await self.batches.answer_batch(answer)

    # --- edit before approve (contracts.edits.EditDesk) ---------------------------

    async def edit_form(self, look: Look) -> EditForm:
        """The editable fields of a pending call, for one of its approvers where it was shown."""
        rec = await self._editable(look)
        assert rec.edit is not None  # checked by _editable
        rule = self.policy.rule_for(rec.tenant, rec.tool_name)
        fields = [
            f
            for f in edits.form_fields(rec.edit, rec.call_shown)
            if rule.editable is True or (rule.editable and f.name in rule.editable)
        ]
        if not fields:
            raise InvalidRequest(f"the policy no longer lets {rec.tool_name} be edited; approve or deny it")
        return EditForm(rec.card(), tuple(fields))

    async def check_edit(self, look: Look, values: Mapping[str, Any]) -> EditPreview:
        """Check an edit for the confirm step; nothing is written."""
        rec = await self._editable(look)
        return EditPreview(rec.card(), (await self.engine.closer.check_edit(rec, values)).changes)

    async def _editable(self, look: Look) -> Record:
        rec = await self._read(lambda tx: ledger.load(tx, look.approval_id))
        if rec is None:
            raise ApprovalNotFound(f"approval {look.approval_id} does not exist")
        check_reader(rec, look)  # tenant, conversation, app, message, approver
        if rec.closed:
            raise closed_error(rec)
        if rec.edit is None or not rec.edit.fields:
            raise InvalidRequest(f"approval {rec.id} offers no edit; approve or deny the call as it is")
        return rec

    async def _approve_edited(self, answer: Answer, actor: PersonDecider) -> ApprovalCard:
        """Approve the edited call, checked as any answer (`Closer.approve_edited`)."""
        if answer.verdict is not Verdict.APPROVE:
            raise InvalidRequest("an edit is an approval: it cannot be sent with another answer")
        rec = await self.engine.closer.approve_edited(
            answer.approval_id,
            answer.edit or {},
            actor,
            lambda r: check_answer(r, answer),
            comment=answer.comment,
            inbound=inbound_of(answer),
            seen=answer.seen,
        )
        return rec.card()

    def tenant_for_org(self, surface: SurfaceType, org: str) -> str | None:
        """The tenant whose policy names this Slack team/enterprise or SMS number."""
        return self.policy.tenant_for_org(surface, org)

    async def full_call(self, look: Look) -> ApprovalCard:
        """The whole call (redacted, never cut) for an approver where it was shown."""
        rec = await self._read(lambda tx: ledger.load(tx, look.approval_id))
        if rec is None:
            raise ApprovalNotFound(f"approval {look.approval_id} does not exist")
        # Reading decides nothing, so a refusal is not audited; it is raised to the reader.
        check_reader(rec, look)
        return rec.card()

    # --- standing denies a person set (contracts.denials.DenialDesk) ------------

    async def denials_of(self, tenant: str, surface: SurfaceType, person: str) -> Sequence[Denial]:
        """The standing denies in force that `person` set on `surface` in `tenant`."""
        return await self.denials.denials_of(tenant, surface, person)

    async def lift_own(self, tenant: str, surface: SurfaceType, person: str, denial_id: str) -> Denial:
        """Lift a standing deny that `person` set; anyone else's is not found."""
        return await self.denials.lift_own(tenant, surface, person, denial_id)

    # --- standing allows a person gave (contracts.allowances.AllowanceDesk) ------

    async def allowances_of(self, tenant: str, surface: SurfaceType, person: str) -> Sequence[Allowance]:
        """The standing allows in force that `person` granted on `surface` in `tenant`."""
        return await self.allowances.allowances_of(tenant, surface, person)

    async def revoke_own(
        self, tenant: str, surface: SurfaceType, person: str, allowance_id: str
    ) -> Allowance:
        """Revoke a standing allow that `person` granted; anyone else's is not found."""
        return await self.allowances.revoke_own(tenant, surface, person, allowance_id)

    async def pending_of(self, tenant: str, surface: SurfaceType, person: str) -> Sequence[Placed]:
        """Pending requests of `tenant` on `surface` naming `person` (contracts.pending.PendingDesk)."""
        return await self.db.run_read(lambda tx: pending.naming(tx, tenant, surface, person))

    # --- what SMS needs besides -------------------------------------------------

    async def placed(self, approval_id: str) -> Placed | None:
        """An approval with its route and receipt, whatever its tenant."""
        return await self.engine.placed(approval_id)

    async def sending(self, approval_id: str, receipt: Delivered) -> None:
        """Store where a pending approval is being sent, before it is sent."""
        await self.engine.sending(approval_id, receipt)

    async def fail_closed(self, approval_id: str, code: str, message: str) -> None:
        """Deny a pending approval because its surface failed; no-op if already closed."""
        await self.engine.closer.fail_closed(approval_id, code, message)

    async def note(self, approval_id: str, event: AuditEvent, data: Mapping[str, Any]) -> None:
        """Append a surface event to the approval's audit chain (redacted)."""
        await self.engine.note(approval_id, event, data)

    async def _by_number(
        self, to_number: str, from_number: str, *, pending: bool, limit: int
    ) -> list[Placed]:
        recs = await self._read(
            lambda tx: ledger.by_delivery(
                tx, f"{SurfaceType.SMS.value}:{to_number}", pending=pending, limit=limit
            )
        )
        # The approver may be one of the route's, or of a route the request was escalated to.
        return [
            placed
            for r in recs
            if (placed := r.placed()) is not None
            and any(
                from_number in route.approvers for route in (placed.route, *(e.route for e in r.escalated))
            )
        ]

    async def pending_for_number(self, to_number: str, from_number: str) -> Sequence[Placed]:
        """Pending SMS approvals sent from `to_number` (or service) to approver `from_number`."""
        return await self._by_number(to_number, from_number, pending=True, limit=200)

    async def latest_for_number(self, to_number: str, from_number: str) -> Placed | None:
        """The newest SMS approval between these numbers, in any state."""
        found = await self._by_number(to_number, from_number, pending=False, limit=50)
        return found[0] if found else None

    async def _read(self, step: Callable[[Work], T]) -> T:
        return await self.db.run_read(step)

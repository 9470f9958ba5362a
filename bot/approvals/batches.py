"""Answer many at once: which pending requests wait together, and a batch answer to them.

Requests wait together when they share tenant, tool (names folded as the policy folds them),
Slack workspace, conversation (channel and thread) and approvers, and each card was posted
there: the same person is asked the same kind of question several times in one place. Only
plain tool calls are batched (an operation's preview and a handoff's steps are answered on
their own cards).

A batch answer is checked whole before anything is decided: the message pressed must be the
group's batch card, the list its button carried must be what the card lists and what waits
now (else `ParametersMismatch`: a request that arrived later is never swept in), and each
call must take the answer as a press on its own card would (tenant, conversation, app,
approver, the clicker's workspace, the call's digest, separation of duties; a quorum only
counts it). Then each call is answered on its own, through the desk's one answer path: its
own transaction, audit events, decision and grant.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence

from bot.approvals.answerers import check_answer
from bot.approvals.judging import Asked, Refused, Transition, judge
from bot.approvals.lifecycle import checked
from bot.policy.people import People
from contracts.answers import PersonDecider
from contracts.batches import BATCH_VERDICTS, Batch, BatchAnswer, Listed
from contracts.enums import ApprovalMode, ApprovalStatus, SurfaceType, Verdict
from contracts.errors import CosignerError, InvalidRequest, ParametersMismatch, WrongConversation
from contracts.names import fold
from contracts.ports import Answer, ApprovalCard, SlackRoute
from storage import batches as batch_store
from storage.database import Database
from storage.record_columns import delivery_key
from storage.records import Record

Answering = Callable[[Answer], Awaitable[ApprovalCard]]


def group_key(rec: Record) -> str | None:
    """The group a delivered pending request waits in (hex SHA-256), or None when it is never
    offered in a batch (not on Slack, an operation or a handoff, a step-up call whose Approve
    needs a passkey on its own inbox page, not posted yet)."""
    route, got = rec.route, rec.delivered
    if not isinstance(route, SlackRoute) or got is None or not got.message_refs:
        return None
    if rec.operation is not None or rec.handoff is not None or rec.mode is ApprovalMode.HANDOFF:
        return None
    if rec.step_up:
        return None
    parts = (
        rec.tenant,
        fold(rec.tool_name),
        route.enterprise_id or "",
        route.team_id,
        got.conversation,
        route.thread_ts or "",
        ",".join(sorted(route.approvers)),
        got.app_id or "",
    )
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def place_of(rec: Record) -> str | None:
    """Where a request's group is looked up: its delivery key (`slack:C…`)."""
    return delivery_key(rec.route) if rec.route is not None else None


def together(recs: Sequence[Record], key: str, now: float) -> list[Record]:
    """The requests of `recs` still waiting in group `key` at `now`, oldest first."""
    return [
        r
        for r in sorted(recs, key=lambda r: (r.created_at, r.id))
        if r.status is ApprovalStatus.PENDING and r.expires_at > now and group_key(r) == key
    ]


def batch_of(key: str, members: Sequence[Record]) -> Batch:
    """The batch the members make, for a surface to show."""
    first = members[0]
    assert first.delivered is not None  # group_key requires a receipt
    return Batch(key, first.tool_name, first.delivered.conversation, tuple(r.card() for r in members))


def listed_of(members: Sequence[Record]) -> Listed:
    """What a batch answer to these requests must carry: ids and digests of the calls as shown."""
    return tuple((r.id, r.call_tag) for r in members)


def per_call(rec: Record, ba: BatchAnswer) -> Answer:
    """The batch answer as a press on this request's own card (its own message), for the one
    answer path: the batch card stood for that message once it was found to list this call."""
    assert rec.delivered is not None
    return Answer(
        approval_id=rec.id,
        surface=ba.surface,
        verdict=ba.verdict,
        actor=ba.actor,
        org=ba.org,
        actor_org=ba.actor_org,
        conversation=ba.conversation,
        message_ref=rec.delivered.message_refs[0],
        app_id=ba.app_id,
        enterprise_id=ba.enterprise_id,
        seen=rec.call_tag,
    )


def precheck(rec: Record, a: Answer, now: float, people: People) -> CosignerError | None:
    """What a press of this answer on the request's own card would be refused with (None: it
    would be taken, closing or counted); decides nothing."""
    team = a.actor_org or a.org
    asked = Asked(
        ApprovalStatus.APPROVED if a.verdict is Verdict.APPROVE else ApprovalStatus.DENIED,
        PersonDecider(surface=SurfaceType(a.surface), userId=a.actor, teamId=team or None),
        seen=a.seen,
    )
    effect = judge(rec, asked, now, people, checked=checked(lambda r: check_answer(r, a), rec))
    if isinstance(effect, Refused):
        return effect.error
    if isinstance(effect, Transition) and effect.refusal is not None:
        return effect.refusal  # it expired: the sweeper closes it
    return None


class BatchAnswers:
    """Takes batch answers: checks them whole, then answers each call on its own."""

    def __init__(
        self, db: Database, clock: Callable[[], float], people: Callable[[], People], answer: Answering
    ) -> None:
        self.db = db
        self.clock = clock
        self.people = people
        self.answer = answer

    async def answer_batch(self, ba: BatchAnswer) -> tuple[ApprovalCard, ...]:
        """Check the batch answer whole, then apply it call by call; the cards after."""
        if ba.verdict not in BATCH_VERDICTS:
            raise InvalidRequest("a batch is answered Approve all or Deny all")
        if ba.message_ref is None:
            raise WrongConversation("a batch answer must come from the batch card")
        ref = ba.message_ref
        card = await self.db.run_read(lambda tx: batch_store.at_message(tx, ba.conversation, ref))
        if card is None or card.surface != ba.surface:
            raise WrongConversation(
                "this message is not a batch card Cosigner can answer (one just posted is answerable "
                "a moment later); answer each request on its own card"
            )
        waiting = await self.db.run_read(lambda tx: batch_store.waiting_at(tx, card.place))
        now = self.clock()
        members = together(waiting, card.key, now)
        listed = listed_of(members)
        if ba.listed != card.listed or ba.listed != listed:
            raise ParametersMismatch(
                f"this batch button lists {len(ba.listed)} requests, but {len(listed)} wait here now "
                "(one arrived, was answered or changed since the card was shown); nothing was "
                "decided: read the card as it shows now and answer again",
                listed=[a for a, _ in ba.listed],
                waiting=[a for a, _ in listed],
            )
        answers = [per_call(rec, ba) for rec in members]
        people = self.people()
        for rec, a in zip(members, answers, strict=True):
            refusal = precheck(rec, a, now, people)
            if refusal is not None:
                raise type(refusal)(
                    f"nothing was decided: request {rec.short_code} ({rec.id}) refuses this answer: "
                    f"{refusal.message}",
                    approvalId=rec.id,
                    **{k: v for k, v in refusal.details.items() if k != "approvalId"},
                )
        done: list[ApprovalCard] = []
        for a in answers:
            try:
                done.append(await self.answer(a))
            except CosignerError as exc:
                # Changed between the check and this answer (another approver, the agent):
                # the calls before it are answered; say which.
                decided = ", ".join(c.short_code for c in done) or "none"
                raise type(exc)(
                    f"request {a.approval_id} changed while the batch was being answered: {exc.message}; "
                    f"answered before it: {decided}",
                    **exc.details,
                ) from exc
        return tuple(done)

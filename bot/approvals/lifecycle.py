"""One approval's life: its states, the one transition, who may answer, and what closing queues.

An approval is created `pending` (or already closed by policy, see `bot.approvals.intake`) and closes
once: `close` is the only step that writes `status`. Its UPDATE is conditional on
`status = 'pending'`, so of any number of concurrent answers exactly one wins and the rest
get `AlreadyDecided`. The same transaction appends the audit events, queues the callback
and the card update, records a run grant, and (on PostgreSQL) notifies the other replicas.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from bot.approvals.bodies import actor_of
from bot.approvals.run_grants import requester_key
from bot.policy.people import NOBODY_TIED, People
from bot.policy.quorum import is_requester
from contracts.answers import DecidedBy, PersonDecider, TimeoutDecider
from contracts.enums import ApprovalMode, ApprovalStatus, AuditEvent, JobKind, SurfaceType, Verdict
from contracts.errors import (
    AlreadyDecided,
    ApprovalExpired,
    ApprovalModeUnsupported,
    ApprovalNotFound,
    CosignerError,
    InvalidRequest,
    NotAnApprover,
    ParametersMismatch,
    StepUpRequired,
    WrongConversation,
    WrongTenant,
)
from contracts.names import fold
from contracts.ports import (
    Answer,
    DashboardRoute,
    Delivered,
    Look,
    Route,
    SlackRoute,
    SmsRoute,
    TeamsRoute,
)
from storage import answers, jobs, ledger, operations
from storage.audit import Event
from storage.jobs import Delivery, Queued
from storage.records import Changes, Decided, Record
from storage.votes import Vote, joined
from storage.work import Work

# --- states -------------------------------------------------------------------

TRANSITIONS = {
    ApprovalStatus.PENDING: {
        ApprovalStatus.APPROVED,
        ApprovalStatus.DENIED,
        ApprovalStatus.EXPIRED,
        ApprovalStatus.CANCELLED,
        ApprovalStatus.COMPLETED,
        ApprovalStatus.FAILED,
    },
}
HANDOFF_VERDICTS = frozenset({Verdict.DONE, Verdict.CANCEL})
CARD_UPDATE_WINDOW = 3600.0


def allowed(src: ApprovalStatus, dst: ApprovalStatus) -> bool:
    """The transition table: only a pending approval may close, and only once."""
    return dst in TRANSITIONS.get(src, set())


def new_id(prefix: str) -> str:
    """A random, URL-safe identifier with a readable prefix."""
    return f"{prefix}_{secrets.token_urlsafe(15)}"


def stored(decided_by: DecidedBy) -> str:
    """A decider as the approvals table keeps it."""
    return decided_by.model_dump_json(exclude_none=True)


# --- who may answer -------------------------------------------------------------


def closed_error(rec: Record) -> CosignerError:
    """The refusal for an answer that reached a closed approval, naming its state."""
    if rec.status is ApprovalStatus.EXPIRED:
        return ApprovalExpired(
            f"approval {rec.id} expired; expiry means deny and nothing "
            "was done. Ask the agent to request it again.",
            status=ApprovalStatus.EXPIRED.value,
        )
    return AlreadyDecided(
        f"approval {rec.id} is already {rec.status.value}; a closed request never changes.",
        status=rec.status.value,
    )


def check_answer(rec: Record, a: Answer) -> None:
    """Tenant, conversation, app, message, approver (and Slack Connect) — in that order; then
    what the surface found wrong with the message that carried the answer."""
    check_reader(rec, a)
    if a.mismatch is not None:
        raise WrongConversation(
            f"this answer does not come from a message of approval {rec.id}: {a.mismatch}"
        )
    check_shown(rec, a)
    check_verdict(rec, a.verdict)


APPROVING = frozenset({Verdict.APPROVE, Verdict.APPROVE_FOR_RUN, Verdict.ALLOW_FOR})


def check_shown(rec: Record, a: Answer) -> None:
    """A call the surface could not show this person whole is not approvable there; a Deny
    still counts (it runs nothing)."""
    if a.unshown is not None and a.verdict in APPROVING:
        raise ApprovalModeUnsupported(
            f"approval {rec.id} cannot be approved on {a.surface}: {a.unshown}; nothing unseen "
            "is approved. Read it whole where it can be shown; a deny still counts here"
        )


def check_reader(rec: Record, a: Answer | Look) -> None:
    """Who may answer may also read the whole call: the checks of `check_answer` but the verdict.

    Once the request was escalated, the approvers of each route it was escalated to may
    answer where it was delivered to them (and only there), as if it had been asked there."""
    places = [(rec.route, rec.delivered), *((e.route, e.delivered) for e in rec.escalated)]
    refusals: list[tuple[bool, CosignerError]] = []
    for route, got in places:
        try:
            check_at(rec.id, route, got, a)
        except CosignerError as exc:
            refusals.append((_shown_there(route, got, a), exc))
            continue
        return
    # The refusal of the card or text the answer came from says why; else the request's own.
    raise next((exc for there, exc in refusals if there), refusals[0][1])


def _shown_there(route: Route | None, got: Delivered | None, a: Answer | Look) -> bool:
    """Whether the answer came from where this route's card or text was shown."""
    if route is None or got is None or route.surface != a.surface or a.conversation != got.conversation:
        return False
    return not isinstance(route, SlackRoute | TeamsRoute) or a.message_ref in got.message_refs


def check_at(approval_id: str, route: Route | None, got: Delivered | None, a: Answer | Look) -> None:
    """The checks of one place the request was delivered to: its route and its receipt."""
    if route is None or route.surface != a.surface:
        where = route.surface if route else "nobody"
        raise WrongConversation(f"approval {approval_id} was delivered to {where}, not {a.surface}")
    if isinstance(route, SlackRoute):
        orgs = {route.team_id, route.enterprise_id} - {None}
    elif isinstance(route, SmsRoute):
        orgs = {route.from_number, route.messaging_service_sid} - {None}
    elif isinstance(route, TeamsRoute):
        orgs = {route.tenant_id}
    else:
        orgs = set()
    if a.org not in orgs and (a.enterprise_id is None or a.enterprise_id not in orgs):
        raise WrongTenant(
            f"this answer came from {a.org}, which is not where approval {approval_id} was delivered"
        )
    if got is None:
        raise WrongConversation(f"approval {approval_id} has not been delivered yet")
    if got.app_id and a.app_id != got.app_id:
        raise WrongConversation(
            f"this answer came through another {route.surface} app, not the one that showed it"
        )
    if a.conversation != got.conversation:
        raise WrongConversation(f"approval {approval_id} was not posted in this conversation")
    if isinstance(route, SlackRoute | TeamsRoute) and a.message_ref not in got.message_refs:
        raise WrongConversation(f"this message is not the card of approval {approval_id}")
    if isinstance(route, SlackRoute):
        clicker_belongs(route, a)
    if a.actor not in route.approvers:
        raise NotAnApprover(f"{a.actor} is not an approver of approval {approval_id}")


def check_verdict(rec: Record, verdict: Verdict) -> None:
    """A handoff is done or cancelled, never approved or denied; an approval the reverse."""
    if rec.mode is ApprovalMode.HANDOFF and verdict not in HANDOFF_VERDICTS:
        raise InvalidRequest(
            f"approval {rec.id} is a handoff: answer done or cancel (by SMS: DONE or NO); "
            "a handoff is never approved or denied"
        )
    if rec.mode is not ApprovalMode.HANDOFF and verdict in HANDOFF_VERDICTS:
        raise InvalidRequest(f"approval {rec.id} is not a handoff: answer approve or deny")
    if verdict is Verdict.APPROVE_FOR_RUN and rec.mode is not ApprovalMode.ASK:
        raise InvalidRequest("approve for this run is offered only for tools in mode ask")
    if verdict is Verdict.APPROVE_FOR_RUN and rec.quorum > 1:
        # One person's "for this run" would let later calls through without the quorum.
        raise InvalidRequest(
            f"approve for this run is not offered when {rec.quorum} approvers must approve; answer approve"
        )


def clicker_belongs(route: SlackRoute, a: Answer | Look) -> None:
    """Slack Connect: the clicker's own workspace or org (`user.team_id`) must be the route's.

    The installation's org (`team.enterprise_id`, `enterprise.id`) says where the card
    lives, not who clicked: Slack sends it with every click on that org's cards, including
    clicks by people of another organization in a shared channel.
    """
    if a.actor_org is None:
        raise NotAnApprover("Slack did not say which workspace the clicker belongs to (user.team_id)")
    if a.actor_org in route.approver_teams:
        return
    fix = ""
    if a.actor_org.startswith("E"):
        # On Enterprise Grid, Slack sends the org id as `user.team_id`.
        fix = f"; if {a.actor_org} is this tenant's own Enterprise Grid org, set slack_enterprise for it"
    raise NotAnApprover(
        f"people from workspace {a.actor_org} cannot approve requests of this tenant (Slack Connect){fix}"
    )


def check_dashboard(rec: Record, user_id: str) -> None:
    """A dashboard decision must be for a dashboard request, from one of its approvers (or
    one escalated to the dashboard, from an approver of that step)."""
    for e in rec.escalated:
        if isinstance(e.route, DashboardRoute) and user_id in e.route.approvers:
            return
    if rec.route is None or not isinstance(rec.route, DashboardRoute):
        where = rec.route.surface if rec.route else "nobody (decided by policy)"
        raise WrongConversation(
            f"approval {rec.id} was delivered to {where}; only dashboard "
            "requests are decided through this endpoint"
        )
    if user_id not in rec.route.approvers:
        raise NotAnApprover(f"user {user_id} is not an approver of {rec.id}")


# --- the one transition ---------------------------------------------------------


@dataclass(frozen=True)
class Closing:
    """A requested transition: to what, by whom, and the conditions it must meet.

    `check` refuses an answer that may not decide (see the checks above); a refusal is
    audited in the same transaction when `audit_refusal`. `inbound` is the surface message
    that carried the answer: it is recorded in that transaction, and if it was recorded
    before, the answer was handled already and nothing changes.
    """

    to: ApprovalStatus
    decided_by: DecidedBy
    comment: str | None = None
    tenant: str | None = None
    check: Callable[[Record], None] | None = None
    audit_refusal: bool = False
    run_grant: str | None = None
    inbound: tuple[SurfaceType, str] | None = None
    # More to record in the same transaction when it closes as asked (a standing deny).
    also: Callable[[Work, Record, float], list[Event]] | None = None
    changes: Changes | None = None  # more written with the status (a handoff's check, an edit)
    data: Mapping[str, Any] | None = None  # more on the closing's audit event (the edited call)
    # The digest of the call the answer was given for (None: the agent's own). A person's
    # answer, or a closing that names one, is refused when the call was edited since.
    seen: str | None = None
    # An edit of a call a quorum must approve: the edited call (`changes.edit`) becomes the
    # current one, the editor's Approve its first, and every earlier Approve is set aside.
    revises: bool = False
    # The answering person's other ids, vouched for with this answer by an identity provider
    # (an inbox sign-in: the Slack user id, the verified email and phone). The person, not the
    # id, is compared with the requester and with everyone counted (`bot.policy.people`).
    ids: tuple[str, ...] = ()
    # Step-up: the passkey that confirmed this Approve (checked by the inbox before it closes:
    # the assertion, its user-verification flag and its challenge, bound to this approval and
    # the call shown). Without it an Approve of a step-up approval never counts.
    passkey: Passkeyed | None = None


@dataclass(frozen=True)
class Passkeyed:
    """A verified WebAuthn assertion confirming an Approve: the credential and its UV flag."""

    credential_id: str
    user_verified: bool


def step_up_refusal(rec: Record, c: Closing) -> StepUpRequired | None:
    """A person's Approve of a step-up approval without a user-verified passkey: refused on
    every surface (a forged or old button included); a Deny is never held back."""
    if not rec.step_up or c.to is not ApprovalStatus.APPROVED or not isinstance(c.decided_by, PersonDecider):
        return None
    if c.passkey is not None and c.passkey.user_verified:
        return None
    return StepUpRequired(
        f"approval {rec.id} needs step-up: an Approve counts only once you confirm it with a passkey "
        f"in the Cosigner inbox (/inbox/approvals/{rec.id}/step-up); a Deny counts here",
        approvalId=rec.id,
    )


EXECUTE_GRACE = 5.0
"""Seconds past an `execute` call's timeout before another attempt takes over its job."""


@dataclass(frozen=True)
class Closed:
    """What `close` did: the record as it now stands, a refusal to raise, and whether it closed.

    `execute` is the approved operation's `execute` job when `close` claimed it for the
    caller (its first `execute` already counted as sent): the caller sends it at once."""

    record: Record
    refusal: CosignerError | None
    changed: bool
    execute: jobs.Job | None = None
    counted: bool = False  # an Approve was counted toward the quorum; the approval stays pending


def refused(decided_by: DecidedBy, exc: CosignerError, wanted: ApprovalStatus) -> Event:
    """The audit event of an answer that was not applied."""
    return Event(
        AuditEvent.DECISION_REFUSED,
        actor_of(decided_by),
        {"code": str(exc.code), "message": exc.message, "wanted": wanted.value},
    )


@dataclass(frozen=True)
class Refused:
    """The answer may not decide: `error` says why; `audited` when the refusal may go on the
    audit record (a check that failed, or a closed approval)."""

    error: CosignerError
    audited: bool = True


@dataclass(frozen=True)
class Transition:
    """The answer decides: to what and by whom; `refusal` is raised after it commits (a late
    answer, which expires the approval instead)."""

    to: ApprovalStatus
    decided_by: DecidedBy
    comment: str | None
    refusal: CosignerError | None = None
    vote: Vote | None = None  # the Approve that made the quorum, counted with the closing


@dataclass(frozen=True)
class Counted:
    """The answer is an Approve toward a quorum not yet met: count it; the approval stays
    pending (`count` approvals of `quorum` once written)."""

    vote: Vote
    comment: str | None
    count: int
    quorum: int


@dataclass(frozen=True)
class Unchanged:
    """The same approver approved before: their Approve is counted once, nothing changes."""


@dataclass(frozen=True)
class Revised:
    """An approver edited a call a quorum must approve: the edited call is the current one,
    `vote` (the editor's) its first Approve, and `set_aside` the approvals of the call it
    replaced, which no longer count."""

    vote: Vote
    comment: str | None
    set_aside: tuple[Vote, ...]
    quorum: int


Effect = Refused | Transition | Counted | Unchanged | Revised


def stale(rec: Record, seen: str | None) -> ParametersMismatch | None:
    """The refusal of an answer given for another version of the call than the current one
    (`seen`: the call's digest, or the digest of the call as shown; None: the agent's own
    call); None when it is the current one."""
    current = rec.call_digest
    # A dashboard app names the call by its digest; a surface (a button, a form, a text) by
    # the digest of the call as it showed it (`Record.call_tag`), which reveals nothing hidden.
    if (seen or rec.digest) == current or (seen is not None and seen == rec.call_tag):
        return None
    result = rec.edit.result if rec.edit is not None else None
    if result is None:
        return ParametersMismatch(
            f"the digest answered ({(seen or '')[:80]}) is not that of approval {rec.id}'s call; "
            "fetch the approval and answer the call it shows",
            approvalId=rec.id,
            digest=current,
        )
    by = f" by {result.by}" if result.by else ""
    return ParametersMismatch(
        f"the call of approval {rec.id} was edited{by} after the version you answered was shown "
        "to you, so your answer was not counted: read the edited call and answer it",
        approvalId=rec.id,
        digest=current,
        **({"editedBy": result.by} if result.by else {}),
    )


def requester_refused(rec: Record) -> NotAnApprover:
    """Separation of duties: whoever asked must not be the one who approves."""
    return NotAnApprover(
        "the requester's own Approve never counts (separate_duties): another approver must "
        f"approve; you triggered the run that asks for approval {rec.id}"
    )


def counted_already(rec: Record, user: str, earlier: Vote) -> NotAnApprover:
    """No one counts twice: an Approve from another id of a person whose Approve counts."""
    return NotAnApprover(
        f"{user} is the same person as {earlier.by}, whose Approve of approval {rec.id} counts already "
        "(the policy's [people] or their sign-in ties the two ids): one person counts once toward "
        "the quorum, whichever id they answer with; another approver must approve"
    )


def count(
    rec: Record,
    to: ApprovalStatus,
    by: DecidedBy,
    comment: str | None,
    now: float,
    *,
    revises: bool = False,
    ids: tuple[str, ...] = (),
    people: People = NOBODY_TIED,
) -> Effect | None:
    """Four eyes, for an approval as loaded: a requester's Approve refused (separate duties),
    an edit (`revises`) the first Approve of the edited call, the same id again unchanged and
    another id of a person counted refused, an Approve below the quorum counted; None when
    the answer closes the approval as asked (a Deny vetoes at once).

    Persons are compared, not ids: every id the answering person holds (`by.userId` and the
    `ids` vouched for with it, tied further by `people`) against every id of the requester
    and of each approver counted so far, on any surface."""
    if to is not ApprovalStatus.APPROVED or not isinstance(by, PersonDecider):
        return None
    if rec.quorum <= 1 and not rec.separate_duties:
        return None
    tied = tuple(i for i in dict.fromkeys(ids) if i != by.userId)
    vote = Vote(by.userId, by.surface, now, tied)
    if rec.separate_duties and is_requester(rec.surface, vote.ids, people):
        return Refused(requester_refused(rec))
    if rec.quorum <= 1:
        return None
    if revises:
        return Revised(vote, comment, rec.votes, rec.quorum)
    earlier = next((v for v in rec.votes if people.same(vote.ids, v.ids)), None)
    if earlier is not None:
        # The same id again is answered with the progress; another id of that person is refused.
        return Unchanged() if earlier.by == by.userId else Refused(counted_already(rec, by.userId, earlier))
    # Counted as persons: rows counted before `[people]` tied two of them count once.
    n = people.count(v.ids for v in (*rec.votes, vote))
    if n < rec.quorum:
        return Counted(vote, comment, n, rec.quorum)
    return Transition(to, by, comment, vote=vote)


def decide(rec: Record, c: Closing, now: float, people: People = NOBODY_TIED) -> Effect:
    """What an answer does to the approval as loaded at `now`, with `people` saying which
    ids are one person; pure (besides `c.check`)."""
    try:
        if c.check is not None:
            c.check(rec)
        if rec.closed:
            raise closed_error(rec)
        needs = step_up_refusal(rec, c)
        if needs is not None:
            raise needs
    except CosignerError as exc:
        return Refused(exc)
    to, decided_by, comment = c.to, c.decided_by, c.comment
    refusal: CosignerError | None = None
    if rec.expires_at <= now and to is not ApprovalStatus.EXPIRED:
        # A late answer never decides: the approval expires now instead.
        refusal = ApprovalExpired(
            f"approval {rec.id} expired before this answer; expiry means deny and nothing was done",
            status=ApprovalStatus.EXPIRED.value,
        )
        to, decided_by, comment = ApprovalStatus.EXPIRED, TimeoutDecider(), None
    if to is ApprovalStatus.DENIED and rec.mode is ApprovalMode.HANDOFF:
        to = ApprovalStatus.FAILED  # a handoff is never denied: failing closed fails it
    if not allowed(rec.status, to):
        return Refused(closed_error(rec), audited=False)
    if refusal is None and (isinstance(decided_by, PersonDecider) or c.seen is not None):
        # What a person answered is the call they were shown: never another version of it.
        changed = stale(rec, c.seen)
        if changed is not None:
            return Refused(changed)
    if refusal is None:
        counted = count(rec, to, decided_by, comment, now, revises=c.revises, ids=c.ids, people=people)
        if counted is not None:
            return counted
    return Transition(to, decided_by, comment, refusal)


def close(
    tx: Work,
    approval_id: str,
    c: Closing,
    clock: Callable[[], float],
    *,
    schema: str | None,
    callback_window: float,
    send_execute: bool = False,
    people: People = NOBODY_TIED,
) -> Closed:
    """The one step that writes `status`, run inside one write transaction (`people`: which
    ids are one person, for the quorum and separation of duties).

    With `send_execute` (the caller can send `execute` itself), approving an operation also
    claims its `execute` job and counts the first `execute` as sent, in this transaction:
    one write fewer per operation than claiming it afterwards, with the same guarantees (if
    the caller dies before sending, the job's next attempt asks `status` first)."""
    loaded = answers.load(tx, approval_id, clock, c.inbound)
    if loaded is None or (c.tenant is not None and loaded.record.tenant != c.tenant):
        raise ApprovalNotFound(f"no approval {approval_id} for this caller")
    rec, now = loaded.record, loaded.now
    if not loaded.first:
        return Closed(rec, None, False)
    answer = decide(rec, c, now, people)
    if isinstance(answer, Unchanged):
        return Closed(rec, None, False)
    if isinstance(answer, Refused):
        if not (c.audit_refusal and answer.audited):
            raise answer.error
        return Closed(
            ledger.append(tx, rec, now, [refused(c.decided_by, answer.error, c.to)]), answer.error, False
        )
    if isinstance(answer, Revised):
        return Closed(revise(tx, rec, now, c, answer), None, False, counted=True)
    if isinstance(answer, Counted):
        counted = [counted_event(c.decided_by, answer.comment, answer.count, answer.quorum)]
        if c.also is not None:
            counted += c.also(tx, rec, now)  # who vouched for the person (an inbox answer)
        show = rec.delivered is not None
        return Closed(answers.count(tx, rec, now, counted, answer.vote, show=show), None, False, counted=True)
    to, decided_by, comment, refusal = answer.to, answer.decided_by, answer.comment, answer.refusal
    events: list[Event] = [] if refusal is None else [refused(c.decided_by, refusal, c.to)]
    data: dict[str, object] = {"comment": comment, **(c.data if c.data is not None and to is c.to else {})}
    if answer.vote is not None:
        voted = joined(rec.votes, answer.vote)
        events.append(counted_event(decided_by, comment, people.count(v.ids for v in voted), rec.quorum))
        data["approvers"] = [{"by": v.by, "surface": v.surface.value} for v in voted]
    events.append(Event(to.value, actor_of(decided_by), data))
    changes = replace(c.changes or Changes(), decided=Decided(to, now, decided_by, comment))
    kept = changes.edit or rec.edit
    if kept is not None and kept.sealed is not None:
        # A closed call is never edited: its sealed original is not kept.
        changes = replace(changes, edit=kept.model_copy(update={"sealed": None}))
    if c.also is not None and to is c.to:
        events += c.also(tx, rec, now)
    claim = None
    if rec.operation is not None and to is ApprovalStatus.APPROVED:
        # The claim pending → executing is this same conditional UPDATE: one answer wins it.
        if send_execute:
            executing, claim_events = operations.claimed_and_sending(rec.operation, rec.id)
            events += claim_events
            lock = now + rec.operation.execute_timeout + EXECUTE_GRACE
            claim = answers.Claim(now, now + callback_window, lock)
        else:
            executing, event = operations.claim(rec.operation)
            events.append(event)
        changes = replace(changes, operation=executing)
    after = replace(rec, status=to, operation=changes.operation or rec.operation)
    grant = None
    if c.run_grant is not None and to is ApprovalStatus.APPROVED:
        grant = answers.Grant(fold(rec.tool_name), requester_key(rec.surface), c.run_grant)
    queued = jobs_after(after, now, callback_window, executes_itself=send_execute)
    rec, execute = answers.write(
        tx,
        rec,
        now,
        events,
        changes,
        queued=queued,
        claim=claim,
        grant=grant,
        schema=schema,
        vote=answer.vote,
    )
    return Closed(rec, refusal, True, execute)


def revise(tx: Work, rec: Record, now: float, c: Closing, answer: Revised) -> Record:
    """Store an edit of a call a quorum must approve: the edit (who, the edited call, both
    digests), the approvals it sets aside and why, and the editor's Approve as the first of
    the edited call, each its own link of the audit chain."""
    assert c.changes is not None and c.changes.edit is not None  # an edit carries its call
    events = [Event(AuditEvent.CALL_EDITED, actor_of(c.decided_by), dict(c.data or {}))]
    if answer.set_aside:
        new = c.changes.edit.result.digest if c.changes.edit.result is not None else rec.digest
        events.append(
            Event(
                AuditEvent.APPROVALS_SET_ASIDE,
                actor_of(c.decided_by),
                {
                    "approvers": [{"by": v.by, "surface": v.surface.value} for v in answer.set_aside],
                    "approvedDigest": rec.call_digest,
                    "digest": new,
                    "reason": "they approved a version of the call that an edit replaced",
                },
            )
        )
    events.append(counted_event(c.decided_by, answer.comment, 1, answer.quorum))
    if c.also is not None:
        events += c.also(tx, rec, now)  # who vouched for the person (an inbox answer)
    show = rec.delivered is not None or bool(rec.escalated)
    new = c.changes.edit.result.digest if c.changes.edit.result is not None else rec.digest
    retext = new if texted(rec) else None
    return answers.revise(
        tx, rec, now, events, Changes(edit=c.changes.edit), answer.vote, show=show, retext=retext
    )


TEXTED = frozenset({SurfaceType.SMS, SurfaceType.WHATSAPP})


def texted(rec: Record) -> bool:
    """True when the request was texted to a phone (SMS or WhatsApp, on its own route or an
    escalation step's): an edit of its call is then texted again (`JobKind.RETEXT`)."""
    steps = [(rec.route, rec.delivered), *((e.route, e.delivered) for e in rec.escalated)]
    return any(r is not None and r.surface in TEXTED and d is not None for r, d in steps)


def counted_event(by: DecidedBy, comment: str | None, n: int, quorum: int) -> Event:
    """The audit event of one Approve toward a quorum: each approver's is its own link."""
    return Event(
        AuditEvent.APPROVAL_COUNTED, actor_of(by), {"count": n, "quorum": quorum, "comment": comment}
    )


def jobs_after(
    rec: Record, now: float, callback_window: float, *, executes_itself: bool = False
) -> list[Queued]:
    """The jobs a closing queues for the approval as it will stand: an approved operation's
    `execute` (unless the closing caller sends it), then once settled the callback and the
    card update."""
    queued: list[Queued] = []
    if rec.operation is not None and rec.status is ApprovalStatus.APPROVED and not executes_itself:
        queued.append(Queued(JobKind.EXECUTE, now, now + callback_window))
    if rec.callback_url and rec.settled:
        queued.append(Queued(JobKind.CALLBACK, now, now + callback_window, Delivery(new_id("dlv"))))
    if (rec.delivered is not None or rec.escalated) and rec.settled:
        queued.append(Queued(JobKind.SHOW, now, now + CARD_UPDATE_WINDOW))
    return queued


# --- what a transition queues ---------------------------------------------------


def queue_callback(tx: Work, approval_id: str, now: float, window: float) -> None:
    """Queue the POST of the decision to the agent's `callbackUrl`."""
    jobs.queue(tx, JobKind.CALLBACK, approval_id, Delivery(new_id("dlv")), now, now + window)


def queue_card_update(tx: Work, approval_id: str, now: float) -> None:
    """Queue showing the outcome where the approval was delivered."""
    jobs.queue(tx, JobKind.SHOW, approval_id, None, now, now + CARD_UPDATE_WINDOW)


def queue_execution(tx: Work, approval_id: str, now: float, window: float) -> None:
    """Queue carrying out an approved operation at its application."""
    jobs.queue(tx, JobKind.EXECUTE, approval_id, None, now, now + window)

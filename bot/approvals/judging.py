"""What an answer does to a pending approval: `judge`, on plain data.

`judge(rec, asked, now, people, checked=...)` is a function of its arguments alone: the
approval as loaded, what was answered (`Asked`), the instant it was loaded at, which ids are
one person, and what the answer's own checks refused it with (run on `rec` before, by the
step that loaded it: `bot.approvals.lifecycle.close`). It reads no clock, no database and no
caller's code, so every outcome can be enumerated without either (tests/bot/test_answer_decide.py);
an import-linter contract keeps it that way. Writing what it decided is `bot.approvals.lifecycle`.

One verb per deciding step: the policy rules on a call (`bot.policy.decision`), intake weighs
whether a person must be asked (`bot.approvals.intake`), and an answer is judged here.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.policy.people import NOBODY_TIED, People
from bot.policy.quorum import is_requester
from contracts.answers import DecidedBy, PersonDecider, TimeoutDecider
from contracts.enums import ApprovalMode, ApprovalStatus, Verdict
from contracts.errors import (
    AlreadyDecided,
    ApprovalExpired,
    CosignerError,
    NotAnApprover,
    ParametersMismatch,
    StepUpRequired,
)
from storage.records import Record, Vote

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


def allowed(src: ApprovalStatus, dst: ApprovalStatus) -> bool:
    """The transition table: only a pending approval may close, and only once."""
    return dst in TRANSITIONS.get(src, set())


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


# --- what was answered ----------------------------------------------------------


@dataclass(frozen=True)
class Passkeyed:
    """A verified WebAuthn assertion confirming an Approve: the credential and its UV flag."""

    credential_id: str
    user_verified: bool


@dataclass(frozen=True)
class Asked:
    """What an answer asks for, as plain data: to what, by whom, with what comment.

    `seen` is the digest of the call the answer was given for (None: the agent's own): a
    person's answer, or one that names a digest, is refused when the call was edited since.
    `revises`: an edit of a call a quorum must approve (the edited call becomes the current
    one, the editor's Approve its first, every earlier Approve set aside). `ids`: the
    answering person's other ids, vouched for by an identity provider (an inbox sign-in),
    compared as one person with the requester and with everyone counted
    (`bot.policy.people`). `passkey`: the passkey that confirmed this Approve (step-up);
    without it an Approve of a step-up approval never counts. `not_due`: the refusal of the
    answer while the approval's time is not up yet at `now` (an expiry's "not due", a Done
    pressed again while it is checked)."""

    to: ApprovalStatus
    decided_by: DecidedBy
    comment: str | None = None
    seen: str | None = None
    revises: bool = False
    ids: tuple[str, ...] = ()
    passkey: Passkeyed | None = None
    not_due: CosignerError | None = None


def step_up_refusal(rec: Record, asked: Asked) -> StepUpRequired | None:
    """A person's Approve of a step-up approval without a user-verified passkey: refused on
    every surface (a forged or old button included); a Deny is never held back."""
    if (
        not rec.step_up
        or asked.to is not ApprovalStatus.APPROVED
        or not isinstance(asked.decided_by, PersonDecider)
    ):
        return None
    if asked.passkey is not None and asked.passkey.user_verified:
        return None
    return StepUpRequired(
        f"approval {rec.id} needs step-up: an Approve counts only once you confirm it with a passkey "
        f"in the Cosigner inbox (/inbox/approvals/{rec.id}/step-up); a Deny counts here",
        approvalId=rec.id,
    )


# --- what it does ---------------------------------------------------------------


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


def judge(
    rec: Record,
    asked: Asked,
    now: float,
    people: People = NOBODY_TIED,
    *,
    checked: CosignerError | None = None,
) -> Effect:
    """What an answer (`asked`) does to the approval as loaded at `now`, with `people` saying
    which ids are one person and `checked` what the answer's own checks refused it with (who
    may answer, and where; None: they passed). Pure: a function of its arguments alone."""
    refused_first = checked
    if refused_first is None and asked.not_due is not None and rec.expires_at > now:
        refused_first = asked.not_due
    if refused_first is None and rec.closed:
        refused_first = closed_error(rec)
    if refused_first is None:
        refused_first = step_up_refusal(rec, asked)
    if refused_first is not None:
        return Refused(refused_first)
    to, decided_by, comment = asked.to, asked.decided_by, asked.comment
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
    if refusal is None and (isinstance(decided_by, PersonDecider) or asked.seen is not None):
        # What a person answered is the call they were shown: never another version of it.
        changed = stale(rec, asked.seen)
        if changed is not None:
            return Refused(changed)
    if refusal is None:
        counted = count(
            rec, to, decided_by, comment, now, revises=asked.revises, ids=asked.ids, people=people
        )
        if counted is not None:
            return counted
    return Transition(to, decided_by, comment, refusal)

"""What an answer does, without a database: `bot.approvals.judging.judge` over every status, mode,
target, time and check outcome."""

from __future__ import annotations

import itertools
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.approvals.judging import (
    TRANSITIONS,
    Asked,
    Counted,
    Refused,
    Revised,
    Transition,
    Unchanged,
    judge,
)
from contracts.answers import PersonDecider, TimeoutDecider
from contracts.edits import EditResult, EditState
from contracts.enums import ApprovalMode, ApprovalStatus, SurfaceType
from contracts.errors import AlreadyDecided, ApprovalExpired, CosignerError, NotAnApprover, ParametersMismatch
from tests.bot.test_intake_decide import earlier

PERSON = PersonDecider(surface=SurfaceType.DASHBOARD, userId="u_1")
NOT_AN_APPROVER = NotAnApprover("u_9 is not an approver")


TIMES = [1500.0, 2000.0, 2500.0]  # before, at and after expires_at (2000)


def test_an_answer_decides_only_a_pending_approval_in_time_as_the_transition_table_allows() -> None:
    """Every combination of status, mode, target, time, check outcome and comment (2,352)."""
    for case in itertools.product(
        ApprovalStatus, ApprovalMode, ApprovalStatus, TIMES, [False, True], [None, "ok"]
    ):
        try:
            _an_answer_decides(*case)
        except AssertionError as failed:
            failed.add_note(f"status, mode, to, now, check_fails, comment = {case}")
            raise


def _an_answer_decides(
    status: ApprovalStatus,
    mode: ApprovalMode,
    to: ApprovalStatus,
    now: float,
    check_fails: bool,
    comment: str | None,
) -> None:
    rec = replace(earlier("issue_refund", "sha256:" + "a" * 64), status=status, mode=mode)
    out = judge(
        rec, Asked(to, PERSON, comment=comment), now, checked=NOT_AN_APPROVER if check_fails else None
    )
    if check_fails:
        assert out == Refused(NOT_AN_APPROVER)
        return
    if status is not ApprovalStatus.PENDING:
        # A closed approval never changes; the refusal names its state.
        assert isinstance(out, Refused) and out.audited
        assert isinstance(out.error, ApprovalExpired if status is ApprovalStatus.EXPIRED else AlreadyDecided)
        return
    late = now >= rec.expires_at and to is not ApprovalStatus.EXPIRED
    want = ApprovalStatus.EXPIRED if late else to
    if want is ApprovalStatus.DENIED and mode is ApprovalMode.HANDOFF:
        want = ApprovalStatus.FAILED
    if want not in TRANSITIONS[ApprovalStatus.PENDING]:
        assert isinstance(out, Refused) and not out.audited
        return
    assert isinstance(out, Transition) and out.to is want
    if late:
        # A late answer never decides: the approval expires, and the answer is told so.
        assert out.decided_by == TimeoutDecider() and out.comment is None
        assert isinstance(out.refusal, ApprovalExpired)
    else:
        assert (out.decided_by, out.comment, out.refusal) == (PERSON, comment, None)
    assert not isinstance(out.refusal, CosignerError) or late


def test_an_expiry_closes_only_once_the_time_is_up_at_the_instant_it_was_loaded() -> None:
    """The sweeper's "not due" is data (`Asked.not_due`), judged against `now`, not a clock read."""
    rec = replace(earlier("issue_refund", "sha256:" + "a" * 64), status=ApprovalStatus.PENDING)
    not_due = AlreadyDecided("not due")
    expiry = Asked(ApprovalStatus.EXPIRED, TimeoutDecider(), not_due=not_due)
    assert judge(rec, expiry, 1999.0) == Refused(not_due)
    for now in (2000.0, 2500.0):
        out = judge(rec, expiry, now)
        assert isinstance(out, Transition) and out.to is ApprovalStatus.EXPIRED and out.refusal is None
    # The answer's own checks come first: what they refused is what is said.
    assert judge(rec, expiry, 1999.0, checked=NOT_AN_APPROVER) == Refused(NOT_AN_APPROVER)


# --- four eyes: a quorum of distinct approvers --------------------------------------

REQUESTER = "u_2"  # who triggered the run in `earlier`
PEOPLE = [REQUESTER, "u_a", "u_b", "u_c", "u_d"]


def person(user: str) -> PersonDecider:
    return PersonDecider(surface=SurfaceType.DASHBOARD, userId=user)


@settings(max_examples=1500, deadline=None)
@given(
    quorum=st.integers(1, 4),
    separate=st.booleans(),
    answers=st.lists(st.tuples(st.sampled_from(PEOPLE), st.sampled_from(["approve", "deny"])), max_size=10),
)
def test_a_quorum_closes_once_when_enough_distinct_approvers_approve_and_one_deny_vetoes(
    quorum: int, separate: bool, answers: list[tuple[str, str]]
) -> None:
    rec = replace(
        earlier("issue_refund", "sha256:" + "a" * 64),
        status=ApprovalStatus.PENDING,
        mode=ApprovalMode.ASK_ALWAYS,
        quorum=quorum,
        separate_duties=separate,
    )
    counted: list[str] = []
    closed: ApprovalStatus | None = None
    for i, (who, verdict) in enumerate(answers):
        to = ApprovalStatus.APPROVED if verdict == "approve" else ApprovalStatus.DENIED
        out = judge(rec, Asked(to, person(who), comment=f"#{i}"), 1500.0 + i)
        if closed is not None:
            assert isinstance(out, Refused) and isinstance(out.error, AlreadyDecided)
            continue
        if to is ApprovalStatus.DENIED:
            # Any single Deny vetoes, with that person's comment.
            assert isinstance(out, Transition) and out.to is ApprovalStatus.DENIED and out.comment == f"#{i}"
            closed = ApprovalStatus.DENIED
        elif separate and who == REQUESTER:
            assert isinstance(out, Refused) and isinstance(out.error, NotAnApprover)
        elif quorum == 1:
            assert isinstance(out, Transition) and out.to is ApprovalStatus.APPROVED and out.vote is None
            closed = ApprovalStatus.APPROVED
        elif who in counted:
            assert isinstance(out, Unchanged), "the same person never counts twice"
        elif len(counted) + 1 < quorum:
            assert isinstance(out, Counted) and (out.count, out.quorum) == (len(counted) + 1, quorum)
            assert out.vote.by == who
            counted.append(who)
            rec = replace(rec, votes=(*rec.votes, out.vote))
        else:
            assert isinstance(out, Transition) and out.to is ApprovalStatus.APPROVED
            assert out.vote is not None and out.vote.by == who
            counted.append(who)
            assert len(set(counted)) == quorum, "approved exactly when the quorum of distinct people is met"
            closed = ApprovalStatus.APPROVED
        if closed is not None:
            rec = replace(rec, status=closed)
    if closed is not ApprovalStatus.APPROVED:
        assert len(counted) < quorum or quorum == 1
    if separate:
        assert REQUESTER not in counted, "the requester never counts"


def test_a_late_approve_toward_a_quorum_expires_the_approval_instead() -> None:
    rec = replace(earlier("issue_refund", "sha256:" + "a" * 64), status=ApprovalStatus.PENDING, quorum=2)
    out = judge(rec, Asked(ApprovalStatus.APPROVED, person("u_a")), 2500.0)
    assert isinstance(out, Transition) and out.to is ApprovalStatus.EXPIRED and out.vote is None


# --- edits under a quorum: every answer is bound to the version of the call it was given for ---


def version(n: int, original: str) -> str:
    """The digest of version `n` of the call: 0 is the agent's own."""
    return original if n == 0 else f"sha256:{n:064x}"


@settings(max_examples=1500, deadline=None)
@given(
    quorum=st.integers(2, 4),
    separate=st.booleans(),
    answers=st.lists(
        st.tuples(
            st.sampled_from(PEOPLE),
            st.sampled_from(["approve", "deny", "edit"]),
            st.integers(0, 3),  # how many versions behind the current one the answerer's view is
            st.booleans(),  # whether the answer names the digest it saw (else: the agent's own call)
        ),
        max_size=12,
    ),
)
def test_an_answer_counts_only_for_the_version_it_saw_and_an_edit_restarts_the_count(
    quorum: int, separate: bool, answers: list[tuple[str, str, int, bool]]
) -> None:
    rec = replace(
        earlier("issue_refund", "sha256:" + "a" * 64),
        status=ApprovalStatus.PENDING,
        mode=ApprovalMode.ASK_ALWAYS,
        quorum=quorum,
        separate_duties=separate,
        edit=EditState(fields=("amountCents",)),
    )
    original = rec.digest
    current, counted = 0, []  # the version asked now, and who approved it
    closed = False
    for i, (who, act, behind, names) in enumerate(answers):
        saw = max(current - behind, 0)
        seen = version(saw, original) if names else None
        to = ApprovalStatus.DENIED if act == "deny" else ApprovalStatus.APPROVED
        out = judge(rec, Asked(to, person(who), seen=seen, revises=act == "edit"), 1500.0 + i)
        if closed:
            assert isinstance(out, Refused) and isinstance(out.error, AlreadyDecided)
            continue
        if (saw if names else 0) != current:
            # Given for another version than the one asked now: refused, never counted.
            assert isinstance(out, Refused) and isinstance(out.error, ParametersMismatch)
            assert out.error.details["digest"] == version(current, original)
            continue
        if act == "deny":
            assert isinstance(out, Transition) and out.to is ApprovalStatus.DENIED
            closed = True
        elif separate and who == REQUESTER:
            assert isinstance(out, Refused) and isinstance(out.error, NotAnApprover)
        elif act == "edit":
            # The edit is its editor's Approve of the new version; every earlier one is set aside.
            assert isinstance(out, Revised) and out.vote.by == who
            assert out.set_aside == rec.votes and out.quorum == quorum
            current, counted = current + 1, [who]
            result = EditResult(parameters={}, fields=(), digest=version(current, original))
            rec = replace(rec, votes=(out.vote,), edit=EditState(fields=("amountCents",), result=result))
        elif who in counted:
            assert isinstance(out, Unchanged), "the same person never counts twice for one version"
        elif len(counted) + 1 < quorum:
            assert isinstance(out, Counted) and out.count == len(counted) + 1
            counted.append(who)
            rec = replace(rec, votes=(*rec.votes, out.vote))
        else:
            assert isinstance(out, Transition) and out.to is ApprovalStatus.APPROVED and out.vote is not None
            counted.append(who)
            # Approved exactly when the quorum of distinct people approved the version asked now.
            assert len(set(counted)) == quorum and {v.by for v in rec.votes} | {who} == set(counted)
            closed = True
        if closed:
            rec = replace(rec, status=to)
    if separate:
        assert REQUESTER not in counted, "the requester never counts"

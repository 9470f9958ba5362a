"""What an answer does, without a database: `bot.approvals.lifecycle.decide` over every status, mode,
target, time and check outcome."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.approvals.lifecycle import TRANSITIONS, Closing, Refused, Transition, decide
from contracts.answers import PersonDecider, TimeoutDecider
from contracts.enums import ApprovalMode, ApprovalStatus, SurfaceType
from contracts.errors import AlreadyDecided, ApprovalExpired, CosignerError, NotAnApprover
from tests.bot.test_intake_decide import earlier

PERSON = PersonDecider(surface=SurfaceType.DASHBOARD, userId="u_1")
NOT_AN_APPROVER = NotAnApprover("u_9 is not an approver")


def failing_check(rec: object) -> None:
    raise NOT_AN_APPROVER


@settings(max_examples=2000, deadline=None)
@given(
    status=st.sampled_from(ApprovalStatus),
    mode=st.sampled_from(ApprovalMode),
    to=st.sampled_from(ApprovalStatus),
    now=st.sampled_from([1500.0, 2000.0, 2500.0]),  # before, at and after expires_at (2000)
    check_fails=st.booleans(),
    comment=st.sampled_from([None, "ok"]),
)
def test_an_answer_decides_only_a_pending_approval_in_time_as_the_transition_table_allows(
    status: ApprovalStatus,
    mode: ApprovalMode,
    to: ApprovalStatus,
    now: float,
    check_fails: bool,
    comment: str | None,
) -> None:
    rec = replace(earlier("issue_refund", "sha256:" + "a" * 64), status=status, mode=mode)
    closing = Closing(to, PERSON, comment=comment, check=failing_check if check_fails else None)
    out = decide(rec, closing, now)
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

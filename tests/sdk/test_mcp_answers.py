"""The gateway's own answers: what the model reads when the upstream tool does not run."""

from __future__ import annotations

from cosigner import ApprovalStatus, DecidedBy, DeciderKind, Decision
from cosigner.mcp_gateway import answers


def closed(status: ApprovalStatus, by: DecidedBy | None, comment: str | None = None) -> Decision:
    return Decision(
        approval_id="apv_0123456789abcdefghij",
        execution_id="mcp-1",
        tool_call_id="mcp-2",
        tool_name="issue_refund",
        status=status,
        parameters_digest="sha256:00",
        decided_by=by,
        comment=comment,
    )


def text(decision: Decision) -> str:
    (content,) = answers.refused(decision, "issue_refund").content
    return str(getattr(content, "text", ""))


def test_a_denial_names_who_and_the_comment() -> None:
    by = DecidedBy(kind=DeciderKind.PERSON, surface="slack", user_id="U0ALICE")
    said = text(closed(ApprovalStatus.DENIED, by, "wrong order"))
    assert said == (
        'Approval apv_0123456789abcdefghij for issue_refund was denied by U0ALICE. Comment: "wrong order". '
        "The tool was not called."
    )


def test_a_failed_closed_denial_names_the_code() -> None:
    by = DecidedBy(kind=DeciderKind.SYSTEM, code="SURFACE_UNAVAILABLE")
    assert "was denied by Cosigner (SURFACE_UNAVAILABLE)." in text(closed(ApprovalStatus.DENIED, by))


def test_expiry_and_cancel_say_so() -> None:
    assert "expired without a decision (expiry means deny)" in text(
        closed(ApprovalStatus.EXPIRED, DecidedBy(kind=DeciderKind.TIMEOUT))
    )
    assert "was cancelled." in text(closed(ApprovalStatus.CANCELLED, DecidedBy(kind=DeciderKind.AGENT)))


def test_a_pending_quorum_says_how_many_have_approved_and_passes_them_on() -> None:
    from datetime import UTC, datetime

    from cosigner import Approval

    at = datetime(2026, 12, 2, 10, 42, tzinfo=UTC)
    waiting = Decision(
        approval_id="apv_0123456789abcdefghij",
        execution_id="mcp-1",
        tool_call_id="mcp-2",
        tool_name="delete_account",
        status=ApprovalStatus.PENDING,
        parameters_digest="sha256:00",
        quorum=2,
        approvals=(Approval(by="U0ANN", surface="slack", at=at),),
    )
    result = answers.pending(waiting, "delete_account")
    (content,) = result.content
    assert "2 people must approve this call (1 of 2 have)" in str(getattr(content, "text", ""))
    facts = (result.meta or {})[answers.META_KEY]
    assert facts["quorum"] == 2
    assert facts["approvals"] == [{"by": "U0ANN", "surface": "slack", "at": "2026-12-02T10:42:00+00:00"}]
    plain = answers.pending(closed(ApprovalStatus.PENDING, None), "issue_refund")
    assert "quorum" not in (plain.meta or {})[answers.META_KEY]

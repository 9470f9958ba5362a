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

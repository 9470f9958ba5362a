"""The tool results the gateway answers with when the upstream tool does not run (yet).

Each is a tool error result (`isError: true`) whose text the model reads: it says what
happened, names the approval, and says what to do next. The same facts are under
`_meta["cosigner"]` for programs.
"""

from __future__ import annotations

from typing import Any

from mcp.types import CallToolResult, TextContent

from cosigner import Decision
from cosigner.errors import CosignerError

__all__ = ["META_KEY", "definition_changed", "failed", "pending", "refused", "rejected", "unknown_tool"]

META_KEY = "cosigner"


def _error(text: str, **facts: Any) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        is_error=True,
        _meta={META_KEY: {k: v for k, v in facts.items() if v is not None}},
    )


def _approvals(decision: Decision) -> list[dict[str, str]] | None:
    """The approvals counted so far, as `_meta` shows them (None when there are none)."""
    if not decision.approvals:
        return None
    return [{"by": a.by, "surface": a.surface, "at": a.at.isoformat()} for a in decision.approvals]


def pending(decision: Decision, tool: str) -> CallToolResult:
    """The call waits for a person: call it again, unchanged, to get its result."""
    expires = decision.expires_at.isoformat() if decision.expires_at else None
    who = "a person must approve this call"
    if decision.quorum > 1:
        who = (
            f"{decision.quorum} people must approve this call ({len(decision.approvals)} of "
            f"{decision.quorum} have)"
        )
    return _error(
        f"Approval {decision.approval_id} for {tool} is pending: {who} "
        f"before it runs{f' (it expires at {expires})' if expires else ''}. It has not run. "
        f"Call {tool} again with exactly the same arguments to get its result: once approved, "
        "that same call goes through (and runs only once); while still pending it answers this again.",
        status="pending",
        approvalId=decision.approval_id,
        expiresAt=expires,
        quorum=decision.quorum if decision.quorum > 1 else None,
        approvals=_approvals(decision),
    )


def refused(decision: Decision, tool: str) -> CallToolResult:
    """A person denied the call, it expired, or it was cancelled: the tool never ran."""
    status = decision.status.value
    by = decision.decided_by
    who = ""
    if by is not None and by.user_id:
        who = f" by {by.user_id}"
    elif by is not None and by.code:
        who = f" by Cosigner ({by.code})"  # failed closed, e.g. the card could not be delivered
    why = {
        "denied": f"was denied{who}",
        "expired": "expired without a decision (expiry means deny)",
        "cancelled": "was cancelled",
    }.get(status, f"ended as {status}")
    comment = f' Comment: "{decision.comment}".' if decision.comment else ""
    return _error(
        f"Approval {decision.approval_id} for {tool} {why}.{comment} The tool was not called.",
        status=status,
        approvalId=decision.approval_id,
        comment=decision.comment,
        quorum=decision.quorum if decision.quorum > 1 else None,
        approvals=_approvals(decision),
    )


def rejected(error: CosignerError, tool: str) -> CallToolResult:
    """Cosigner refused the request itself (standing deny, unsupported surface, cap, …)."""
    return _error(
        f"{error.code!s}: Cosigner refused {tool}: {error.message} The tool was not called.",
        status="refused",
        code=str(error.code),
        approvalId=error.details.get("approvalId"),
        policy=error.details.get("policy"),
    )


def definition_changed(error: CosignerError, tool: str) -> CallToolResult:
    """The gateway itself refused `tool`: its definition is not the one approved in the lock file."""
    return _error(
        f"{error.code!s}: {error.message} The tool was not called.",
        status="refused",
        code=str(error.code),
        approvalId=error.details.get("approvalId"),
    )


def failed(text: str, **facts: Any) -> CallToolResult:
    """Something between the gateway and Cosigner or the upstream failed; say what."""
    return _error(text, status="failed", **facts)


def unknown_tool(tool: str) -> CallToolResult:
    """A name the upstream does not list, answered as the `mcp` SDK's servers answer it.

    No Cosigner facts: nothing was asked, so there is no approval to name."""
    return CallToolResult(content=[TextContent(type="text", text=f"Unknown tool: {tool}")], is_error=True)

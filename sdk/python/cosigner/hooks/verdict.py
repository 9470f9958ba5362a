"""The hook's answer: `allow` only for an approved call, `deny` with the reason otherwise.

The JSON is the one both agents read from a PreToolUse hook:
`{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow" |
"deny", "permissionDecisionReason": "…"}}`. Claude Code shows a deny's reason to the model
and an allow's to the person; so a deny carries the approver's comment, an allow who
approved. The hook never answers `ask`: the person is asked through Cosigner instead.
"""

from __future__ import annotations

import json
from enum import StrEnum

__all__ = ["Permission", "Verdict", "allow", "deny", "verdict_of"]

MAX_REASON = 2000


class Permission(StrEnum):
    """The two decisions the hook gives."""

    ALLOW = "allow"
    DENY = "deny"


class Verdict:
    """A decision and its reason, as the hook prints it."""

    __slots__ = ("permission", "reason")

    def __init__(self, permission: Permission, reason: str) -> None:
        self.permission = permission
        self.reason = reason

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Verdict) and (other.permission, other.reason) == (
            self.permission,
            self.reason,
        )

    def __hash__(self) -> int:
        return hash((self.permission, self.reason))

    def __repr__(self) -> str:
        return f"Verdict({self.permission.value!r}, {self.reason!r})"

    def to_json(self) -> dict[str, dict[str, str]]:
        """The hook's output object."""
        return {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": self.permission.value,
                "permissionDecisionReason": self.reason,
            }
        }

    def to_bytes(self) -> bytes:
        """The output as one line of UTF-8 JSON."""
        return json.dumps(self.to_json(), ensure_ascii=False).encode() + b"\n"


def allow(reason: str) -> Verdict:
    """Run the call."""
    return Verdict(Permission.ALLOW, _short(reason))


def deny(reason: str) -> Verdict:
    """Do not run the call; `reason` says why (the model reads it)."""
    return Verdict(Permission.DENY, _short(reason))


def verdict_of(
    *,
    status: str,
    decider: str | None,
    user_id: str | None = None,
    surface: str | None = None,
    rule: str | None = None,
    comment: str | None = None,
) -> Verdict:
    """The verdict for a decision object's fields; only `approved` allows."""
    said = f": {comment}" if comment else ""
    if decider == "person":
        who = f"{user_id or 'an approver'}" + (f" on {surface}" if surface else "")
    elif decider == "policy":
        who = "Cosigner's policy" + (f" ({rule})" if rule else "")
    else:
        who = {"timeout": "nobody before the request expired", "allowance": "a standing allow"}.get(
            decider or "", decider or "Cosigner"
        )
    if status == "approved":
        verb = "allowed" if decider == "policy" else "approved"
        return allow(f"{verb} by {who} in Cosigner{said}")
    if status == "denied":
        return deny(f"denied by {who} in Cosigner{said}; do not retry this call unchanged")
    if status == "expired":
        return deny("nobody answered in Cosigner before the request expired; the call was not run")
    if status == "cancelled":
        return deny(f"the request was cancelled in Cosigner{said}; the call was not run")
    return deny(f"Cosigner answered {status[:40]!r}, which is not an approval; the call was not run")


def _short(reason: str) -> str:
    return reason if len(reason) <= MAX_REASON else reason[: MAX_REASON - 1] + "…"

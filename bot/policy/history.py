"""The decisions on record, one entry per approval: what was asked, and how it ended.

`cosigner policy suggest` reads the audit log's `requested` event of each approval and the
event that closed it (`approved`, `denied`, `expired`, `cancelled`), and sorts each call into
evidence for an allow (asked, and approved by a person), calls that must stay outside any
allow (denied, expired, cancelled, refused by the policy, or still waiting), and calls that
say nothing either way (already let through, or approved by no person).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from bot.policy.replay import read_requested, recorded_label
from contracts.audit_events import Closing
from contracts.enums import ApprovalStatus, AuditEvent, DeciderKind
from storage.audit import AuditRow, Requested

# The events `collect` reads: the request, and each way an approval closes.
CLOSINGS = frozenset(
    {ApprovalStatus.APPROVED, ApprovalStatus.DENIED, ApprovalStatus.EXPIRED, ApprovalStatus.CANCELLED}
)
READ = frozenset({AuditEvent.REQUESTED.value, *(s.value for s in CLOSINGS)})

# Recorded decisions on which nobody was asked.
_UNASKED = frozenset({"none", "deny", "invalid", "unsupported"})


class Evidence(StrEnum):
    """What one recorded call says about allowing calls like it."""

    APPROVED = "approved"  # asked, and approved by a person: evidence for an allow
    REFUSED = "refused"  # denied, expired, cancelled, refused by the policy, or still waiting
    NEUTRAL = "neutral"  # already ran unasked, or approved by no person


@dataclass
class Call:
    """One recorded request and how it ended."""

    request: Requested
    tool: str
    parameters: dict[str, Any]
    decision: str  # the recorded decision, as `bot.policy.replay.recorded_label` reads it
    closed: ApprovalStatus | None = None
    people: set[str] = field(default_factory=set)  # who approved it, as `surface:id`

    @property
    def asked(self) -> bool:
        """Whether a person was asked when the call arrived."""
        return self.decision not in _UNASKED

    @property
    def evidence(self) -> Evidence:
        """What this call says about allowing calls like it (fail closed: in doubt, refused)."""
        if self.decision == "none":
            return Evidence.NEUTRAL
        if self.closed is ApprovalStatus.APPROVED:
            return Evidence.APPROVED if self.asked and self.people else Evidence.NEUTRAL
        return Evidence.REFUSED


def _people(actor: dict[str, Any], voted: list[dict[str, Any]] | None) -> set[str]:
    if voted is not None:
        return {f"{v.get('surface')}:{v.get('by')}" for v in voted if v.get("by")}
    if actor.get("kind") == DeciderKind.PERSON and actor.get("userId"):
        return {f"{actor.get('surface')}:{actor['userId']}"}
    return set()


def collect(rows: Iterable[AuditRow]) -> tuple[list[Call], int]:
    """Each approval requested in `rows` with how it ended; and how many requests could not be
    read (skipped). Closing events of approvals requested earlier than `rows` are ignored."""
    calls: dict[str, Call] = {}
    unreadable = 0
    for row in rows:
        if row.event == AuditEvent.REQUESTED:
            try:
                data = read_requested(row.data)
                tool, params, decision = data.toolName, data.parameters or {}, recorded_label(data)
            except (ValueError, KeyError, TypeError):
                unreadable += 1
                continue
            if not isinstance(params, dict):
                unreadable += 1
                continue
            request = Requested(row.approval_id, row.tenant, row.at, row.data)
            calls[row.approval_id] = Call(request, tool, params, decision)
            continue
        call = calls.get(row.approval_id)
        if call is None or call.closed is not None:
            continue
        call.closed = ApprovalStatus(row.event)
        if call.closed is ApprovalStatus.APPROVED:
            try:
                actor = json.loads(row.actor)
            except ValueError:
                continue
            closing = row.typed()  # `approvers`: a quorum's, read through the closing's model
            if isinstance(actor, dict) and isinstance(closing, Closing):
                call.people = _people(actor, closing.approvers)
    return list(calls.values()), unreadable

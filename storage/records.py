"""An approval row as a frozen record, and what a surface may see of it (card, placement)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from contracts.answers import DecidedBy, PersonDecider, PolicyDecider, SystemDecider, decider_from_json
from contracts.denials import scope_of
from contracts.digest import parameters_digest
from contracts.edits import EditState
from contracts.enums import ApprovalMode, ApprovalStatus, DeciderKind, SurfaceType, ToolKind
from contracts.handoff import HandoffState
from contracts.ports import ApprovalCard, ApprovalVote, Delivered, EscalationNote, Outcome, Placed, Route
from contracts.surfaces import person_of
from contracts.wire import Surface
from storage.operations import OperationRecord
from storage.record_columns import (
    Escalation,
    FollowUps,
    TraceContext,
    delivered_from_json,
    delivered_to_json,
    edit_from_json,
    edit_to_json,
    handoff_from_json,
    route_fields,
    route_from_json,
    surface_from_json,
    ts,
)

__all__ = ["Changes", "Decided", "Record", "Vote", "route_fields"]  # route_fields: as intake imports it


@dataclass(frozen=True)
class Vote:
    """One approver's Approve: their id on the surface, the surface, when (UNIX seconds), and
    the other ids an identity provider vouched for with it (an inbox sign-in's)."""

    by: str
    surface: SurfaceType
    at: float
    tied: tuple[str, ...] = ()

    @property
    def ids(self) -> tuple[str, ...]:
        """Every id the approver held when they approved."""
        return (self.by, *self.tied)


def _decider(by: DecidedBy | None) -> str | None:
    """Who or what decided, in a word: the person's id, the policy rule or the error code."""
    if isinstance(by, PersonDecider):
        return by.userId
    if isinstance(by, PolicyDecider):
        return by.rule
    if isinstance(by, SystemDecider):
        return by.code
    return None


@dataclass(frozen=True)
class Decided:
    """A decision as an append writes it: the new status, when, by whom, with what comment."""

    status: ApprovalStatus
    at: float
    by: DecidedBy
    comment: str | None


@dataclass(frozen=True)
class Changes:
    """What an append changes besides the audit chain, typed; a field left None is unchanged.
    Storage turns it into columns (`columns`); nothing above storage builds a column."""

    decided: Decided | None = None
    operation: OperationRecord | None = None
    handoff: HandoffState | None = None
    expires_at: float | None = None
    delivered: Delivered | None = None
    edit: EditState | None = None
    follow_ups: FollowUps | None = None

    def columns(self) -> dict[str, Any]:
        """The approvals table's columns for these changes."""
        out: dict[str, Any] = {}
        if self.decided is not None:
            d = self.decided
            out |= {
                "status": d.status.value,
                "decided_at": d.at,
                "decided_by": d.by.model_dump_json(exclude_none=True),
                "comment": d.comment,
            }
        if self.handoff is not None:
            out["handoff"] = self.handoff.model_dump_json()
        if self.expires_at is not None:
            out["expires_at"] = self.expires_at
        if self.operation is not None:
            out["operation"] = self.operation.to_json()
        if self.delivered is not None:
            out["delivered"] = delivered_to_json(self.delivered)
        if self.edit is not None:
            out["edit"] = edit_to_json(self.edit)
        if self.follow_ups is not None:
            out["follow_ups"] = self.follow_ups.to_json()
        return out


@dataclass(frozen=True)
class Record:
    """One approval as stored."""

    id: str
    tenant: str
    execution_id: str
    tool_call_id: str
    tool_name: str
    kind: ToolKind
    mode: ApprovalMode
    status: ApprovalStatus
    parameters: dict[str, Any]
    digest: str
    reason: str | None
    surface: Surface  # where the run was triggered, as the request said (the wire model)
    route: Route | None
    delivered: Delivered | None
    short_code: str
    policy_rule: str
    callback_url: str | None
    created_at: float
    expires_at: float
    decided_at: float | None
    decided_by: DecidedBy | None
    comment: str | None
    audit_seq: int
    audit_head: str
    trace_id: str | None = None
    trace_context: TraceContext | None = None
    operation: OperationRecord | None = None
    handoff: HandoffState | None = None
    edit: EditState | None = None
    follow_ups: FollowUps | None = None
    quorum: int = 1  # distinct approvers who must approve
    separate_duties: bool = False  # the requester's own Approve never counts
    votes: tuple[Vote, ...] = ()  # the approvals counted so far (quorum above 1 only)
    step_up: bool = False  # an Approve counts only once confirmed with a passkey in the inbox

    @classmethod
    def from_row(cls, row: Any) -> Record:
        """Build from a SQLAlchemy row of the approvals table."""
        return cls(
            id=row.id,
            tenant=row.tenant,
            execution_id=row.execution_id,
            tool_call_id=row.tool_call_id,
            tool_name=row.tool_name,
            kind=ToolKind(row.kind),
            mode=ApprovalMode(row.mode),
            status=ApprovalStatus(row.status),
            parameters=json.loads(row.parameters),
            digest=row.parameters_digest,
            reason=row.reason,
            surface=surface_from_json(row.surface),
            route=route_from_json(row.route),
            delivered=delivered_from_json(row.delivered),
            short_code=row.short_code,
            policy_rule=row.policy_rule,
            callback_url=row.callback_url,
            created_at=row.created_at,
            expires_at=row.expires_at,
            decided_at=row.decided_at,
            decided_by=decider_from_json(row.decided_by) if row.decided_by else None,
            comment=row.comment,
            audit_seq=row.audit_seq,
            audit_head=row.audit_head,
            trace_id=row.trace_id,
            trace_context=TraceContext.from_json(row.trace_context),
            operation=OperationRecord.from_json(getattr(row, "operation", None)),
            handoff=handoff_from_json(getattr(row, "handoff", None)),
            edit=edit_from_json(getattr(row, "edit", None)),
            follow_ups=FollowUps.from_json(getattr(row, "follow_ups", None)),
            quorum=getattr(row, "quorum", None) or 1,
            separate_duties=bool(getattr(row, "separate_duties", False)),
            step_up=bool(getattr(row, "step_up", False)),
        )

    def replace(self, **columns: Any) -> Record:
        """A copy with some columns changed, given as stored (JSON text, status string)."""
        fields: dict[str, Any] = {}
        for key, value in columns.items():
            if key == "status":
                fields["status"] = ApprovalStatus(value)
            elif key == "decided_by":
                fields["decided_by"] = decider_from_json(value) if value else None
            elif key == "delivered":
                fields["delivered"] = delivered_from_json(value)
            elif key == "operation":
                fields["operation"] = OperationRecord.from_json(value)
            elif key == "handoff":
                fields["handoff"] = handoff_from_json(value)
            elif key == "edit":
                fields["edit"] = edit_from_json(value)
            elif key == "follow_ups":
                fields["follow_ups"] = FollowUps.from_json(value)
            else:
                fields[key] = value
        return replace(self, **fields)

    @property
    def closed(self) -> bool:
        """True once the approval left `pending`."""
        return self.status is not ApprovalStatus.PENDING

    @property
    def settled(self) -> bool:
        """Closed, and for an approved operation also answered by its application: what an
        agent waits for."""
        if not self.closed:
            return False
        op = self.operation
        return op is None or self.status is not ApprovalStatus.APPROVED or op.outcome is not None

    def approvals(self) -> tuple[Vote, ...]:
        """Every Approve that counts, oldest first: the votes toward a quorum above 1, or
        the one person who approved a request of quorum 1."""
        if self.votes or self.quorum > 1:
            return self.votes
        by = self.decided_by
        if self.status is ApprovalStatus.APPROVED and isinstance(by, PersonDecider) and self.decided_at:
            return (Vote(by.userId, by.surface, self.decided_at),)
        return ()

    @property
    def call_digest(self) -> str:
        """The digest of the call the approvers are asked to approve: the agent's, or once an
        approver edited it (a quorum's request stays pending) the edited one."""
        result = self.edit.result if self.edit is not None else None
        return result.digest if result is not None else self.digest

    @property
    def call_shown(self) -> dict[str, Any]:
        """That call as shown (values the policy hides stay hidden)."""
        result = self.edit.result if self.edit is not None else None
        return dict(result.parameters) if result is not None else dict(self.parameters)

    @property
    def call_tag(self) -> str:
        """What a surface carries to name the call it showed (`ApprovalCard.digest`): the RFC
        8785 digest of the call **as shown**, not of the call. A digest of the real call would
        let whoever sees a button's value, a form or a modal's metadata (Slack among them)
        test guesses of the values the policy hides; this one covers only what the card
        shows. Two versions of a call never show the same: an edit changes only fields shown
        whole. Without redaction it equals `call_digest`."""
        return parameters_digest(self.call_shown)

    def triggered_by(self) -> str:
        """Who or what started the run, for cards: `slack:U1`, `sms:+1555…`, `schedule`."""
        ident = person_of(self.surface)
        return f"{self.surface.type}:{ident}" if ident else self.surface.type

    def card(self) -> ApprovalCard:
        """What a surface may show; parameters are the redacted ones."""
        outcome = None
        if self.closed and self.decided_at is not None:
            by = self.decided_by
            outcome = Outcome(
                status=self.status,
                decided_at=ts(self.decided_at),
                decider_kind=by.kind if by is not None else DeciderKind.SYSTEM.value,
                decider=_decider(by),
                surface=by.surface if isinstance(by, PersonDecider) else None,
                comment=self.comment,
            )
        return ApprovalCard(
            approval_id=self.id,
            short_code=self.short_code,
            tenant=self.tenant,
            execution_id=self.execution_id,
            tool_call_id=self.tool_call_id,
            tool_name=self.tool_name,
            kind=self.kind,
            mode=self.mode,
            parameters=self.parameters,
            reason=self.reason,
            triggered_by=self.triggered_by(),
            policy_rule=self.policy_rule,
            created_at=ts(self.created_at),
            expires_at=ts(self.expires_at),
            status=self.status,
            outcome=outcome,
            offers_always_deny=scope_of(self.tenant, self.tool_name, self.mode, self.route, self.surface)
            is not None,
            preview=self.operation.preview_model if self.operation else None,
            result=self.operation.outcome_model if self.operation else None,
            handoff=self.handoff.card() if self.handoff is not None else None,
            editable=self.edit.fields if self.edit is not None and not self.closed else (),
            edited=self.edit.result.parameters if self.edit is not None and self.edit.result else None,
            edited_by=self.edit.result.by if self.edit is not None and self.edit.result else None,
            edited_on=self.edit.result.surface if self.edit is not None and self.edit.result else None,
            digest=self.call_tag,
            escalations=tuple(EscalationNote(e.to, ts(e.at)) for e in self.escalated),
            quorum=self.quorum,
            separate_duties=self.separate_duties,
            step_up=self.step_up,
            approvals=tuple(ApprovalVote(v.by, v.surface, ts(v.at)) for v in self.approvals()),
        )

    def approvers_on(self, surface: SurfaceType) -> tuple[str, ...]:
        """Everyone who may answer on `surface`: the route's approvers there, and those of each
        route the request was escalated to there."""
        routes = [self.route, *(e.route for e in self.escalated)]
        return tuple(
            dict.fromkeys(a for r in routes if r is not None and r.surface == surface for a in r.approvers)
        )

    @property
    def escalated(self) -> tuple[Escalation, ...]:
        """The escalation steps taken so far, oldest first."""
        return self.follow_ups.escalations if self.follow_ups is not None else ()

    def placed(self) -> Placed | None:
        """The card with its route and receipt; None for approvals that needed no person."""
        if self.route is None:
            return None
        return Placed(card=self.card(), route=self.route, delivered=self.delivered)

"""Taking a request in, the storage side: one read of what a new call is decided on, one write
of what was decided.

`load` answers, in one call, every question the decision asks of the database (the earlier
call with these ids, the execution's count of gated calls, the run grant, the standing deny);
`write` stores the new approval, builds its row (JSON columns, delivery key, short code),
chains its first audit events and queues its first jobs. Both run inside the same write
transaction (`Database.run_write`), so a concurrent create of the same call conflicts instead
of inserting twice.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa

from contracts.answers import DecidedBy
from contracts.denials import Scope
from contracts.edits import EditState
from contracts.enums import ApprovalMode, ApprovalStatus, ToolKind
from contracts.handoff import HandoffState
from contracts.ports import Route
from storage import allowances, denials, jobs, known, ledger
from storage.audit import Event
from storage.denials import StandingDeny, standing_denies
from storage.direct import Direct
from storage.operations import OperationRecord
from storage.record_columns import TraceContext, delivery_key, edit_to_json, route_to_json
from storage.records import Record
from storage.tables import approvals, run_grants
from storage.work import Work

_PENDING_ALIKE = Direct(
    sa.select(approvals).where(
        approvals.c.coalesce_key == sa.bindparam("key"),
        # A literal, so SQLite's planner uses the partial index (a bound value would not match it).
        approvals.c.status == sa.literal_column("'pending'"),
    )
)

_RUN_GRANT = Direct(
    sa.select(run_grants.c.approval_id, run_grants.c.granted_by).where(
        run_grants.c.tenant == sa.bindparam("tenant"),
        run_grants.c.execution_id == sa.bindparam("execution"),
        run_grants.c.tool_name == sa.bindparam("tool"),
        run_grants.c.requester == sa.bindparam("requester"),
    )
)


@dataclass(frozen=True)
class RunGrant:
    """An "approve for this run" in force: which approval gave it, and who."""

    approval_id: str
    granted_by: str


@dataclass(frozen=True)
class Question:
    """What to load for one call: its ids, and which of the optional answers the rule needs.

    `count` asks for the execution's gated calls (not for a call that needs nobody),
    `grant` for the run grant of (folded tool name, requester key), `scope` for the standing
    deny in force where the call would be asked, `coalesce` for the pending request with this
    coalescing key (`bot.approvals.coalescing.key`).
    """

    tenant: str
    execution_id: str
    tool_call_id: str
    count: bool = False
    grant: tuple[str, str] | None = None
    scope: Scope | None = None
    coalesce: str | None = None
    allowance: allowances.Scope | None = None  # the standing allows in force for this scope
    now: float = 0.0  # when the call is decided: an allowance that expired by then is not read


@dataclass(frozen=True)
class Snapshot:
    """Everything a new call is decided on, as the database had it in this transaction."""

    earlier: Record | None = None
    gated: int = 0
    grant: RunGrant | None = None
    standing: StandingDeny | None = None
    pending: Record | None = None  # the identical request pending now (`Question.coalesce`)
    allowances: tuple[allowances.StandingAllow, ...] = ()


@dataclass(frozen=True)
class NewApproval:
    """A new approval as decided, before storage gives it its row, short code and chain."""

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
    surface: dict[str, Any]
    route: Route | None
    policy_rule: str
    callback_url: str | None
    created_at: float
    expires_at: float
    decided_by: DecidedBy | None
    trace_id: str | None = None
    trace_context: TraceContext | None = None
    operation: OperationRecord | None = None
    handoff: HandoffState | None = None
    edit: EditState | None = None
    quorum: int = 1
    separate_duties: bool = False
    step_up: bool = False
    coalesce_key: str | None = None  # set on a pending tool call only
    events: Sequence[Event] = ()
    jobs: Sequence[jobs.Queued] = field(default_factory=tuple)


def load(tx: Work, q: Question) -> Snapshot:
    """Read, in this transaction, what the call is decided on; an earlier call ends the read
    (it is replayed, nothing else matters). On PostgreSQL it is one statement."""
    if tx.conn.dialect.name == "postgresql":
        return _load_at_once(tx, q)
    earlier = ledger.load_call(tx, q.tenant, q.execution_id, q.tool_call_id)
    if earlier is not None:
        return Snapshot(earlier=earlier)
    standing = denials.in_force(tx, q.scope) if q.scope is not None else None
    gated = ledger.gated_count(tx, q.tenant, q.execution_id) if q.count and standing is None else 0
    grant = None
    if q.grant is not None and standing is None:
        tool, requester = q.grant
        params = {"tenant": q.tenant, "execution": q.execution_id, "tool": tool, "requester": requester}
        row = _RUN_GRANT.first(tx, params)
        grant = RunGrant(row.approval_id, row.granted_by) if row is not None else None
    pending = None
    if q.coalesce is not None and standing is None:
        found = _PENDING_ALIKE.first(tx, {"key": q.coalesce})
        pending = Record.from_row(found) if found is not None else None
    allows = (
        allowances.in_force(tx, q.allowance, q.now) if q.allowance is not None and standing is None else ()
    )
    return Snapshot(gated=gated, grant=grant, standing=standing, pending=pending, allowances=allows)


# PostgreSQL reads a new call's snapshot in one statement, one round trip instead of up to
# four: a one-row select that left-joins the earlier call, the standing deny and the run
# grant (each at most one row: unique keys) and counts the execution's gated calls; one
# statement per combination of what a question asks.
_AT_ONCE: dict[tuple[bool, bool, bool, bool], Direct] = {}
_DENY_KEYS = ("tool_name", "surface", "approver", "requester")


def _at_once(count: bool, grant: bool, scope: bool, coalesce: bool) -> Direct:
    found = _AT_ONCE.get((count, grant, scope, coalesce))
    if found is not None:
        return found
    tenant: Any = sa.bindparam("tenant")
    execution: Any = sa.bindparam("execution")
    a = approvals.alias("a")
    columns: list[Any] = [c.label(f"a_{c.key}") for c in a.c]
    source: Any = sa.select(sa.literal(1).label("one")).subquery("one")
    source = source.outerjoin(
        a,
        sa.and_(
            a.c.tenant == tenant, a.c.execution_id == execution, a.c.tool_call_id == sa.bindparam("call")
        ),
    )
    if scope:
        d = standing_denies.alias("d")
        columns += [c.label(f"d_{c.key}") for c in d.c]
        source = source.outerjoin(
            d,
            sa.and_(
                d.c.tenant == tenant,
                *(d.c[k] == sa.bindparam(f"d_{k}") for k in _DENY_KEYS),
                d.c.lifted_at.is_(None),
            ),
        )
    if grant:
        g = run_grants.alias("g")
        columns += [g.c.approval_id.label("g_approval_id"), g.c.granted_by.label("g_granted_by")]
        source = source.outerjoin(
            g,
            sa.and_(
                g.c.tenant == tenant,
                g.c.execution_id == execution,
                g.c.tool_name == sa.bindparam("g_tool"),
                g.c.requester == sa.bindparam("g_requester"),
            ),
        )
    if coalesce:
        c = approvals.alias("c")
        columns += [col.label(f"c_{col.key}") for col in c.c]
        source = source.outerjoin(
            c,
            sa.and_(c.c.coalesce_key == sa.bindparam("c_key"), c.c.status == sa.literal_column("'pending'")),
        )
    if count:
        columns.append(ledger.GATED_IN_EXECUTION.scalar_subquery().label("gated"))
    found = _AT_ONCE[(count, grant, scope, coalesce)] = Direct(
        sa.select(*columns).select_from(source).limit(1)
    )
    return found


def _prefixed(row: Any, prefix: str) -> SimpleNamespace:
    n = len(prefix)
    return SimpleNamespace(**{k[n:]: v for k, v in row._asdict().items() if k.startswith(prefix)})


def _load_at_once(tx: Work, q: Question) -> Snapshot:
    params: dict[str, Any] = {"tenant": q.tenant, "execution": q.execution_id, "call": q.tool_call_id}
    if q.scope is not None:
        params |= {
            "d_tool_name": q.scope.tool_name,
            "d_surface": q.scope.surface.value,
            "d_approver": q.scope.approver,
            "d_requester": q.scope.requester,
        }
    if q.grant is not None:
        params |= {"g_tool": q.grant[0], "g_requester": q.grant[1]}
    if q.coalesce is not None:
        params["c_key"] = q.coalesce
    row = _at_once(q.count, q.grant is not None, q.scope is not None, q.coalesce is not None).first(
        tx, params
    )
    if row.a_id is not None:
        return Snapshot(earlier=Record.from_row(_prefixed(row, "a_")))
    if q.scope is not None and row.d_id is not None:
        return Snapshot(standing=StandingDeny.from_row(_prefixed(row, "d_")))
    grant = None
    if q.grant is not None and row.g_approval_id is not None:
        grant = RunGrant(row.g_approval_id, row.g_granted_by)
    pending = None
    if q.coalesce is not None and row.c_id is not None:
        pending = Record.from_row(_prefixed(row, "c_"))
    # A second statement only for a tool that offers "Allow for …" (storage.allowances).
    allows = allowances.in_force(tx, q.allowance, q.now) if q.allowance is not None else ()
    return Snapshot(gated=int(row.gated) if q.count else 0, grant=grant, pending=pending, allowances=allows)


def write(tx: Work, new: NewApproval) -> Record:
    """Insert the approval with its first audit events and queue its first jobs; return it as
    stored (and, in `Database.create`, kept in this replica's copy)."""
    route = new.route
    values = {
        "id": new.id,
        "tenant": new.tenant,
        "execution_id": new.execution_id,
        "tool_call_id": new.tool_call_id,
        "tool_name": new.tool_name,
        "kind": new.kind.value,
        "mode": new.mode.value,
        "status": new.status.value,
        "parameters": json.dumps(new.parameters, separators=(",", ":")),
        "parameters_digest": new.digest,
        "reason": new.reason,
        "surface": json.dumps(new.surface, separators=(",", ":"), ensure_ascii=False),
        "route": route_to_json(route) if route else None,
        "delivered": None,
        "delivery_key": delivery_key(route) if route else None,
        "short_code": ledger.short_code(tx, route) if route else "0000",
        "policy_rule": new.policy_rule,
        "callback_url": new.callback_url,
        "created_at": new.created_at,
        "expires_at": new.expires_at,
        "decided_at": None if new.decided_by is None else new.created_at,
        "decided_by": new.decided_by.model_dump_json(exclude_none=True) if new.decided_by else None,
        "comment": None,
        "trace_id": new.trace_id,
        "trace_context": new.trace_context.to_json() if new.trace_context is not None else None,
        "operation": new.operation.to_json() if new.operation is not None else None,
        "handoff": new.handoff.model_dump_json() if new.handoff is not None else None,
        "edit": edit_to_json(new.edit) if new.edit is not None else None,
        "quorum": new.quorum,
        "separate_duties": new.separate_duties,
        "step_up": new.step_up,
        **({"coalesce_key": new.coalesce_key} if new.coalesce_key is not None else {}),
    }
    rec = ledger.insert_approval(tx, values, list(new.events), new.jobs)
    known.created(tx, rec)  # pending: the agent's long-poll and the decision read it
    return rec

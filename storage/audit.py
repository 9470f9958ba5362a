"""The audit chain: append-only events per approval, each hashing the one before it.

The approval row carries the chain's length and head hash, so deleting the newest event
is caught as surely as editing or deleting one in the middle.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from contracts.audit_events import AuditEventModel, UnknownEvent, event_data, parse_event
from contracts.cloudevents import AuditCloudEvent, cloudevent
from contracts.digest import SAFE_INTEGER, canonical_json
from storage.tables import approvals, audit_events
from storage.work import Work

GENESIS = "0" * 64
_STREAMED = 500  # rows fetched at a time by the reads that stream the whole log


@dataclass(frozen=True)
class Event:
    """One audit event before it is chained."""

    event: str
    actor: Mapping[str, Any]
    data: Mapping[str, Any]


def recordable(value: Any) -> Any:
    """`value` with anything JSON cannot hold exactly (a tuple, a huge integer, NaN, an object)
    turned into a list or its text, so recording an event never fails."""
    # The plain JSON types first, by exact type: every recorded event is made of them.
    kind = type(value)
    if kind is str:
        return value if value.isascii() else _utf8(value)
    if kind is dict:
        return {k if type(k) is str else str(k): recordable(v) for k, v in value.items()}
    if value is None or kind is bool:
        return value
    if kind is int:
        return value if abs(value) <= SAFE_INTEGER else str(value)
    if kind is list:
        return [recordable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): recordable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [recordable(v) for v in value]
    if isinstance(value, str):
        return _utf8(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and abs(value) <= SAFE_INTEGER:
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    return str(value)


def _utf8(value: str) -> str:
    # A lone surrogate cannot be written as UTF-8: keep the rest of the text.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "backslashreplace").decode("ascii", "replace")
    return value


def chain_hash(
    prev: str, approval_id: str, tenant: str, seq: int, at: float, event: str, actor: str, data: str
) -> str:
    """sha256 over the previous hash and the JCS form of this event's content."""
    content = canonical_json(
        {
            "approvalId": approval_id,
            "tenant": tenant,
            "seq": seq,
            "at": repr(at),
            "event": event,
            "actor": actor,
            "data": data,
        }
    )
    return hashlib.sha256(prev.encode() + content).hexdigest()


def chain_rows(
    approval_id: str, tenant: str, start_seq: int, head: str, at: float, events: Iterable[Event]
) -> tuple[list[dict[str, Any]], int, str]:
    """Rows to insert for `events` after (start_seq, head), and the new (seq, head)."""
    rows = []
    seq, prev = start_seq, head
    for e in events:
        seq += 1
        actor = canonical_json(recordable(e.actor)).decode("utf-8")
        data = canonical_json(recordable(e.data)).decode("utf-8")
        h = chain_hash(prev, approval_id, tenant, seq, at, e.event, actor, data)
        rows.append(
            {
                "approval_id": approval_id,
                "tenant": tenant,
                "seq": seq,
                "at": at,
                "event": e.event,
                "actor": actor,
                "data": data,
                "prev_hash": prev,
                "hash": h,
            }
        )
        prev = h
    return rows, seq, prev


@dataclass(frozen=True)
class Finding:
    """A break in a chain: which approval, which sequence number, and what is wrong."""

    approval_id: str
    seq: int | None
    problem: str


def verify_chains(tx: Work) -> tuple[int, list[Finding]]:
    """Check every chain; return the number of events checked and every break found. Run it
    with `Database.run_read(..., snapshot=True)`: the approval rows and the events it
    compares are read at one moment, and the events are streamed."""
    heads = {
        r.id: (r.audit_seq, r.audit_head, r.tenant)
        for r in (
            tx.conn.execute(
                sa.select(approvals.c.id, approvals.c.audit_seq, approvals.c.audit_head, approvals.c.tenant)
            )
        )
    }
    findings: list[Finding] = []
    checked = 0
    current: str | None = None
    prev = GENESIS
    expected_seq = 0
    seen: set[str] = set()
    result = tx.conn.execute(
        sa.select(audit_events)
        .order_by(audit_events.c.approval_id, audit_events.c.seq)
        .execution_options(yield_per=_STREAMED)
    )

    def close(aid: str | None) -> None:
        if aid is None:
            return
        head = heads.get(aid)
        if head is None:
            findings.append(Finding(aid, None, "events exist for an approval row that is gone"))
        elif head[0] != expected_seq or head[1] != prev:
            findings.append(
                Finding(
                    aid,
                    expected_seq + 1,
                    f"chain ends at {expected_seq} but the approval records "
                    f"{head[0]} events: events were deleted",
                )
            )

    for row in result:
        checked += 1
        if row.approval_id != current:
            close(current)
            current, prev, expected_seq = row.approval_id, GENESIS, 0
            seen.add(row.approval_id)
        expected_seq += 1
        if row.seq != expected_seq:
            findings.append(
                Finding(row.approval_id, expected_seq, f"event {expected_seq} is missing: deleted")
            )
            expected_seq = row.seq
        if row.prev_hash != prev:
            findings.append(Finding(row.approval_id, row.seq, "previous-hash link is broken"))
        h = chain_hash(
            row.prev_hash, row.approval_id, row.tenant, row.seq, row.at, row.event, row.actor, row.data
        )
        if h != row.hash:
            findings.append(Finding(row.approval_id, row.seq, "event content was edited"))
        prev = row.hash
    close(current)
    for aid, (count, _head, _tenant) in heads.items():
        if aid not in seen and count:
            findings.append(Finding(aid, 1, f"all {count} events were deleted"))
    return checked, findings


def _parsed(text: str) -> Any:
    # An edited row may no longer hold JSON; export it as found rather than stop.
    try:
        return json.loads(text)
    except ValueError:
        return {"unparseable": text}


@dataclass(frozen=True)
class AuditRow:
    """One stored link of an approval's audit chain, as read back (JSON text as stored)."""

    approval_id: str
    tenant: str
    seq: int
    at: float
    event: str
    actor: str
    data: str
    prev_hash: str
    hash: str

    def typed(self) -> AuditEventModel | UnknownEvent:
        """The stored data read through its kind's model (`contracts.audit_events`); data that
        is no JSON object (an edited row) as `UnknownEvent`, under `unparseable`."""
        return typed_event(self.event, self.data)

    @classmethod
    def from_row(cls, row: Any) -> AuditRow:
        """Build from a row of the audit_events table."""
        return cls(
            row.approval_id,
            row.tenant,
            row.seq,
            row.at,
            row.event,
            row.actor,
            row.data,
            row.prev_hash,
            row.hash,
        )


def typed_event(event: str, data: str) -> AuditEventModel | UnknownEvent:
    """An event's stored data (JSON text) read through its kind's model, as `AuditRow.typed`."""
    parsed = _parsed(data)
    if isinstance(parsed, dict):
        return parse_event(event, parsed)
    return UnknownEvent(kind=event, fields={"unparseable": parsed})


def _typed(row: AuditRow) -> Any:
    # The stored data read through its kind's model, dumped as stored; data that is no JSON
    # object, as found.
    parsed = _parsed(row.data)
    return event_data(parse_event(row.event, parsed)) if isinstance(parsed, dict) else parsed


def event_to_json(row: AuditRow) -> dict[str, Any]:
    """An audit row as exported (JSONL) and shown by the API."""
    return {
        "approvalId": row.approval_id,
        "tenant": row.tenant,
        "seq": row.seq,
        "at": row.at,
        "event": row.event,
        "actor": _parsed(row.actor),
        "data": _typed(row),
        "prevHash": row.prev_hash,
        "hash": row.hash,
    }


def event_to_cloudevent(row: AuditRow) -> AuditCloudEvent:
    """An audit row as a CloudEvent (`contracts.cloudevents`): the export's other format and
    what the audit sink sends."""
    data = _parsed(row.data)
    return cloudevent(
        approval_id=row.approval_id,
        tenant=row.tenant,
        seq=row.seq,
        at=row.at,
        event=row.event,
        actor=row.actor,
        data=data,
        prev_hash=row.prev_hash,
        hash=row.hash,
    )


def stream_since(tx: Work, since: float) -> Iterator[AuditRow]:
    """Every audit row at or after `since`, in time order, without loading them all (read
    inside the unit of work, run with `Database.run_read(..., snapshot=True)`)."""
    result = tx.conn.execute(
        sa.select(audit_events)
        .where(audit_events.c.at >= since)
        .order_by(audit_events.c.at, audit_events.c.id)
        .execution_options(yield_per=_STREAMED)
    )
    for row in result:
        yield AuditRow.from_row(row)


@dataclass(frozen=True)
class Requested:
    """A `requested` audit event, as policy replay reads it: which approval, whose, when, and
    its data (JSON text as stored)."""

    approval_id: str
    tenant: str
    at: float
    data: str


def stream_requests(tx: Work, since: float) -> Iterator[Requested]:
    """Every `requested` audit row at or after `since`, oldest first, without loading them all
    (as `stream_since`)."""
    result = tx.conn.execute(
        sa.select(audit_events.c.approval_id, audit_events.c.tenant, audit_events.c.at, audit_events.c.data)
        .where(audit_events.c.at >= since, audit_events.c.event == "requested")
        .order_by(audit_events.c.at, audit_events.c.id)
        .execution_options(yield_per=_STREAMED)
    )
    for row in result:
        yield Requested(row.approval_id, row.tenant, row.at, row.data)


def stream_events(tx: Work, since: float, events: Collection[str]) -> Iterator[AuditRow]:
    """Every audit row of the named events at or after `since`, oldest first, without loading
    them all (as `stream_since`): what `cosigner policy suggest` reads of each approval."""
    result = tx.conn.execute(
        sa.select(audit_events)
        .where(audit_events.c.at >= since, audit_events.c.event.in_(sorted(events)))
        .order_by(audit_events.c.at, audit_events.c.id)
        .execution_options(yield_per=_STREAMED)
    )
    for row in result:
        yield AuditRow.from_row(row)

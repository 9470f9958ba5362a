"""`cosigner audit export --format cloudevents`, read by the CloudEvents SDK, and the typed
audit events it is made from."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from cloudevents.core.bindings.http import HTTPMessage, from_structured
from cloudevents.core.formats.json import JSONFormat

from bot.cli import main
from contracts.audit_events import (
    KINDS,
    Counted,
    Requested,
    UnknownEvent,
    event_data,
    parse_event,
    parse_typed,
)
from contracts.cloudevents import MEDIA_TYPE, event_type
from contracts.enums import ApprovalStatus, AuditEvent
from storage.tables import audit_events
from tests.audit.chain import verify
from tests.test_cli import populate, sync_engine


@pytest.fixture
def db_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "c.db"
    monkeypatch.setenv("COSIGNER_DATABASE_URL", f"sqlite+aiosqlite:///{path}")
    monkeypatch.setenv("COSIGNER_SECRET", "cli-test-secret-" + "s" * 32)
    monkeypatch.delenv("COSIGNER_POLICY", raising=False)
    return path


def _lines(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    assert main(["audit", "export", *args]) == 0
    return capsys.readouterr().out.splitlines()


def test_export_as_cloudevents_is_read_by_the_sdk_and_verifies(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = populate(db_path)
    lines = _lines(capsys, "--format", "cloudevents")
    plain = [json.loads(x) for x in _lines(capsys)]
    assert len(lines) == len(plain) >= 4
    events = [json.loads(x) for x in lines]
    for line, mine, e in zip(lines, plain, events, strict=True):
        sdk = from_structured(HTTPMessage({"content-type": MEDIA_TYPE}, line.encode()), JSONFormat())
        assert sdk.get_specversion() == "1.0"
        assert sdk.get_id() == mine["hash"] and sdk.get_subject() == mine["approvalId"]
        assert sdk.get_source() == "/tenants/acme"
        assert sdk.get_type() == event_type(mine["event"])
        assert sdk.get_datacontenttype() == "application/json"
        when = sdk.get_time()
        assert when is not None and when.timestamp() == pytest.approx(mine["at"], abs=1e-6)
        assert sdk.get_extension("cosignerprevhash") == mine["prevHash"]
        assert e["data"] == mine["data"], "data is the typed event, as the audit stores it"
    types = [e["type"] for e in events]
    assert "dev.cosigner.approval.requested" in types and "dev.cosigner.approval.denied" in types
    assert {e["subject"] for e in events} == set(ids)
    assert "tok_secret_cli" not in "\n".join(lines), "parameters as the policy redacted them"
    assert verify(events) == len(events), "a receiver verifies the chain from the events alone"


def test_an_edited_event_fails_the_receivers_check(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = populate(db_path)
    with sync_engine(db_path).begin() as conn:
        conn.execute(
            audit_events.update()
            .where(sa.and_(audit_events.c.approval_id == ids[0], audit_events.c.seq == 1))
            .values(data=json.dumps({"toolName": "lookup_order", "parameters": {}}))
        )
    events = [json.loads(x) for x in _lines(capsys, "--format", "cloudevents")]
    with pytest.raises(AssertionError, match="content edited"):
        verify(events)


def test_an_unknown_kind_is_exported_whole(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = populate(db_path)
    with sync_engine(db_path).begin() as conn:
        conn.execute(
            audit_events.update()
            .where(sa.and_(audit_events.c.approval_id == ids[1], audit_events.c.seq == 1))
            .values(event="from_the_future", data=json.dumps({"a": [1, {"b": None}]}))
        )
    events = [json.loads(x) for x in _lines(capsys, "--format", "cloudevents")]
    (future,) = [e for e in events if e["cosignerevent"] == "from_the_future"]
    assert future["type"] == "dev.cosigner.approval.from.the.future"
    assert future["data"] == {"a": [1, {"b": None}]}


def test_a_bad_format_is_refused(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["audit", "export", "--format", "xml"])
    assert exit_.value.code == 2
    assert "cloudevents" in capsys.readouterr().err


# --- the typed events --------------------------------------------------------------------------


def test_every_stored_kind_has_a_model_and_a_type() -> None:
    stored = {e.value for e in AuditEvent} | {s.value for s in ApprovalStatus} - {"pending"}
    assert stored <= KINDS
    for kind in stored:
        model = parse_event(kind, {})
        assert not isinstance(model, UnknownEvent) or kind in {"requested", "approval_counted"}
        assert event_type(kind).startswith("dev.cosigner.approval.")
    assert event_type("approval_counted") == "dev.cosigner.approval.counted"
    assert event_type("call_edited") == "dev.cosigner.approval.edited"
    assert event_type("allowance_used") == "dev.cosigner.approval.allowance.used"


def test_data_read_and_dumped_is_the_data_stored() -> None:
    stored: dict[str, Any] = {"toolName": "t", "parameters": {"x": "[REDACTED]"}, "quorum": 2, "new": 1}
    event = parse_event("requested", stored)
    assert isinstance(event, Requested) and event.toolName == "t" and event.quorum == 2
    assert event_data(event) == stored, "no defaults filled in, extra fields kept"
    counted = parse_typed({"kind": "approval_counted", "count": 1, "quorum": 2})
    assert isinstance(counted, Counted) and counted.count == 1


def test_data_its_model_cannot_read_is_kept_whole() -> None:
    odd = {"count": "1", "quorum": 2}  # a string where a count is: not coerced, kept
    event = parse_event("approval_counted", odd)
    assert isinstance(event, UnknownEvent) and event_data(event) == odd
    holds_kind = {"kind": "x", "toolName": "t"}
    assert event_data(parse_event("requested", holds_kind)) == holds_kind

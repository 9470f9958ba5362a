"""The audit sink (COSIGNER_AUDIT_SINK_URL): each audit event POSTed to a real loopback HTTP
server as a structured-mode CloudEvent, read by the CloudEvents SDK, its Standard Webhooks
signature checked by the `standardwebhooks` library; a sink that is down, then up, across a
restart, gets every event, in order."""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from typing import Any

import pytest
import standardwebhooks
from cloudevents.core.bindings.http import HTTPMessage, from_structured
from cloudevents.core.formats.json import JSONFormat

from bot.cli.doctor import Context, diagnose
from bot.cli.doctor_checks import CHECKS
from bot.settings import SettingsError, load_settings, read_settings
from bot.workers import AuditSink, audit_sink_secret
from storage import ledger
from storage.audit import event_to_cloudevent
from storage.database import Database
from tests.audit.chain import verify
from tests.harness import TEST_SECRET, CallbackReceiver, Harness, ManualClock, cosigner_app, database, until
from tests.ops.test_doctor import context
from tests.processes import free_port

CALL = {
    "executionId": "run_1",
    "reason": "refund the order",
    "surface": {"type": "dashboard", "userId": "u_1"},
}


async def _ask(h: Harness, key: str, calls: Sequence[str], deny: int | None = None) -> list[str]:
    ids = []
    for call_id in calls:
        body = {**CALL, "toolCallId": call_id, "toolName": "issue_refund", "parameters": {"orderId": call_id}}
        r = await h.client.post("/v1/approvals", headers=h.auth(key), json=body)
        assert r.status_code in (200, 201), r.text
        ids.append(r.json()["approvalId"])
    if deny is not None:
        r = await h.client.post(
            f"/v1/approvals/{ids[deny]}/decision",
            headers=h.auth(h.approver_of(key)),
            json={"decision": "deny", "userId": "u_1", "comment": "no"},
        )
        assert r.status_code == 200, r.text
    return ids


def _sink(h: Harness) -> AuditSink:
    assert h.parts.sink is not None, "COSIGNER_AUDIT_SINK_URL is set"
    return h.parts.sink


async def _drain(sink: AuditSink) -> int:
    total = 0
    while sent := await sink.run_once():
        total += sent
    return total


async def _stored(db: Database, ids: Sequence[str]) -> list[dict[str, Any]]:
    events = []
    for aid in ids:
        rows = await db.run_read(partial(ledger.events_of, approval_id=aid))
        events += [event_to_cloudevent(r).model_dump(mode="json") for r in rows]
    return events


def _read(received: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each POST as the CloudEvents SDK reads it, its signature checked: the events' JSON."""
    webhook = standardwebhooks.Webhook(audit_sink_secret(TEST_SECRET))
    events = []
    for post in received:
        headers = {k.lower(): v for k, v in post["headers"].items()}
        assert headers["content-type"] == "application/cloudevents+json"
        webhook.verify(post["body"], headers)  # raises on a bad signature
        sdk = from_structured(HTTPMessage(headers, post["body"]), JSONFormat())
        assert sdk.get_specversion() == "1.0" and sdk.get_id() == post["delivery"]
        assert sdk.get_type().startswith("dev.cosigner.approval.")
        event = json.loads(post["body"])
        assert sdk.get_data() == event["data"] and sdk.get_subject() == event["subject"]
        events.append(event)
    return events


def _in_order(events: list[dict[str, Any]]) -> None:
    last: dict[str, int] = {}
    for e in events:
        assert e["cosignerseq"] == last.get(e["subject"], 0) + 1, (
            "each approval's events in order, none missing"
        )
        last[e["subject"]] = e["cosignerseq"]


async def test_each_event_reaches_the_sink_as_a_signed_cloudevent(db_kind: str) -> None:
    with CallbackReceiver() as receiver:
        async with cosigner_app(database_kind=db_kind, run_workers=False, audit_sink_url=receiver.url) as h:
            key = await h.create_tenant("acme")
            ids = await _ask(h, key, ["c1", "c2"], deny=0)
            sent = await _drain(_sink(h))
            stored = await _stored(h.parts.db, ids)
            metrics = (await h.client.get("/metrics")).text
    events = _read(receiver.snapshot())
    assert sent == len(events) == len(stored) >= 3
    _in_order(events)
    assert sorted(events, key=lambda e: (e["subject"], e["cosignerseq"])) == sorted(
        stored, key=lambda e: (e["subject"], e["cosignerseq"])
    ), "what the sink gets is what the export gives"
    assert verify(sorted(events, key=lambda e: (e["subject"], e["cosignerseq"]))) == len(events)
    types = {e["type"] for e in events}
    assert {"dev.cosigner.approval.requested", "dev.cosigner.approval.denied"} <= types
    assert all(e["source"] == "/tenants/acme" for e in events)
    assert "cosigner_audit_sink_backlog_events 0.0" in metrics
    assert 'cosigner_audit_sink_events_total{outcome="sent"}' in metrics


async def test_a_refused_event_is_retried_and_the_rest_wait_for_it(db_kind: str) -> None:
    clock = ManualClock()
    # The first event is accepted, the second refused: it and the rest wait for the retry.
    with CallbackReceiver([(200, {}), (503, {})]) as receiver:
        async with cosigner_app(
            database_kind=db_kind, run_workers=False, clock=clock, audit_sink_url=receiver.url
        ) as h:
            key = await h.create_tenant("acme")
            await _ask(h, key, ["c1"], deny=0)
            sink = _sink(h)
            assert await sink.run_once() == 1
            assert await sink.run_once() == 0, "not again before its backoff"
            clock.advance(1.0)
            assert await _drain(sink) >= 1
    posts = receiver.snapshot()
    events = _read(posts)
    assert events[1]["id"] == events[2]["id"], "the refused event was sent again, under the same id"
    _in_order([events[0], *events[2:]])


async def test_a_sink_down_then_up_across_a_restart_gets_everything_in_order(db_kind: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/sink"
    clock = ManualClock()
    async with database(db_kind) as first:
        where, schema = first.url, first.schema
        async with cosigner_app(
            db=first, run_workers=False, clock=clock, audit_sink_url=url, audit_sink_max_backlog=2
        ) as h:
            key = await h.create_tenant("acme")
            ids = await _ask(h, key, ["c1", "c2", "c3"], deny=1)
            assert await _sink(h).run_once() == 0, "nobody listens: nothing accepted"
            metrics = (await h.client.get("/metrics")).text
            expected = await _stored(h.parts.db, ids)
        assert "cosigner_audit_sink_over_bound 1.0" in metrics, "past the bound, and said so"
        assert f"cosigner_audit_sink_backlog_events {float(len(expected))}" in metrics
        # The server restarts on the same database; the sink is up now.
        again = Database(where, schema=schema)
        clock.advance(1.0)
        with CallbackReceiver(bind=("127.0.0.1", port)) as receiver:
            async with cosigner_app(db=again, run_workers=False, clock=clock, audit_sink_url=url) as h:
                assert await _drain(_sink(h)) == len(expected)
                metrics = (await h.client.get("/metrics")).text
    events = _read(receiver.snapshot())
    _in_order(events)
    by_link = sorted(events, key=lambda e: (e["subject"], e["cosignerseq"]))
    assert by_link == sorted(expected, key=lambda e: (e["subject"], e["cosignerseq"])), "nothing lost"
    assert "cosigner_audit_sink_backlog_events 0.0" in metrics
    assert "cosigner_audit_sink_over_bound 0.0" in metrics


def test_a_bad_sink_url_is_refused_naming_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COSIGNER_AUDIT_SINK_URL", "siem.example.com/events")
    with pytest.raises(SettingsError) as refused:
        load_settings()
    assert "COSIGNER_AUDIT_SINK_URL must be an absolute http:// or https:// URL" in str(refused.value)
    monkeypatch.setenv("COSIGNER_AUDIT_SINK_URL", "https://siem.example.com/events")
    monkeypatch.setenv("COSIGNER_AUDIT_SINK_MAX_BACKLOG", "0")
    with pytest.raises(SettingsError, match="COSIGNER_AUDIT_SINK_MAX_BACKLOG must be a whole number"):
        load_settings()


async def test_doctor_shows_the_backlog_and_fails_past_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"http://127.0.0.1:{free_port()}/sink"  # nobody listens
    async with database("sqlite") as db:
        where = db.url
        async with cosigner_app(db=db, run_workers=False, audit_sink_url=url) as h:
            key = await h.create_tenant("acme")
            ids = await _ask(h, key, ["c1", "c2"], deny=0)
            assert await _sink(h).run_once() == 0
            waiting = len(await _stored(h.parts.db, ids))

        async def check(**env: str) -> tuple[str, str]:
            context(monkeypatch, COSIGNER_DATABASE_URL=where)  # nothing else of Cosigner's set
            for name, value in env.items():
                monkeypatch.setenv(name, value)
            ctx = Context(read_settings())
            (found,) = await diagnose(ctx, {"audit-sink": CHECKS["audit-sink"]})
            return found.status.value, found.message

        assert (await check())[0] == "skip"
        status, said = await check(COSIGNER_AUDIT_SINK_URL=url)
        assert status == "warn" and f"{waiting} audit events on 2 approvals wait" in said
        status, said = await check(
            COSIGNER_AUDIT_SINK_URL=url, COSIGNER_AUDIT_SINK_MAX_BACKLOG=str(waiting - 1)
        )
        assert (
            status == "fail" and f"COSIGNER_AUDIT_SINK_MAX_BACKLOG ({waiting - 1})" in said and "stay" in said
        )


async def test_no_sink_without_the_setting() -> None:
    async with cosigner_app(run_workers=False) as h:
        assert h.parts.sink is None, "no sink, no worker"


async def test_the_running_server_sends_each_event_as_it_is_written() -> None:
    with CallbackReceiver() as receiver:
        async with cosigner_app(audit_sink_url=receiver.url) as h:  # the background workers run
            key = await h.create_tenant("acme")
            (approval,) = await _ask(h, key, ["c1"])
            await until(lambda: any(e["subject"] == approval for e in _read(receiver.snapshot())))
            await _ask(h, key, ["c2"], deny=None)
            r = await h.client.post(
                f"/v1/approvals/{approval}/decision",
                headers=h.auth(h.approver_of(key)),
                json={"decision": "approve", "userId": "u_1"},
            )
            assert r.status_code == 200, r.text
            await until(
                lambda: any(e["type"] == "dev.cosigner.approval.approved" for e in _read(receiver.snapshot()))
            )
            stored = await _stored(h.parts.db, [approval])
    sent = [e for e in _read(receiver.snapshot()) if e["subject"] == approval]
    _in_order(sent)
    assert sent[: len(stored)] == stored[: len(sent)], "in chain order, as stored"

"""Traces out: the spans of approvals, received by a real OTLP/HTTP receiver and decoded.

Each test builds its own tracer provider (the SDK's BatchSpanProcessor and OTLP/HTTP exporter,
pointed at a loopback receiver) and hands it to the app, then flushes it before looking.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from bot.observability.telemetry import tracer_provider
from tests.databases import DESK, NOT_STORED, postgres_elsewhere
from tests.harness import CallbackReceiver, Harness, cosigner_app, until
from tests.otlp import OtlpReceiver

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, NOT_STORED)

AGENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
AGENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{AGENT_TRACE}-{AGENT_SPAN}-01"
APP_TRACE = "0af7651916cd43dd8448eb211c80319c"
APP_SPAN = "b7ad6b7169203331"
CANARY = "canary-9f3e1d"
USER = "u_personal_7731"
INTERNAL, CLIENT = 1, 3  # OTLP span kinds
ERROR = 2  # OTLP status code


def request(**changes: Any) -> dict[str, Any]:
    body = {
        "executionId": "run_81",
        "toolCallId": "call_7",
        "toolName": "issue_refund",
        "parameters": {"orderId": "ord_4421", "amountCents": 12900, "note": CANARY},
        "reason": f"the customer said {CANARY}",
        "surface": {"type": "dashboard", "userId": USER},
        "timeoutSeconds": 300,
    }
    return {**body, **changes}


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as rx:
        yield rx


@pytest.fixture
def provider(receiver: OtlpReceiver) -> Iterator[TracerProvider]:
    p = tracer_provider(BatchSpanProcessor(OTLPSpanExporter(endpoint=receiver.traces_url)))
    yield p
    p.shutdown()


@pytest.fixture
async def traced(db_kind: str, provider: TracerProvider) -> AsyncIterator[tuple[Harness, str]]:
    async with cosigner_app(database_kind=db_kind, tracer_provider=provider, callback_allow="127.0.0.1") as h:
        yield h, await h.create_tenant("acme")


async def create(h: Harness, key: str, headers: dict[str, str] | None = None, **changes: Any) -> str:
    r = await h.client.post(
        "/v1/approvals", json=request(**changes), headers={**h.auth(key), **(headers or {})}
    )
    assert r.status_code == 201, r.text
    return str(r.json()["approvalId"])


async def decide(h: Harness, key: str, approval_id: str, decision: str, **headers: str) -> dict[str, Any]:
    r = await h.client.post(
        f"/v1/approvals/{approval_id}/decision",
        json={"decision": decision, "userId": USER, "comment": f"ok {CANARY}"},
        headers={**h.auth(h.approver_of(key)), **headers},
    )
    return dict(r.json())


async def test_an_approval_is_one_span_under_the_agents_span_from_request_to_close(
    traced: Any, provider: TracerProvider, receiver: OtlpReceiver
) -> None:
    h, key = traced
    approval_id = await create(h, key, {"traceparent": TRACEPARENT, "tracestate": "vendor=abc"})
    h.advance(42)
    body = await decide(h, key, approval_id, "approve", traceparent=f"00-{APP_TRACE}-{APP_SPAN}-01")
    assert body["status"] == "approved" and body["traceId"] == AGENT_TRACE
    provider.force_flush()

    approval = receiver.one("cosigner.approval")
    assert (approval.trace_id, approval.parent_span_id) == (AGENT_TRACE, AGENT_SPAN)
    assert approval.kind == INTERNAL and approval.service == "cosigner"
    assert approval.end - approval.start == 42_000_000_000, "from the request to the decision"
    rec = await h.engine.record(approval_id)
    assert approval.start == int(rec.created_at * 1_000_000_000)
    assert approval.attributes == {
        "cosigner.approval.id": approval_id,
        "cosigner.tenant": "acme",
        "cosigner.execution.id": "run_81",
        "gen_ai.tool.name": "issue_refund",
        "gen_ai.tool.call.id": "call_7",
        "cosigner.tool.kind": "danger",
        "cosigner.mode": "ask_always",
        "cosigner.surface": "dashboard",
        "cosigner.route.surface": "dashboard",
        "cosigner.status": "approved",
        "cosigner.decided_by.kind": "person",
        "cosigner.policy.rule": rec.policy_rule,
    }
    answer = receiver.one("cosigner.answer")
    assert (answer.trace_id, answer.parent_span_id) == (AGENT_TRACE, approval.span_id)
    assert answer.links == [(APP_TRACE, APP_SPAN)], "the dashboard app's own trace is linked"
    assert answer.attributes["cosigner.answer.accepted"] is True
    assert answer.attributes["cosigner.answer.wanted"] == "approved"

    audit = (await h.client.get(f"/v1/approvals/{approval_id}/audit", headers=h.auth(key))).json()
    assert audit["events"][0]["event"] == "requested"
    assert audit["events"][0]["data"]["traceId"] == AGENT_TRACE


async def test_a_deny_and_its_callback_attempts_are_children_of_the_approval(
    traced: Any, provider: TracerProvider, receiver: OtlpReceiver
) -> None:
    h, key = traced
    with CallbackReceiver(answers=[(503, {})]) as cb:
        approval_id = await create(
            h, key, {"traceparent": TRACEPARENT}, callbackUrl=f"{cb.url}?token={CANARY}"
        )
        body = await decide(h, key, approval_id, "deny")
        assert body["status"] == "denied"
        await h.advance_until(lambda: len(cb.snapshot()) >= 2)

        def attempts() -> Any:
            provider.force_flush()
            return len(receiver.named("cosigner.callback")) >= 2 and receiver.named("cosigner.callback")

        first, second = (await until(attempts))[:2]
    approval = receiver.one("cosigner.approval")
    assert approval.attributes["cosigner.status"] == "denied"
    assert receiver.one("cosigner.answer").attributes["cosigner.answer.wanted"] == "denied"
    for span in (first, second):
        assert (span.trace_id, span.parent_span_id, span.kind) == (AGENT_TRACE, approval.span_id, CLIENT)
        assert span.attributes["http.request.method"] == "POST"
    assert first.attributes["http.response.status_code"] == 503
    assert first.attributes["error.type"] == "503" and first.status == ERROR
    assert second.attributes["http.response.status_code"] == 200 and "error.type" not in second.attributes
    assert CANARY.encode() not in receiver.everything(), "not the URL's token, nor anything else"


async def test_expiry_closes_the_span_at_the_deadline(
    traced: Any, provider: TracerProvider, receiver: OtlpReceiver
) -> None:
    h, key = traced
    approval_id = await create(h, key, timeoutSeconds=60)
    h.advance(61)
    body = await h.client.get(f"/v1/approvals/{approval_id}?wait=5", headers=h.auth(key))
    assert body.json()["status"] == "expired"
    provider.force_flush()
    approval = receiver.one("cosigner.approval")
    assert approval.parent_span_id == "", "no traceparent came in: the approval starts a trace"
    assert approval.trace_id == body.json()["traceId"]
    assert approval.attributes["cosigner.status"] == "expired"
    assert approval.attributes["cosigner.decided_by.kind"] == "timeout"
    assert [name for name, _ in approval.events] == ["cosigner.expired"]
    assert approval.end - approval.start >= 60_000_000_000
    assert receiver.named("cosigner.answer") == []


async def test_a_late_answer_is_a_refused_answer_span(
    traced: Any, provider: TracerProvider, receiver: OtlpReceiver
) -> None:
    h, key = traced
    approval_id = await create(h, key, {"traceparent": TRACEPARENT}, timeoutSeconds=60)
    h.clock.advance(61)  # the answer comes after the deadline, before or after the sweep
    body = await decide(h, key, approval_id, "approve")
    assert body["error"]["code"] == "APPROVAL_EXPIRED"
    provider.force_flush()
    approval = receiver.one("cosigner.approval")
    answer = receiver.one("cosigner.answer")
    assert approval.attributes["cosigner.status"] == "expired"
    assert answer.parent_span_id == approval.span_id
    assert answer.attributes["cosigner.answer.accepted"] is False
    assert answer.attributes["error.type"] == "APPROVAL_EXPIRED"


async def test_no_parameter_reason_comment_or_user_reaches_a_span(
    traced: Any, provider: TracerProvider, receiver: OtlpReceiver
) -> None:
    h, key = traced
    for n, decision in enumerate(["approve", "deny"]):
        approval_id = await create(h, key, {"traceparent": TRACEPARENT}, toolCallId=f"call_{n}")
        await decide(h, key, approval_id, decision)
        await decide(h, key, approval_id, decision)  # refused: already decided
    provider.force_flush()
    assert len(receiver.named("cosigner.approval")) == 2 and len(receiver.named("cosigner.answer")) == 4
    sent = receiver.everything()
    for secret in (CANARY, USER, "ord_4421", "12900"):
        assert secret.encode() not in sent, secret


async def test_a_malformed_traceparent_is_ignored(
    traced: Any, provider: TracerProvider, receiver: OtlpReceiver
) -> None:
    h, key = traced
    bad = [
        "garbage",
        f"00-{'0' * 32}-{AGENT_SPAN}-01",  # all-zero trace id
        f"00-{AGENT_TRACE}-{'0' * 16}-01",  # all-zero span id
        f"ff-{AGENT_TRACE}-{AGENT_SPAN}-01",  # version ff is invalid
        f"00-{AGENT_TRACE.upper()}-{AGENT_SPAN}-01",  # upper case is not W3C
    ]
    for n, header in enumerate(bad):
        approval_id = await create(h, key, {"traceparent": header, "tracestate": "=="}, toolCallId=f"c{n}")
        assert (await decide(h, key, approval_id, "approve"))["status"] == "approved"
    provider.force_flush()
    spans = receiver.named("cosigner.approval")
    assert len(spans) == len(bad)
    assert all(s.parent_span_id == "" and s.trace_id != AGENT_TRACE for s in spans)


async def test_admission_is_a_span_under_the_agents_span(
    traced: Any, provider: TracerProvider, receiver: OtlpReceiver
) -> None:
    h, key = traced
    body = {"executionId": "run_9", "surface": {"type": "schedule"}, "tools": ["issue_refund"]}
    r = await h.client.post("/v1/runs/admit", json=body, headers={**h.auth(key), "traceparent": TRACEPARENT})
    assert r.status_code == 200
    refused = await h.client.post(
        "/v1/runs/admit",
        json={**body, "surface": {"type": "api"}},
        headers={**h.auth(await h.create_tenant("globex")), "traceparent": TRACEPARENT},
    )
    assert refused.status_code == 422
    provider.force_flush()
    ok, no = receiver.named("cosigner.admit")
    assert (ok.trace_id, ok.parent_span_id) == (AGENT_TRACE, AGENT_SPAN)
    assert ok.attributes == {"cosigner.execution.id": "run_9"}
    assert no.attributes["error.type"] == "APPROVAL_MODE_UNSUPPORTED" and no.status == ERROR


async def test_an_unsampled_traceparent_is_honoured(
    traced: Any, provider: TracerProvider, receiver: OtlpReceiver
) -> None:
    h, key = traced
    approval_id = await create(h, key, {"traceparent": f"00-{AGENT_TRACE}-{AGENT_SPAN}-00"})
    body = await decide(h, key, approval_id, "approve")
    assert body["status"] == "approved" and body["traceId"] == AGENT_TRACE, "the ids are still recorded"
    provider.force_flush()
    assert receiver.spans == [], "the agent chose not to sample this trace"

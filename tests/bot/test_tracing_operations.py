"""Traces of operations and handoffs: the calls to the application are client spans.

The example applications (examples/contract_app.py, examples/expect_app.py) are served on
loopback as in tests/operations and tests/handoff; spans go to a real OTLP/HTTP receiver.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from bot.observability.telemetry import tracer_provider
from tests.bot.test_tracing import AGENT_SPAN, AGENT_TRACE, CANARY, CLIENT, ERROR, TRACEPARENT
from tests.databases import NOT_STORED, OPERATIONS, postgres_elsewhere
from tests.handoff_world import EXPECT_SECRET, LOOPBACK, expect_server, handoff_policy, handoff_request
from tests.handoff_world import SECRET_ENV as EXPECT_ENV
from tests.harness import Harness, ManualClock, cosigner_app, until
from tests.operations.application import OPERATION, SECRET, SECRET_ENV, contract_application, policy_for
from tests.otlp import OtlpReceiver

# On PostgreSQL, the storage path of the tests marked runs in the tests these name.
POSTGRES_ELSEWHERE = postgres_elsewhere(OPERATIONS, NOT_STORED)

USER = {"type": "dashboard", "userId": "u_1"}


@pytest.fixture(autouse=True)
def secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    monkeypatch.setenv(EXPECT_ENV, EXPECT_SECRET)


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as rx:
        yield rx


@pytest.fixture
def provider(receiver: OtlpReceiver) -> Iterator[TracerProvider]:
    p = tracer_provider(BatchSpanProcessor(OTLPSpanExporter(endpoint=receiver.traces_url)))
    yield p
    p.shutdown()


def proposal(order: str = "ord_4421") -> dict[str, Any]:
    return {
        "executionId": "run_1",
        "toolCallId": "c1",
        "operation": OPERATION,
        "request": {"orderId": order, "note": CANARY},
        "reason": f"the customer said {CANARY}",
        "surface": USER,
    }


async def post(h: Harness, key: str, path: str, body: dict[str, Any]) -> Any:
    return await h.client.post(path, json=body, headers={**h.auth(key), "traceparent": TRACEPARENT})


def spans(receiver: OtlpReceiver, provider: TracerProvider, name: str) -> Any:
    provider.force_flush()
    return receiver.named(name)


@POSTGRES_ELSEWHERE
async def test_an_approved_operation_is_prepared_then_executed_under_its_approval(
    db_kind: str, provider: TracerProvider, receiver: OtlpReceiver
) -> None:
    with contract_application() as app:
        policy = policy_for(app.url)
        async with cosigner_app(
            policy, database_kind=db_kind, tracer_provider=provider, callback_allow=LOOPBACK
        ) as h:
            key = await h.create_tenant("acme")
            r = await post(h, key, "/v1/approvals", proposal())
            assert r.status_code == 201, r.text
            aid = r.json()["approvalId"]
            r = await h.client.post(
                f"/v1/approvals/{aid}/decision",
                json={"decision": "approve", "userId": "u_1"},
                headers=h.auth(h.approver_of(key)),
            )
            assert r.status_code == 200, r.text
            (execute,) = await until(lambda: spans(receiver, provider, "cosigner.execute"))
            assert app.shop.calls == {"prepare": 1, "execute": 1, "status": 0}
    approval = receiver.one("cosigner.approval")
    prepare = receiver.one("cosigner.prepare")
    # The approval span does not exist yet when the application prepares: the request's span is its parent.
    assert (prepare.trace_id, prepare.parent_span_id, prepare.kind) == (AGENT_TRACE, AGENT_SPAN, CLIENT)
    assert approval.parent_span_id == AGENT_SPAN, "a sibling of the approval span"
    assert prepare.attributes == {
        "cosigner.approval.id": aid,
        "cosigner.operation": OPERATION,
        "http.request.method": "POST",
        "http.response.status_code": 200,
    }
    assert (execute.trace_id, execute.parent_span_id, execute.kind) == (AGENT_TRACE, approval.span_id, CLIENT)
    assert execute.attributes == {
        "cosigner.approval.id": aid,
        "cosigner.operation": OPERATION,
        "http.request.method": "POST",
        "http.response.status_code": 200,
        "cosigner.operation.outcome": "succeeded",
    }
    everything = receiver.everything()
    for secret in (CANARY, "ord_4421", "Dana Reyes", "$129.00", "12900", SECRET, app.url):
        assert secret.encode() not in everything, secret


@POSTGRES_ELSEWHERE
async def test_a_reconciled_operation_asks_status_under_its_approval(
    db_kind: str, provider: TracerProvider, receiver: OtlpReceiver
) -> None:
    with contract_application() as app:
        app.shop.reconcile = 1
        policy = policy_for(app.url)
        async with cosigner_app(
            policy, database_kind=db_kind, tracer_provider=provider, callback_allow=LOOPBACK
        ) as h:
            key = await h.create_tenant("acme")
            aid = (await post(h, key, "/v1/approvals", proposal())).json()["approvalId"]
            await h.client.post(
                f"/v1/approvals/{aid}/decision",
                json={"decision": "approve", "userId": "u_1"},
                headers=h.auth(h.approver_of(key)),
            )
            await h.advance_until(lambda: len(spans(receiver, provider, "cosigner.status")) >= 2)
    approval = receiver.one("cosigner.approval")
    execute = receiver.one("cosigner.execute")
    assert execute.attributes["cosigner.operation.outcome"] == "needs_reconciliation"
    asked = receiver.named("cosigner.status")
    assert all(s.parent_span_id == approval.span_id and s.kind == CLIENT for s in asked)
    assert [s.attributes["cosigner.operation.outcome"] for s in asked[:2]] == ["in_progress", "succeeded"]


async def test_a_lost_execute_is_an_error_span_then_status_and_execute_again(
    db_kind: str, provider: TracerProvider, receiver: OtlpReceiver
) -> None:
    with contract_application() as app:
        app.shop.lose_next_execute = True
        policy = policy_for(app.url)
        async with cosigner_app(
            policy, database_kind=db_kind, tracer_provider=provider, callback_allow=LOOPBACK
        ) as h:
            key = await h.create_tenant("acme")
            aid = (await post(h, key, "/v1/approvals", proposal())).json()["approvalId"]
            await h.client.post(
                f"/v1/approvals/{aid}/decision",
                json={"decision": "approve", "userId": "u_1"},
                headers=h.auth(h.approver_of(key)),
            )
            await h.advance_until(lambda: len(spans(receiver, provider, "cosigner.execute")) >= 2)
    approval = receiver.one("cosigner.approval")
    lost, again = receiver.named("cosigner.execute")[:2]
    assert lost.attributes["error.type"] == "OPERATION_UNAVAILABLE" and lost.status == ERROR
    assert lost.attributes["http.response.status_code"] == 503
    assert "cosigner.operation.outcome" not in lost.attributes
    asked = receiver.one("cosigner.status")
    assert asked.attributes["cosigner.operation.outcome"] == "not_started"
    assert again.attributes["cosigner.operation.outcome"] == "succeeded"
    assert {s.parent_span_id for s in (lost, asked, again)} == {approval.span_id}


@POSTGRES_ELSEWHERE
async def test_a_refused_prepare_is_an_error_span_without_the_applications_words(
    db_kind: str, provider: TracerProvider, receiver: OtlpReceiver
) -> None:
    with contract_application() as app:
        policy = policy_for(app.url)
        async with cosigner_app(
            policy, database_kind=db_kind, tracer_provider=provider, callback_allow=LOOPBACK
        ) as h:
            key = await h.create_tenant("acme")
            r = await post(h, key, "/v1/approvals", proposal(order=f"ord_{CANARY}"))
            assert r.status_code == 422 and CANARY in r.text, "the application's message names the order"
            (prepare,) = await until(lambda: spans(receiver, provider, "cosigner.prepare"))
    assert prepare.parent_span_id == AGENT_SPAN and prepare.status == ERROR
    assert prepare.attributes["error.type"] == "OPERATION_REJECTED"
    assert prepare.attributes["http.response.status_code"] == 422
    assert receiver.named("cosigner.approval") == []
    assert CANARY.encode() not in receiver.everything()


@POSTGRES_ELSEWHERE
@pytest.mark.parametrize("published", [True, False])
async def test_a_handoffs_expect_check_is_a_client_span_under_its_approval(
    db_kind: str, provider: TracerProvider, receiver: OtlpReceiver, published: bool
) -> None:
    clock = ManualClock()
    async with expect_server(clock) as (shop, url):
        policy = handoff_policy(url, '[tenants.acme]\nadmins = { dashboard = ["u_admin"] }')
        async with cosigner_app(
            policy, clock=clock, database_kind=db_kind, tracer_provider=provider, callback_allow=LOOPBACK
        ) as h:
            key = await h.create_tenant("acme")
            body = handoff_request(USER, reason=f"publish {CANARY}")
            r = await post(h, key, "/v1/approvals", body)
            assert r.status_code == 201, r.text
            aid = r.json()["approvalId"]
            if published:
                shop.publish("chg_1")
            r = await h.client.post(
                f"/v1/approvals/{aid}/decision",
                json={"decision": "done", "userId": "u_1"},
                headers=h.auth(h.approver_of(key)),
            )
            assert r.json()["status"] == ("completed" if published else "failed"), r.text
            (expect,) = await until(lambda: spans(receiver, provider, "cosigner.expect"))
            await until(lambda: spans(receiver, provider, "cosigner.approval"))
    approval = receiver.one("cosigner.approval")
    assert (expect.trace_id, expect.parent_span_id, expect.kind) == (AGENT_TRACE, approval.span_id, CLIENT)
    wanted: dict[str, Any] = {
        "cosigner.approval.id": aid,
        "http.request.method": "POST",
        "http.response.status_code": 200,
        "cosigner.handoff.result": "completed" if published else "failed",
    }
    if not published:
        wanted["error.type"] = "HANDOFF_FAILED"
        assert expect.status == ERROR
    assert expect.attributes == wanted
    everything = receiver.everything()
    for secret in (CANARY, "482910", "chg_1", url):
        assert secret.encode() not in everything, secret

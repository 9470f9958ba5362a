"""The SDK sends the caller's trace context by itself when OpenTelemetry is installed, and
works the same without it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from bot.observability.telemetry import tracer_provider
from cosigner import AsyncCosigner, Cosigner, DashboardSurface
from tests.loopback import LiveServer, loopback_server
from tests.otlp import OtlpReceiver

USER = "u_1"


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as rx:
        yield rx


@pytest.fixture(scope="module")
def server_provider(receiver: OtlpReceiver) -> Iterator[TracerProvider]:
    provider = tracer_provider(BatchSpanProcessor(OTLPSpanExporter(endpoint=receiver.traces_url)))
    yield provider
    provider.shutdown()


@pytest.fixture(scope="module")
def live(server_provider: TracerProvider) -> Iterator[LiveServer]:
    with loopback_server(tracer_provider=server_provider) as server:
        yield server


@pytest.fixture(scope="module")
def agent_tracer() -> trace.Tracer:
    """The agent's own tracer: an SDK provider of its own, exporting nowhere."""
    return TracerProvider(shutdown_on_exit=False).get_tracer("agent")


def ask(client: Cosigner, call_id: str) -> str:
    decision = client.request_approval(
        execution_id="run_sdk",
        tool_call_id=call_id,
        tool_name="issue_refund",
        parameters={"orderId": "o1", "amountCents": 9000},
        surface=DashboardSurface(user_id=USER),
        wait=False,
    )
    return decision.approval_id


def test_the_blocking_client_puts_the_approval_under_the_current_span(
    live: LiveServer, server_provider: TracerProvider, receiver: OtlpReceiver, agent_tracer: trace.Tracer
) -> None:
    key = live.call(live.harness.create_tenant("acme"))
    with Cosigner(url=live.url, api_key=key) as client:
        with agent_tracer.start_as_current_span("agent.tool_call") as span:
            approval_id = ask(client, "call_sync")
            with Cosigner(url=live.url, api_key=live.harness.approver_of(key)) as dashboard:
                dashboard.decide(approval_id, decision="approve", user_id=USER)
        outside = ask(client, "call_outside")
    here = span.get_span_context()
    rec = live.call(live.harness.engine.record(approval_id))
    assert rec.trace_id == trace.format_trace_id(here.trace_id)
    alone = live.call(live.harness.engine.record(outside))
    assert alone.trace_context is not None and rec.trace_context is not None
    assert rec.trace_context.parent is not None
    assert alone.trace_id != rec.trace_id and alone.trace_context.parent is None, "no span: a new trace"
    server_provider.force_flush()
    (approval,) = [
        s for s in receiver.named("cosigner.approval") if s.attributes["cosigner.approval.id"] == approval_id
    ]
    assert approval.parent_span_id == trace.format_span_id(here.span_id)


async def test_the_async_client_sends_it_too(
    live: LiveServer, server_provider: TracerProvider, receiver: OtlpReceiver, agent_tracer: trace.Tracer
) -> None:
    key = live.call(live.harness.create_tenant("globex_async"))
    async with AsyncCosigner(url=live.url, api_key=key) as client:
        with agent_tracer.start_as_current_span("agent.admit") as span:
            await client.admit(
                execution_id="run_async", surface=DashboardSurface(user_id=USER), tools=["lookup_order"]
            )
    server_provider.force_flush()
    admitted = [
        s for s in receiver.named("cosigner.admit") if s.attributes["cosigner.execution.id"] == "run_async"
    ]
    assert [s.parent_span_id for s in admitted] == [trace.format_span_id(span.get_span_context().span_id)]


def test_the_sdk_needs_no_opentelemetry() -> None:
    program = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from cosigner import _http\n"
        "assert _http._PROPAGATOR is None\n"
        "assert _http.request_headers(b'{}') == {'Content-Type': 'application/json'}\n"
        "assert _http.request_headers(None) is None\n"
        "import cosigner; print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr

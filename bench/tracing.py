"""The CPU cost of tracing per approval, apart from the network and the database.

    .venv/bin/python bench/tracing.py [--approvals 20000] [--endpoint http://127.0.0.1:4318]

Runs the hooks one approval goes through (the request's `traceparent` made current, the
span ids chosen and stored, a person's answer, the close) in a loop, three ways: tracing
off (the no-op path every server without OTEL_EXPORTER_OTLP_ENDPOINT takes), tracing off
with no `traceparent` at all, and tracing on with the SDK's BatchSpanProcessor and OTLP/HTTP
exporter posting to `--endpoint` (without one, to a receiver this script starts on
loopback). CPU is this process's, every thread included (the exporter's too), so it is the
cost a server core pays; compare it with the ~2.7 ms of server CPU one round trip costs
(docs/performance.md).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from bot.observability.telemetry import tracer_provider
from bot.observability.tracing import Answered, Tracing
from contracts.answers import PersonDecider
from contracts.enums import ApprovalMode, ApprovalStatus, SurfaceType, ToolKind
from contracts.ports import DashboardRoute
from contracts.wire import DashboardSurface
from storage.records import Record
from tests.otlp import OtlpReceiver

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
DECIDER = PersonDecider(surface=SurfaceType.DASHBOARD, userId="u_1")


def record() -> Record:
    now = time.time()
    return Record(
        id="apv_" + "a" * 20,
        tenant="acme",
        execution_id="run_1",
        tool_call_id="call_1",
        tool_name="issue_refund",
        kind=ToolKind.DANGER,
        mode=ApprovalMode.ASK_ALWAYS,
        status=ApprovalStatus.APPROVED,
        parameters={},
        digest="sha256:" + "0" * 64,
        reason=None,
        surface=DashboardSurface(type="dashboard", userId="u_1"),
        route=DashboardRoute(surface=SurfaceType.DASHBOARD, approvers=("u_1",)),
        delivered=None,
        short_code="0000",
        policy_rule="tools.issue_refund: danger → ask_always",
        callback_url=None,
        created_at=now,
        expires_at=now + 300,
        decided_at=now + 1,
        decided_by=DECIDER,
        comment=None,
        audit_seq=2,
        audit_head="0" * 64,
    )


def baseline(n: int) -> float:
    """CPU microseconds per iteration of the same loop without the hooks (subtracted)."""
    base = record()
    start = time.process_time()
    for _ in range(n):
        dataclasses.replace(base, trace_id=None, trace_context=None)
    return (time.process_time() - start) / n * 1e6


def per_approval(tracing: Tracing, headers: dict[str, str], n: int) -> float:
    """CPU microseconds per approval for the hooks of one approval's life."""
    base = record()
    start = time.process_time()
    for i in range(n):
        if tracing.provider is not None and i % 500 == 0:
            tracing.provider.force_flush()  # keep the SDK's queue from dropping spans
        with tracing.incoming(headers):
            chosen = tracing.begin()
            started = tracing.clock()
            rec = dataclasses.replace(base, trace_id=chosen.trace_id, trace_context=chosen.context)
            if tracing.enabled:  # as the engine does
                tracing.after_close(rec, Answered(DECIDER, ApprovalStatus.APPROVED, None, True), started)
    if tracing.provider is not None:
        tracing.provider.force_flush()
    return (time.process_time() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--approvals", type=int, default=20000)
    parser.add_argument("--endpoint", help="an OTLP/HTTP base URL; default: a receiver started here")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        endpoint = args.endpoint or stack.enter_context(OtlpReceiver()).base_url
        provider = tracer_provider(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")))
        rows = [
            ("off, no traceparent", Tracing(), {}),
            ("off, with traceparent", Tracing(), {"traceparent": TRACEPARENT}),
            ("on, with traceparent", Tracing(provider), {"traceparent": TRACEPARENT}),
            ("on, no traceparent", Tracing(provider), {}),
        ]
        loop = baseline(args.approvals)
        print(f"{'tracing':<24} {'CPU µs per approval':>20}")
        for name, tracing, headers in rows:
            per_approval(tracing, headers, min(args.approvals, 2000))  # warm up
            cost = per_approval(tracing, headers, args.approvals) - loop
            print(f"{name:<24} {cost:>20.1f}", flush=True)
        provider.shutdown()


if __name__ == "__main__":
    main()

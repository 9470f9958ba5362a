"""Reports queued with `report_result(wait=False)`: sent once, off the caller's path, never lost silently."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from cosigner import AsyncCosigner, Cosigner
from cosigner._outbox import AT_ONCE_MAX
from cosigner.adapters.verdict import Approver, ToolCall, Verdict
from cosigner.decision import Decision, parse_approval
from tests.sdk.conftest import SURFACE, Target, results_of
from tests.sdk.scripted import CLOSE, DECISION, SILENT, Threaded, ok

ROOT = Path(__file__).resolve().parents[2]
APPROVAL = "apv_" + "a" * 20
RECORDED = {"approvalId": APPROVAL, "recorded": True}


class Reports(httpx.MockTransport):
    """Answers `/result` reports (after `release` is set) and keeps their bodies."""

    def __init__(self, answer: httpx.Response | Exception | None = None) -> None:
        super().__init__(self.answer)
        self.bodies: list[dict[str, object]] = []
        self.traceparents: list[str | None] = []
        self.release = threading.Event()
        self.release.set()
        self.reply = answer

    def answer(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == f"/v1/approvals/{APPROVAL}/result"
        self.bodies.append(json.loads(request.content))
        self.traceparents.append(request.headers.get("traceparent"))
        assert self.release.wait(30)
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply or httpx.Response(200, json=RECORDED)


def test_a_queued_report_is_sent_once_after_the_caller_went_on() -> None:
    reports = Reports()
    reports.release.clear()  # Cosigner has not answered yet
    with Cosigner("http://cosigner.invalid", "k", transport=reports) as client:
        client.report_result(APPROVAL, result={"total": 12900}, wait=False)
        assert not client.flush_reports(timeout=0)  # still on its way, and the caller went on
        reports.release.set()
        assert client.flush_reports(timeout=30)
    assert reports.bodies == [{"outcome": "succeeded", "result": {"total": 12900}}]


def test_the_result_sent_is_the_one_at_the_time_it_was_queued() -> None:
    reports = Reports()
    reports.release.clear()
    result = {"items": ["a"]}
    with Cosigner("http://cosigner.invalid", "k", transport=reports) as client:
        client.report_result(APPROVAL, result=result, wait=False)
        result["items"].append("changed later")
        reports.release.set()
    assert reports.bodies == [{"outcome": "succeeded", "result": {"items": ["a"]}}]


def test_a_queued_report_carries_the_trace_it_was_queued_in() -> None:
    reports = Reports()
    tracer = TracerProvider(shutdown_on_exit=False).get_tracer("agent")
    with Cosigner("http://cosigner.invalid", "k", transport=reports) as client:
        with tracer.start_as_current_span("agent.tool_call") as span:
            client.report_result(APPROVAL, result="ok", wait=False)
    (traceparent,) = reports.traceparents
    assert traceparent is not None and trace.format_trace_id(span.get_span_context().trace_id) in traceparent


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(409, json={"error": {"code": "APPROVAL_PENDING", "message": "nobody decided"}}),
        httpx.ReadError("connection reset after the report was sent"),
    ],
    ids=["refused", "answer lost"],
)
def test_a_report_that_cannot_be_sent_is_logged_and_not_sent_twice(
    answer: httpx.Response | Exception, caplog: pytest.LogCaptureFixture
) -> None:
    reports = Reports(answer)
    with caplog.at_level(logging.WARNING, "cosigner"):
        with Cosigner("http://cosigner.invalid", "k", transport=reports) as client:
            client.report_result(APPROVAL, error="ValueError: boom", wait=False)
            assert client.flush_reports(timeout=30)
    # A report that may have arrived is not repeated: the audit record gets it at most once.
    assert len(reports.bodies) == 1
    assert f"could not report the result of approval {APPROVAL}" in caplog.text


def test_a_closed_client_refuses_to_queue_and_an_adapter_logs_it(caplog: pytest.LogCaptureFixture) -> None:
    client = Cosigner("http://cosigner.invalid", "k", transport=Reports())
    client.close()
    with pytest.raises(RuntimeError, match="closed"):
        client.report_result(APPROVAL, result=1, wait=False)
    verdict = _decided()
    with caplog.at_level(logging.WARNING, "cosigner"):
        Approver(client, SURFACE).report(verdict, {"result": 1}, wait=False)
    assert "could not report the result" in caplog.text


def _decided() -> Verdict:
    decision = parse_approval(
        json.dumps(
            {
                "type": "approval_decided",
                "approvalId": APPROVAL,
                "executionId": "run_1",
                "toolCallId": "call_1",
                "toolName": "lookup_order",
                "status": "approved",
                "decidedBy": {"kind": "policy", "rule": "tools.lookup_order"},
                "decidedAt": "2026-01-01T00:00:00.000Z",
                "comment": None,
                "grant": "g",
                "parametersDigest": "sha256:" + "0" * 64,
            }
        )
    )
    return Verdict(ToolCall("run_1", "call_1", "lookup_order", {}), decision)


def run_to_its_end(script: str, *args: str) -> None:
    """Run `script` in a new Python process that ends on its own, without closing its client."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


SCRIPT = """
import asyncio, sys
from cosigner import AsyncCosigner, Cosigner

url, key, approval, kind = sys.argv[1:]
if kind == "blocking":
    client = Cosigner(url, key)
    client.report_result(approval, result="sent at exit", wait=False)
else:
    async def main() -> None:
        client = AsyncCosigner(url, key)
        await client.report_result(approval, result="sent at exit", wait=False)

    asyncio.run(main())  # the loop ends at once, and the client is never closed
"""


def _read_approved(client: Cosigner, run_id: str) -> Decision:
    """A read the policy approves at once, for a report to be made on."""
    return client.request_approval(
        execution_id=run_id,
        tool_call_id="call_1",
        tool_name="lookup_order",
        parameters={"order_id": "ord_9"},
        surface=SURFACE,
    )


@pytest.mark.parametrize("kind", ["blocking", "asyncio"])
def test_a_process_that_ends_sends_its_queued_reports_first(
    inprocess: Target, inprocess_client: Cosigner, run_id: str, kind: str
) -> None:
    decided = _read_approved(inprocess_client, run_id)
    assert decided.approved
    run_to_its_end(SCRIPT, inprocess.url, inprocess.acme, decided.approval_id, kind)
    assert results_of(inprocess_client.audit(decided.approval_id)) == [
        {"outcome": "succeeded", "result": "sent at exit", "error": None}
    ]


async def test_an_asyncio_client_queues_off_the_loop_and_closing_it_waits(
    inprocess: Target, inprocess_client: Cosigner, run_id: str
) -> None:
    decided = _read_approved(inprocess_client, run_id)
    async with AsyncCosigner(inprocess.url, inprocess.acme) as client:
        await client.report_result(decided, result="queued", wait=False)
    assert results_of(inprocess_client.audit(decided.approval_id)) == [
        {"outcome": "succeeded", "result": "queued", "error": None}
    ]


# Over kept-alive connections (a plain-http Cosigner): the report is written at once on the
# caller's thread and its answer read later, with no worker thread in between.

REFUSED = json.dumps({"error": {"code": "APPROVAL_PENDING", "message": "nobody decided"}}).encode()
RESTARTING = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"


def _decided_over(client: Cosigner) -> str:
    decision = client.request_approval(
        execution_id="e1", tool_call_id="c1", tool_name="lookup_order", parameters={}, surface=SURFACE
    )
    return decision.approval_id


def _reports_received(server: Threaded) -> list[bytes]:
    return [body for _, head, body in server.received if b"/result HTTP/1.1" in head]


def test_a_queued_report_is_written_at_once_and_its_answer_read_later() -> None:
    recorded = json.dumps(RECORDED).encode()
    with Threaded(ok(json.dumps(DECISION).encode()), ok(recorded)) as server:
        with Cosigner(f"http://127.0.0.1:{server.port}", "k") as client:
            approval = _decided_over(client)
            client.report_result(approval, result={"total": 12900}, wait=False)
            server.wait_for(2)  # it reached Cosigner before anything else happened
            assert client._outbox._worker is None  # no thread was woken for it
            assert client.flush_reports(timeout=30)
            assert not client._outbox._owed
    assert [json.loads(b) for b in _reports_received(server)] == [
        {"outcome": "succeeded", "result": {"total": 12900}}
    ]
    assert server.connections == 1  # the same kept-alive connection as the request before it


@pytest.mark.parametrize(
    "answer",
    [b"HTTP/1.1 409 Conflict\r\nContent-Length: %d\r\n\r\n%s" % (len(REFUSED), REFUSED), CLOSE],
    ids=["refused", "answer lost"],
)
def test_a_report_written_at_once_that_fails_is_logged_and_not_sent_twice(
    answer: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    with Threaded(ok(json.dumps(DECISION).encode()), answer) as server:
        with caplog.at_level(logging.WARNING, "cosigner"):
            with Cosigner(f"http://127.0.0.1:{server.port}", "k") as client:
                approval = _decided_over(client)
                client.report_result(approval, error="ValueError: boom", wait=False)
                assert client.flush_reports(timeout=30)
    assert len(_reports_received(server)) == 1
    assert f"could not report the result of approval {approval}" in caplog.text


def test_a_report_written_at_once_that_cosigner_asks_again_for_is_sent_again() -> None:
    recorded = json.dumps(RECORDED).encode()
    with Threaded(ok(json.dumps(DECISION).encode()), RESTARTING, ok(recorded)) as server:
        with Cosigner(f"http://127.0.0.1:{server.port}", "k") as client:
            approval = _decided_over(client)
            client.report_result(approval, result="ok", wait=False)
            assert client.flush_reports(timeout=30)
    first, again = _reports_received(server)
    assert first == again and json.loads(first) == {"outcome": "succeeded", "result": "ok"}
    assert approval == DECISION["approvalId"]


EXIT_SCRIPT = """
import sys
from cosigner import Cosigner, DashboardSurface

client = Cosigner(sys.argv[1], "k")
decision = client.request_approval(
    execution_id="e1", tool_call_id="c1", tool_name="lookup_order", parameters={},
    surface=DashboardSurface(user_id="u_1"),
)
client.report_result(decision, result="sent at exit", wait=False)
"""


def test_a_process_that_ends_reads_the_answers_owed_and_sends_again_if_asked() -> None:
    recorded = json.dumps(RECORDED).encode()
    with Threaded(ok(json.dumps(DECISION).encode()), RESTARTING, ok(recorded)) as server:
        run_to_its_end(EXIT_SCRIPT, f"http://127.0.0.1:{server.port}")
    assert [json.loads(b)["result"] for b in _reports_received(server)] == ["sent at exit", "sent at exit"]


def test_a_large_report_goes_to_the_worker_instead_of_being_written_at_once() -> None:
    recorded = json.dumps(RECORDED).encode()
    with Threaded(ok(json.dumps(DECISION).encode()), ok(recorded)) as server:
        with Cosigner(f"http://127.0.0.1:{server.port}", "k") as client:
            approval = _decided_over(client)
            client.report_result(approval, result="x" * (AT_ONCE_MAX + 1), wait=False)
            assert client._outbox._worker is not None and not client._outbox._owed
            assert client.flush_reports(timeout=30)
    (body,) = _reports_received(server)
    assert json.loads(body)["result"] == "x" * (AT_ONCE_MAX + 1)


def test_closing_gives_up_on_an_answer_owed_after_the_read_timeout(caplog: pytest.LogCaptureFixture) -> None:
    with Threaded(ok(json.dumps(DECISION).encode()), SILENT) as server:
        with caplog.at_level(logging.WARNING, "cosigner"):
            client = Cosigner(f"http://127.0.0.1:{server.port}", "k", timeout=0.05)
            approval = _decided_over(client)
            client.report_result(approval, result="ok", wait=False)
            client.close()  # Cosigner never answers: closing still ends, and says so
    assert len(_reports_received(server)) == 1
    assert f"could not report the result of approval {approval} (ReadTimeout)" in caplog.text

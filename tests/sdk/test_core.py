"""The SDK's flows, stepped by hand: what each asks the I/O to do, and what it makes of the answers.

The clients only run these flows (tests/sdk/test_outcomes.py and test_async.py run them over
real HTTP); here the answers are handed in directly, so retry and reporting rules that a
live server rarely triggers are pinned step by step.
"""

from __future__ import annotations

import inspect
import json
import logging

import httpx
import pytest

from cosigner import _core, _gate
from cosigner._http import configure
from cosigner.decision import parse_approval
from cosigner.errors import AlreadyDecided, ApprovalDenied
from cosigner.keys import KeyCache
from tests.sdk.conftest import SURFACE

CONFIG = configure("http://127.0.0.1:9", "k", timeout=1.0, retry_for=60.0)
GATEWAY = httpx.Response(503, text="upstream restarting")
DECIDED = {
    "type": "approval_decided",
    "approvalId": "apv_" + "a" * 20,
    "executionId": "run_1",
    "toolCallId": "call_1",
    "toolName": "refund",
    "status": "denied",
    "decidedBy": {"kind": "person", "surface": "dashboard", "userId": "u_1"},
    "decidedAt": "2026-01-01T00:00:00.000Z",
    "comment": "not today",
    "grant": None,
    "parametersDigest": "sha256:" + "0" * 64,
}


def test_a_gateway_answer_is_retried_after_a_pause_and_an_api_error_is_not() -> None:
    flow = _core.cancel(CONFIG, "apv_x")
    first = next(flow)
    assert isinstance(first, _core.Send) and (first.method, first.path) == (
        "POST",
        "/v1/approvals/apv_x/cancel",
    )
    assert isinstance(flow.send(GATEWAY), _core.Pause)
    assert flow.send(None) == first
    answer = {"error": {"code": "ALREADY_DECIDED", "message": "closed", "status": "approved"}}
    with pytest.raises(AlreadyDecided) as refused:
        flow.send(httpx.Response(409, json=answer))
    assert refused.value.details == {"status": "approved"}


def test_a_request_that_may_have_arrived_is_retried_only_when_repeating_it_is_safe() -> None:
    cancel = _core.cancel(CONFIG, "apv_x")
    next(cancel)
    with pytest.raises(httpx.ReadError):
        cancel.throw(httpx.ReadError("connection reset"))
    cancel = _core.cancel(CONFIG, "apv_x")
    next(cancel)
    assert isinstance(cancel.throw(httpx.ConnectError("refused")), _core.Pause)
    get = _core.get(CONFIG, "apv_x")
    next(get)
    assert isinstance(get.throw(httpx.ReadError("connection reset")), _core.Pause)


def test_a_long_poll_is_sent_again_while_the_approval_is_pending() -> None:
    flow = _core.wait_for(CONFIG, "apv_x", None)
    poll = next(flow)
    assert (
        isinstance(poll, _core.Send) and poll.params == {"wait": 60} and poll.timeout == CONFIG.poll_timeout
    )
    pending = {
        **{
            k: DECIDED[k] for k in ("approvalId", "executionId", "toolCallId", "toolName", "parametersDigest")
        },
        "type": "approval_start",
        "parameters": {},
        "timeout": 1000,
        "startedAt": "2026-01-01T00:00:00.000Z",
        "expiresAt": "2026-01-01T00:00:01.000Z",
        "status": "pending",
    }
    assert flow.send(httpx.Response(200, json=pending)) == poll
    with pytest.raises(StopIteration) as done:
        flow.send(httpx.Response(200, json=DECIDED))
    assert done.value.value.comment == "not today"


def test_a_denied_gated_call_never_yields_its_body() -> None:
    def refund(order_id: str) -> str:
        raise AssertionError("never run")

    options = _gate.Options(SURFACE, None, "run_1", None, None)
    flow = _core.gated_call(CONFIG, KeyCache(), refund, inspect.signature(refund), options, None, ("o",), {})
    ask = next(flow)
    assert isinstance(ask, _core.Send) and ask.path == "/v1/approvals"
    with pytest.raises(ApprovalDenied) as denied:
        flow.send(httpx.Response(200, json=DECIDED))
    assert denied.value.comment == "not today"


def test_a_result_that_cannot_be_reported_is_logged_under_the_body_s_own_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    decision = parse_approval(json.dumps({**DECIDED, "status": "approved", "grant": "g"}))
    flow = _core._report_quietly(CONFIG, decision, _gate.error_report(ValueError("boom")))
    report = next(flow)
    assert (
        isinstance(report, _core.Send)
        and report.content == b'{"outcome":"failed","error":"ValueError: boom"}'
    )
    with caplog.at_level(logging.WARNING, "cosigner"), pytest.raises(StopIteration):
        flow.throw(httpx.ReadTimeout("no answer"))
    assert "could not report the result" in caplog.text

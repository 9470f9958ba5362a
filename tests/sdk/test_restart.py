"""An agent waiting on a decision keeps waiting while `cosigner serve` is killed and restarted."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest

from cosigner import Cosigner
from tests.harness import DEFAULT_POLICY, TEST_SECRET
from tests.processes import cosigner_env, free_port, serving, tenant_keys
from tests.sdk.conftest import SURFACE, USER, Polling
from tests.sdk.test_outcomes import in_background


class _CountingPolls(Polling):
    def __init__(self) -> None:
        super().__init__()
        self.polls = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.polls += "wait" in request.url.params
        return super().handle_request(request)


@pytest.mark.slow
def test_waiting_survives_a_server_restart(tmp_path: Path) -> None:
    env = cosigner_env(tmp_path, DEFAULT_POLICY, TEST_SECRET)
    key, approver = tenant_keys(env, tmp_path, "acme")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    transport = _CountingPolls()
    with Cosigner(url=url, api_key=key, transport=transport, retry_for=60) as agent:
        with serving(env, tmp_path, port) as proc:
            handle = agent.request_approval(
                execution_id="run_restart",
                tool_call_id="c1",
                tool_name="issue_refund",
                parameters={"orderId": "ord_1", "amountCents": 12900},
                surface=SURFACE,
                wait=False,
            )
            waiting = in_background(lambda: agent.wait(handle))
            assert transport.polling.wait(30)
            proc.send_signal(signal.SIGKILL)  # mid long-poll
            proc.wait(timeout=10)
        assert not waiting.done()
        with serving(env, tmp_path, port), Cosigner(url=url, api_key=approver) as person:
            person.decide(handle, decision="approve", user_id=USER, comment="after the restart")
            d = waiting.result(timeout=60)
    assert d.approved and d.comment == "after the restart" and d.approval_id == handle.approval_id
    assert transport.polls >= 2

"""A real `cosigner serve` exports its spans to the OTLP endpoint, and flushes them when stopped."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest

from tests.bot.test_tracing import AGENT_SPAN, AGENT_TRACE, TRACEPARENT, USER, request
from tests.harness import DEFAULT_POLICY, TEST_SECRET
from tests.otlp import OtlpReceiver
from tests.processes import cosigner_env, free_port, serving, tenant_keys


@pytest.mark.slow
def test_serve_exports_over_otlp_and_flushes_on_sigterm(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in cosigner_env(tmp_path, DEFAULT_POLICY, TEST_SECRET).items()
        if not k.startswith("OTEL_")
    }
    key, approver = tenant_keys(env, tmp_path, "acme")
    port = free_port()
    with OtlpReceiver() as rx:
        # Batches wait ten minutes: only the shutdown can send these spans.
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=rx.base_url, OTEL_BSP_SCHEDULE_DELAY="600000")
        with serving(env, tmp_path, port) as proc:
            url, auth = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {key}"}
            created = httpx.post(
                f"{url}/v1/approvals", json=request(), headers={**auth, "traceparent": TRACEPARENT}
            )
            approval_id = created.json()["approvalId"]
            decided = httpx.post(
                f"{url}/v1/approvals/{approval_id}/decision",
                json={"decision": "approve", "userId": USER},
                headers={"Authorization": f"Bearer {approver}"},
            )
            assert decided.json()["traceId"] == AGENT_TRACE
            assert rx.spans == [], "nothing sent before the batch is due"
            proc.send_signal(signal.SIGTERM)
            # uvicorn shuts down gracefully, then re-raises the signal it caught.
            assert proc.wait(timeout=30) in (0, -signal.SIGTERM)
        approval = rx.one("cosigner.approval")
    assert (approval.trace_id, approval.parent_span_id) == (AGENT_TRACE, AGENT_SPAN)
    assert approval.service == "cosigner" and approval.attributes["cosigner.approval.id"] == approval_id
    assert rx.one("cosigner.answer").parent_span_id == approval.span_id

"""Tracing switched on and off by the standard OTEL_* variables, flushed when the app stops."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from bot.observability.tracing import Tracing
from bot.settings import SettingsError, load_settings
from tests.bot.test_tracing import AGENT_TRACE, TRACEPARENT, USER, request
from tests.harness import TEST_SECRET, cosigner_app
from tests.otlp import OtlpReceiver

OTEL = [
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_TRACES_EXPORTER",
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_SAMPLER",
    "OTEL_SERVICE_NAME",
]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in OTEL:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("COSIGNER_SECRET", TEST_SECRET)


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as rx:
        yield rx


async def approve_one(**settings: Any) -> dict[str, str]:
    """Create and approve one approval (with a traceparent) in an app with these settings."""
    async with cosigner_app(**settings) as h:
        key = await h.create_tenant("acme")
        created = await h.client.post(
            "/v1/approvals", json=request(), headers={**h.auth(key), "traceparent": TRACEPARENT}
        )
        decided = await h.client.post(
            f"/v1/approvals/{created.json()['approvalId']}/decision",
            json={"decision": "approve", "userId": USER},
            headers=h.auth(h.approver_of(key)),
        )
        assert h.engine.tracing.enabled is bool(settings)
        return dict(decided.json())


async def test_the_endpoint_turns_export_on_and_stopping_flushes(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Batches wait ten minutes: only the shutdown of the app can have sent these spans.
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
    decided = await approve_one(otel_exporter_otlp_endpoint=receiver.base_url)
    assert decided["traceId"] == AGENT_TRACE
    approval = receiver.one("cosigner.approval")
    assert approval.trace_id == AGENT_TRACE and approval.service == "cosigner"
    assert len(receiver.named("cosigner.answer")) == 1


async def test_the_sdk_sampler_is_read_from_the_environment(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    decided = await approve_one(otel_exporter_otlp_endpoint=receiver.base_url)
    assert decided["traceId"] == AGENT_TRACE, "the approval still belongs to the agent's trace"
    assert receiver.spans == []


async def test_nothing_is_exported_without_the_variables(receiver: OtlpReceiver) -> None:
    decided = await approve_one()
    assert decided["traceId"] == AGENT_TRACE, "the incoming trace is still recorded"
    assert receiver.spans == [] and receiver.bodies == []


def test_the_variables_are_read_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_settings().otlp_traces_endpoint is None
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")
    assert load_settings().otlp_traces_endpoint == "http://collector:4318/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://otlp.example/traces")
    assert load_settings().otlp_traces_endpoint == "https://otlp.example/traces"
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert load_settings().otlp_traces_endpoint is None
    monkeypatch.delenv("OTEL_TRACES_EXPORTER")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert load_settings().otlp_traces_endpoint is None
    monkeypatch.delenv("OTEL_SDK_DISABLED")

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")
    with pytest.raises(SettingsError, match=r"OTEL_EXPORTER_OTLP_ENDPOINT must be an absolute http"):
        load_settings()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with pytest.raises(SettingsError, match=r"OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf"):
        load_settings()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with pytest.raises(SettingsError, match=r"OTEL_TRACES_EXPORTER must be otlp or none"):
        load_settings()


def test_a_provider_that_cannot_keep_the_approval_span_ids_is_refused() -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    with pytest.raises(ValueError, match=r"id_generator=bot.observability.trace_ids.ApprovalIds\(\)"):
        Tracing(provider)

"""Where spans go: the OpenTelemetry SDK's provider, exporting over OTLP/HTTP when configured.

With `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, spans are
batched by the SDK's `BatchSpanProcessor` (its `OTEL_BSP_*` variables) and posted by the
official OTLP/HTTP exporter (its `OTEL_EXPORTER_OTLP_*` headers, timeout, compression and
certificates), sampled by `OTEL_TRACES_SAMPLER` and `OTEL_TRACES_SAMPLER_ARG`, described by
`OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`. Without it there is no provider and
tracing takes its no-op path. The app shuts the provider down when it stops, which flushes
the spans still queued.
"""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.sampling import Sampler

from bot.observability.trace_ids import ApprovalIds
from bot.settings import Settings

SERVICE = "cosigner"


def resource() -> Resource:
    """The SDK's resource from the environment, named `cosigner` unless the operator named it."""
    found = Resource.create()
    if str(found.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        return found.merge(Resource({SERVICE_NAME: SERVICE}))
    return found


def tracer_provider(*processors: SpanProcessor, sampler: Sampler | None = None) -> TracerProvider:
    """A provider Cosigner can trace with: its approval spans keep their stored ids.

    The sampler is the SDK's from `OTEL_TRACES_SAMPLER` unless one is given. The provider is
    not shut down at interpreter exit: its owner does that (the app, when it stops).
    """
    provider = TracerProvider(
        sampler=sampler, resource=resource(), id_generator=ApprovalIds(), shutdown_on_exit=False
    )
    for processor in processors:
        provider.add_span_processor(processor)
    return provider


def otlp_provider(settings: Settings) -> TracerProvider | None:
    """The exporting provider the settings ask for, or None: nothing is exported."""
    endpoint = settings.otlp_traces_endpoint
    if endpoint is None:
        return None
    return tracer_provider(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))

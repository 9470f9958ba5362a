"""Observability: structured logs, Prometheus metrics, traces and their exporter, and the
readable activity lines of `cosigner dev`.
"""

from typing import TYPE_CHECKING

from bot import lazy_exports

if TYPE_CHECKING:
    from bot.observability.activity import Activity, Step
    from bot.observability.logs import configure
    from bot.observability.metrics import Metrics
    from bot.observability.telemetry import otlp_provider
    from bot.observability.trace_ids import NO_TRACE, ApprovalTrace
    from bot.observability.tracing import (
        Answered,
        SpanName,
        Tracing,
        answered,
        delivery_outcome,
        expect_outcome,
        http_outcome,
        outcome_type,
    )

__all__ = [
    "NO_TRACE",
    "Activity",
    "Answered",
    "ApprovalTrace",
    "Metrics",
    "SpanName",
    "Step",
    "Tracing",
    "answered",
    "configure",
    "delivery_outcome",
    "expect_outcome",
    "http_outcome",
    "otlp_provider",
    "outcome_type",
]
__getattr__ = lazy_exports(
    __name__,
    __all__,
    {
        "bot.observability.activity": ["Activity", "Step"],
        "bot.observability.logs": ["configure"],
        "bot.observability.metrics": ["Metrics"],
        "bot.observability.telemetry": ["otlp_provider"],
        "bot.observability.trace_ids": ["NO_TRACE", "ApprovalTrace"],
        "bot.observability.tracing": [
            "Answered",
            "SpanName",
            "Tracing",
            "answered",
            "delivery_outcome",
            "expect_outcome",
            "http_outcome",
            "outcome_type",
        ],
    },
)

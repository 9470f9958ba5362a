"""The ids an approval's span keeps: chosen at its request, stored with it, reused at its close.

An approval span is exported when the approval closes, perhaps on another replica or after
a restart, yet its children (delivery, answers) are exported before that and name it as
their parent. So the span's ids are picked at the request and stored (`ApprovalTrace`), and
the SDK is made to reuse them when the span is finally started (`ApprovalIds`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import SpanContext, TraceFlags, TraceState

from storage.record_columns import TraceContext
from storage.records import Record

MAX_TRACESTATE = 512  # longer vendor state is dropped rather than stored with every approval


@dataclass(frozen=True)
class ApprovalTrace:
    """The trace an approval belongs to, chosen at its request and stored with it.

    `context`: the approval span's id, whether it is sampled, and its parent (the incoming
    span's id, flags and tracestate), enough to export it later anywhere.
    """

    trace_id: str | None = None
    context: TraceContext | None = None

    @classmethod
    def chosen(cls, trace_id: int, span_id: int, sampled: bool, parent: SpanContext | None) -> ApprovalTrace:
        """The trace of a new approval span with these ids, under `parent` (the incoming span)."""
        span = trace.format_span_id(span_id)
        if parent is None:
            return cls(trace.format_trace_id(trace_id), TraceContext(span, sampled))
        state = parent.trace_state.to_header()
        context = TraceContext(
            span,
            sampled,
            trace.format_span_id(parent.span_id),
            int(parent.trace_flags),
            state if 0 < len(state) <= MAX_TRACESTATE else None,
        )
        return cls(trace.format_trace_id(trace_id), context)


NO_TRACE = ApprovalTrace()


class ApprovalIds(IdGenerator):
    """Random ids, except while an approval span is started with the ids stored for it.

    The SDK takes a span's ids from its provider's id generator; this one lets the approval
    span, exported at close, keep the ids its children were given at the request.
    """

    def __init__(self) -> None:
        self.random = RandomIdGenerator()
        self._preset: ContextVar[tuple[int, int] | None] = ContextVar("cosigner_span_ids", default=None)

    def generate_span_id(self) -> int:
        """The preset span id, else a random one."""
        preset = self._preset.get()
        return preset[1] if preset else self.random.generate_span_id()

    def generate_trace_id(self) -> int:
        """The preset trace id, else a random one."""
        preset = self._preset.get()
        return preset[0] if preset else self.random.generate_trace_id()

    @contextmanager
    def preset(self, trace_id: int, span_id: int) -> Iterator[None]:
        """Have spans started inside take these ids."""
        token = self._preset.set((trace_id, span_id))
        try:
            yield
        finally:
            self._preset.reset(token)


@dataclass(frozen=True)
class StoredTrace:
    """An approval's stored trace, parsed: its span's ids, the sampler's say, its parent."""

    trace_id: int
    span_id: int
    sampled: bool
    parent: SpanContext | None

    @classmethod
    def of(cls, rec: Record) -> StoredTrace | None:
        """The stored trace of an approval; None without one (or an unreadable one)."""
        d = rec.trace_context
        if not rec.trace_id or d is None:
            return None
        try:
            trace_id = int(rec.trace_id, 16)
            parent = None
            if d.parent is not None:
                state = TraceState.from_header([d.state]) if d.state else None
                parent = SpanContext(trace_id, int(d.parent, 16), True, TraceFlags(d.parent_flags), state)
            return cls(trace_id, int(d.span, 16), d.sampled, parent)
        except (ValueError, KeyError, TypeError):
            return None

    def under(self) -> otel_context.Context:
        """A context whose current span is the approval span, to start its children in."""
        flags = TraceFlags(TraceFlags.SAMPLED if self.sampled else TraceFlags.DEFAULT)
        here = SpanContext(self.trace_id, self.span_id, True, flags)
        return trace.set_span_in_context(trace.NonRecordingSpan(here))

    def above(self) -> otel_context.Context:
        """The context of the approval span's parent (empty for a root)."""
        if self.parent is None:
            return otel_context.Context()
        return trace.set_span_in_context(trace.NonRecordingSpan(self.parent))

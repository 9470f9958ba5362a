"""Traces: W3C Trace Context in, OpenTelemetry spans out, one `cosigner.approval` span per approval.

An approval outlives the request that made it: it closes minutes later, perhaps on another
replica or after a restart, so its span is never held open in memory. At the request
Cosigner picks the span's ids (the trace of the incoming `traceparent`, else a new one),
asks the sampler once, and stores both with the approval (`ApprovalTrace`). Delivery,
answers, card updates and callbacks are exported as they happen, as children of those
stored ids; when the approval closes, its own span is exported with the stored ids, from
the request's time to the decision's. An operation's `execute`/`status` and a
handoff's `expect` are its children too; `prepare` comes before the approval exists, so it
is a child of the request's context. Without a tracer provider every hook takes the no-op
path: no attribute is built and nothing is exported.

Attributes carry ids, names and outcomes only: never parameter values, reasons,
comments, phone numbers, user ids, URLs or tokens.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import Decision
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from bot.observability.trace_ids import NO_TRACE, ApprovalIds, ApprovalTrace, StoredTrace
from contracts.answers import DecidedBy, PersonDecider, SystemDecider
from contracts.audit_events import HandoffCheck
from contracts.enums import ApprovalStatus, ErrorCode
from contracts.errors import CosignerError
from storage.records import Record

T = TypeVar("T")


class SpanName(StrEnum):
    """The spans Cosigner exports."""

    APPROVAL = "cosigner.approval"
    ADMIT = "cosigner.admit"
    DELIVER = "cosigner.deliver"
    ANSWER = "cosigner.answer"
    SHOW = "cosigner.show"
    CALLBACK = "cosigner.callback"
    PREPARE = "cosigner.prepare"
    EXECUTE = "cosigner.execute"
    STATUS = "cosigner.status"
    EXPECT = "cosigner.expect"


CLIENT_STEPS = {
    SpanName.DELIVER,
    SpanName.SHOW,
    SpanName.CALLBACK,
    SpanName.PREPARE,
    SpanName.EXECUTE,
    SpanName.STATUS,
    SpanName.EXPECT,
}
"""The steps that call out of Cosigner (a surface or an application): `SpanKind.CLIENT` spans."""

POSTS = {SpanName.CALLBACK, SpanName.PREPARE, SpanName.EXECUTE, SpanName.STATUS, SpanName.EXPECT}
"""The steps that are one signed HTTP POST to an application."""


def _ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


def error_type(exc: BaseException) -> str:
    """`error.type`: our error code, else the exception's class name (never its message)."""
    if isinstance(exc, CosignerError):
        return str(exc.code)
    code = getattr(exc, "code", None)  # an application call's failure carries the code it becomes
    return str(code) if isinstance(code, ErrorCode) else type(exc).__qualname__


def approval_attributes(rec: Record) -> dict[str, AttributeValue]:
    """The attributes of a `cosigner.approval` span: ids, names and the outcome, no values."""
    attrs: dict[str, AttributeValue] = {
        "cosigner.approval.id": rec.id,
        "cosigner.tenant": rec.tenant,
        "cosigner.execution.id": rec.execution_id,
        "gen_ai.tool.name": rec.tool_name,
        "gen_ai.tool.call.id": rec.tool_call_id,
        "cosigner.tool.kind": rec.kind.value,
        "cosigner.mode": rec.mode.value,
        "cosigner.surface": rec.surface.type,
        "cosigner.status": rec.status.value,
        "cosigner.policy.rule": rec.policy_rule,
    }
    if rec.route is not None:
        attrs["cosigner.route.surface"] = rec.route.surface.value
    if rec.decided_by is not None:
        attrs["cosigner.decided_by.kind"] = rec.decided_by.kind
    if isinstance(rec.decided_by, SystemDecider):
        attrs["error.type"] = rec.decided_by.code
    return attrs


@dataclass(frozen=True, slots=True)
class Answered:
    """What a close did, as its spans tell it: who answered, the status asked for, a refusal,
    whether the approval closed, and whether an Approve was counted toward its quorum."""

    decided_by: DecidedBy
    wanted: ApprovalStatus
    refusal: CosignerError | None
    changed: bool
    counted: bool = False  # an Approve counted toward a quorum not met yet


class Tracing:
    """The tracing hooks of the engine, API and workers, over one OpenTelemetry SDK provider.

    `provider` None (no OTEL_EXPORTER_OTLP_ENDPOINT) is the no-op path. A provider must be
    built with `id_generator=ApprovalIds()` (`bot.observability.telemetry.tracer_provider`
    does). Tracing reads no database: a step of an approval is handed its record, whose
    stored trace the step's span is a child of.
    """

    def __init__(self, provider: TracerProvider | None = None) -> None:
        if provider is not None and not isinstance(provider.id_generator, ApprovalIds):
            raise ValueError(
                "the tracer provider must be built with "
                "id_generator=bot.observability.trace_ids.ApprovalIds(), so an approval span exported "
                "at close keeps the ids its children were given"
            )
        self.provider = provider
        self.tracer = provider.get_tracer("cosigner") if provider is not None else None
        self.propagator = TraceContextTextMapPropagator()

    @property
    def enabled(self) -> bool:
        """True when spans may be exported."""
        return self.tracer is not None

    # --- in ---------------------------------------------------------------------

    @contextmanager
    def incoming(self, headers: Mapping[str, str]) -> Iterator[None]:
        """Make a request's W3C `traceparent`/`tracestate` the current context; a malformed
        one is ignored, as the propagator does."""
        if "traceparent" not in headers:
            yield
            return
        token = otel_context.attach(self.propagator.extract(headers))
        try:
            yield
        finally:
            otel_context.detach(token)

    def begin(self) -> ApprovalTrace:
        """The ids of a new approval's span under the current context, and the sampler's say."""
        parent = trace.get_current_span().get_span_context()
        if self.provider is None:
            # Not exporting, but the approval still belongs to the agent's trace.
            return ApprovalTrace(trace.format_trace_id(parent.trace_id)) if parent.is_valid else NO_TRACE
        ids = self.provider.id_generator
        assert isinstance(ids, ApprovalIds)
        trace_id = parent.trace_id if parent.is_valid else ids.random.generate_trace_id()
        span_id = ids.random.generate_span_id()
        decision = self.provider.sampler.should_sample(
            otel_context.get_current(), trace_id, SpanName.APPROVAL.value, SpanKind.INTERNAL
        ).decision
        sampled = decision is Decision.RECORD_AND_SAMPLE
        return ApprovalTrace.chosen(trace_id, span_id, sampled, parent if parent.is_valid else None)

    # --- out --------------------------------------------------------------------

    def closed(self, rec: Record) -> None:
        """Export the approval span of a closed approval, with its stored ids and times."""
        if self.tracer is None or self.provider is None:
            return
        stored = StoredTrace.of(rec)
        if stored is None or not stored.sampled:
            return
        ids = self.provider.id_generator
        assert isinstance(ids, ApprovalIds)
        with ids.preset(stored.trace_id, stored.span_id):
            span = self.tracer.start_span(
                SpanName.APPROVAL.value,
                context=stored.above(),
                attributes=approval_attributes(rec),
                start_time=_ns(rec.created_at),
            )
        decided_at = rec.decided_at if rec.decided_at is not None else rec.created_at
        if rec.status is ApprovalStatus.EXPIRED:
            span.add_event("cosigner.expired", timestamp=_ns(decided_at))
        if isinstance(rec.decided_by, SystemDecider):
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=_ns(decided_at))

    def clock(self) -> int:
        """Now in nanoseconds when tracing, else 0 (the no-op path reads no clock)."""
        return time.time_ns() if self.tracer is not None else 0

    def after_close(self, rec: Record, answer: Answered, started: int) -> None:
        """A person's answer as a child span (accepted, or refused with its code), and the
        approval span once it closed (`rec` as it now stands)."""
        if self.tracer is None:
            return
        spoke = answer.changed or answer.counted or answer.refusal is not None
        if isinstance(answer.decided_by, PersonDecider) and spoke:
            self._answer(rec, answer.decided_by, answer, started)
        if answer.changed:
            self.closed(rec)

    def _answer(self, rec: Record, person: PersonDecider, answer: Answered, started: int) -> None:
        assert self.tracer is not None
        stored = StoredTrace.of(rec)
        if stored is None or not stored.sampled:
            return
        incoming = trace.get_current_span().get_span_context()
        links = [Link(incoming)] if incoming.is_valid else []
        span = self.tracer.start_span(
            SpanName.ANSWER.value, context=stored.under(), links=links, start_time=started
        )
        if span.is_recording():
            accepted = answer.refusal is None
            span.set_attributes(
                {
                    "cosigner.approval.id": rec.id,
                    "cosigner.surface": person.surface.value,
                    "cosigner.answer.wanted": answer.wanted.value,
                    "cosigner.answer.accepted": accepted,
                }
            )
            if answer.refusal is not None:
                span.set_attribute("error.type", str(answer.refusal.code))
        span.end()

    async def run(
        self,
        at: Record | None,
        name: SpanName,
        work: Awaitable[T],
        *,
        surface: str | None = None,
        attempt: int | None = None,
        execution_id: str | None = None,
        operation: str | None = None,
        approval_id: str | None = None,
        result: Callable[[T], Mapping[str, AttributeValue]] | None = None,
    ) -> T:
        """Await `work` inside a span: a child of approval `at`, or of the current context
        when None (`approval_id` then names the approval it is for). An
        exception is recorded by `error.type` (and the HTTP status it carries) and raised."""
        if self.tracer is None:
            return await work
        parent = self._parent(at)
        if parent is None:
            return await work
        kind = SpanKind.CLIENT if name in CLIENT_STEPS else SpanKind.INTERNAL
        span = self.tracer.start_span(name.value, context=parent, kind=kind)
        recording = span.is_recording()
        if recording:
            attrs: dict[str, AttributeValue] = {}
            if at is not None:
                attrs["cosigner.approval.id"] = at.id
            elif approval_id is not None:
                attrs["cosigner.approval.id"] = approval_id
            if operation is not None:
                attrs["cosigner.operation"] = operation
            if surface is not None:
                attrs["cosigner.surface"] = surface
            if attempt is not None:
                attrs["cosigner.attempt"] = attempt
            if execution_id is not None:
                attrs["cosigner.execution.id"] = execution_id
            if name in POSTS:
                attrs["http.request.method"] = "POST"
            span.set_attributes(attrs)
        try:
            value = await work
        except BaseException as exc:
            if recording:
                span.set_attribute("error.type", error_type(exc))
                status = getattr(exc, "status", None)
                if isinstance(status, int) and name in POSTS:
                    span.set_attribute("http.response.status_code", status)
                span.set_status(Status(StatusCode.ERROR))
            span.end()
            raise
        if recording and result is not None:
            outcome = result(value)
            span.set_attributes(outcome)
            if "error.type" in outcome:
                span.set_status(Status(StatusCode.ERROR))
        span.end()
        return value

    def _parent(self, at: Record | None) -> otel_context.Context | None:
        if at is None:
            return otel_context.get_current()
        stored = StoredTrace.of(at)
        if stored is None or not stored.sampled:
            return None
        return stored.under()


def http_outcome(response: Any) -> dict[str, AttributeValue]:
    """A callback's answer as HTTP attributes; 4xx and 5xx are errors (HTTP conventions)."""
    status = int(response.status_code)
    attrs: dict[str, AttributeValue] = {"http.response.status_code": status}
    if status >= 400:
        attrs["error.type"] = str(status)
    return attrs


def delivery_outcome(receipt: Any) -> dict[str, AttributeValue]:
    """How many messages a delivery posted or texted (never where to)."""
    return {"cosigner.delivery.messages": len(receipt.message_refs)}


def answered(value: Any) -> dict[str, AttributeValue]:
    """An application call that returned: it answered 200 (anything else raises)."""
    return {"http.response.status_code": 200}


def outcome_type(answer: Any) -> dict[str, AttributeValue]:
    """An `execute` or `status` answer: HTTP 200 and the outcome's type (never its message)."""
    return {"http.response.status_code": 200, "cosigner.operation.outcome": str(answer.outcome)}


def expect_outcome(
    checked: tuple[ApprovalStatus, str | None, object, HandoffCheck],
) -> dict[str, AttributeValue]:
    """A handoff's `expect` check: completed or failed (`HANDOFF_FAILED`), and the HTTP status
    the application answered with, if it answered (never its detail)."""
    status, _detail, _receipt, note = checked
    attrs: dict[str, AttributeValue] = {"cosigner.handoff.result": status.value}
    if note.status is not None:
        attrs["http.response.status_code"] = note.status
    if status is not ApprovalStatus.COMPLETED:
        attrs["error.type"] = str(ErrorCode.HANDOFF_FAILED)
    return attrs

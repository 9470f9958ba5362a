"""Every call of the API once, without I/O: flows that yield the steps they need done.

A flow is a generator. It yields a `Send` (and is resumed with the response, or has
the transport error thrown in), a `Pause` (resumed with None) or, for a gated function, a
`Body` (resumed with its return value, or has its exception thrown in), and returns the
call's value. `cosigner._drivers` runs flows with blocking I/O or with `await`, so building
bodies, retrying, waiting, decoding and the gate's checks are written here once.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import httpx

from cosigner import _gate, _http
from cosigner.answers import AuditEvent, AuditTrail
from cosigner.decision import Decision, parse_approval
from cosigner.errors import CosignerError, WrongKeyScope
from cosigner.events import DECIDED, ApprovalEvent, EventParser
from cosigner.grants import GrantClaims, GrantRefused, Seen
from cosigner.keys import KEYS_PATH, KeyCache
from cosigner.surfaces import Surface

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Send:
    """Send this request and resume the flow with its response."""

    method: str
    path: str
    content: bytes | None
    params: dict[str, Any] | None
    headers: dict[str, str] | None
    timeout: httpx.Timeout | float


@dataclass(frozen=True, slots=True)
class Pause:
    """Wait this many seconds, then resume the flow."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Body:
    """Run the gated function's body, then resume the flow with what it returned or raised."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


Flow = Generator[Send | Pause | Body, Any, T]


def request_of(
    config: _http.Config,
    method: str,
    path: str,
    *,
    content: bytes | None = None,
    params: dict[str, Any] | None = None,
    poll: bool = False,
) -> Send:
    """One request, with the caller's trace context, ready to send."""
    return Send(
        method,
        path,
        content,
        params,
        _http.request_headers(content),
        config.poll_timeout if poll else config.timeout,
    )


def send(
    config: _http.Config,
    method: str,
    path: str,
    *,
    content: bytes | None = None,
    params: dict[str, Any] | None = None,
    poll: bool = False,
    idempotent: bool = True,
) -> Flow[_http.Response]:
    """One request, retried with backoff while Cosigner cannot be reached; raises its API error."""
    request = request_of(config, method, path, content=content, params=params, poll=poll)
    return (yield from retried(config, request, idempotent=idempotent))


def retried(config: _http.Config, request: Send, *, idempotent: bool) -> Flow[_http.Response]:
    """Send `request`, again with backoff while Cosigner cannot be reached; raises its API error."""
    delays: Iterator[float] | None = None
    while True:
        failure: httpx.TransportError | None = None
        try:
            response: _http.Response = yield request
            if not _http.retryable(response):
                break
        except httpx.TransportError as exc:
            # A request that may have reached the server is retried only if repeating it is safe.
            if not idempotent and not isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
                raise
            failure = exc
        delays = delays or _http.Backoff(config.retry_for).delays()
        delay = next(delays, None)
        if delay is None:
            if failure is not None:
                raise failure
            break
        yield Pause(delay)
    error = _http.error_of(response)
    if error is not None:
        raise error
    return response


def path_of(approval: str | Decision, tail: str = "") -> str:
    """The path of an approval (given by id or Decision), with `tail` after it."""
    return f"/v1/approvals/{_http.approval_id_of(approval)}{tail}"


def request_approval(
    config: _http.Config,
    *,
    execution_id: str,
    tool_call_id: str,
    tool_name: str | None,
    parameters: Mapping[str, Any] | None,
    operation: str | None = None,
    request: Mapping[str, Any] | None = None,
    surface: Surface,
    reason: str | None = None,
    timeout_seconds: int | None = None,
    callback_url: str | None = None,
    wait: bool = True,
    wait_timeout: float | None = None,
    accepts_edits: bool = False,
    parameters_schema: Mapping[str, Any] | None = None,
    tool_annotations: Mapping[str, bool] | None = None,
) -> Flow[Decision]:
    """`POST /v1/approvals`, then (with `wait`) long-poll until settled (an operation: until
    its outcome is known). An approval of an edited call comes back with `parameters` the whole
    call to run (`Decision.with_original`)."""
    body = _http.approval_body(
        accepts_edits=accepts_edits,
        parameters_schema=parameters_schema,
        tool_annotations=tool_annotations,
        execution_id=execution_id,
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        parameters=parameters,
        operation=operation,
        request=request,
        surface=surface,
        reason=reason,
        timeout_seconds=timeout_seconds,
        callback_url=callback_url,
    )
    decision = parse_approval((yield from send(config, "POST", "/v1/approvals", content=body)).content)
    if wait and not decision.settled:
        if decision.pending:
            _gate.log_waiting(decision)
        decision = yield from wait_for(config, decision, wait_timeout)
    return decision.with_original(parameters) if decision.edited and parameters is not None else decision


def wait_for(config: _http.Config, approval: str | Decision, timeout: float | None) -> Flow[Decision]:
    """Long-poll until decided, reconnecting across the 60 s limit; TimeoutError after `timeout` s."""
    path = path_of(approval)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        params = {"wait": _http.wait_seconds(deadline)}
        decision = parse_approval((yield from send(config, "GET", path, params=params, poll=True)).content)
        if decision.settled:
            return decision
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"approval {decision.approval_id} is still pending after {timeout} s")


def get(config: _http.Config, approval: str | Decision) -> Flow[Decision]:
    """`GET /v1/approvals/{id}`."""
    return parse_approval((yield from send(config, "GET", path_of(approval))).content)


def admit(config: _http.Config, execution_id: str, surface: Surface, tools: list[str]) -> Flow[None]:
    """`POST /v1/runs/admit`."""
    yield from send(config, "POST", "/v1/runs/admit", content=_http.admit_body(execution_id, surface, tools))


def cancel(config: _http.Config, approval: str | Decision) -> Flow[Decision]:
    """`POST /v1/approvals/{id}/cancel`."""
    response = yield from send(config, "POST", path_of(approval, "/cancel"), idempotent=False)
    return parse_approval(response.content)


def report_result(
    config: _http.Config, approval: str | Decision, result: Any, error: str | None
) -> Flow[None]:
    """`POST /v1/approvals/{id}/result`."""
    yield from send_report(config, report_request(config, approval, _http.result_body(result, error)))


def report_request(config: _http.Config, approval: str | Decision, body: bytes) -> Send:
    """The `POST /v1/approvals/{id}/result` request for a body `_http.result_body` built."""
    return request_of(config, "POST", path_of(approval, "/result"), content=body)


def send_report(config: _http.Config, request: Send) -> Flow[None]:
    """Send a `report_request`: once, and again only where it cannot have arrived."""
    yield from retried(config, request, idempotent=False)


def decide(
    config: _http.Config,
    approval: str | Decision,
    decision: Literal["approve", "deny", "always_deny", "done", "cancel"],
    user_id: str,
    comment: str | None,
    edit: Mapping[str, Any] | None = None,
    parameters_digest: str | None = None,
) -> Flow[Decision]:
    """`POST /v1/approvals/{id}/decision` (dashboard surface); needs an approver key."""
    body = _http.decision_body(decision, user_id, comment, edit, parameters_digest)
    try:
        response = yield from send(
            config, "POST", path_of(approval, "/decision"), content=body, idempotent=False
        )
    except WrongKeyScope as exc:
        # The agent's own key may not decide: that is what keeps an agent from approving itself.
        raise WrongKeyScope(
            "decide needs an approver key (`cosigner tenants key create TENANT --scope approver`), "
            "held by the approval app, not the agent; this client was made with an agent key",
            **exc.details,
        ) from exc
    return parse_approval(response.content)


def audit(config: _http.Config, approval: str | Decision) -> Flow[list[dict[str, Any]]]:
    """`GET /v1/approvals/{id}/audit`: the hash-chained events."""
    response = yield from send(config, "GET", path_of(approval, "/audit"))
    return list(json.loads(response.content)["events"])


def audit_trail(config: _http.Config, approval: str | Decision) -> Flow[list[AuditEvent]]:
    """`GET /v1/approvals/{id}/audit` as models: each event's `typed()` reads its data."""
    response = yield from send(config, "GET", path_of(approval, "/audit"))
    return AuditTrail.model_validate_json(response.content).events


def verify_grant(
    config: _http.Config,
    keys: KeyCache,
    grant: str | None,
    parameters: Any,
    tool_name: str | None,
    tool_call_id: str | None,
    audience: str | None = None,
    seen: Seen | None = None,
) -> Flow[GrantClaims]:
    """Check a grant offline, fetching `/v1/keys` first only when the cache cannot."""
    if grant is None:
        raise GrantRefused("no grant: only an approved decision carries one")
    if keys.needs_fetch(grant):
        keys.store((yield from send(config, "GET", KEYS_PATH)).json())
    return keys.verify(
        grant, parameters, tool_name=tool_name, tool_call_id=tool_call_id, audience=audience, seen=seen
    )


def gated_call(
    config: _http.Config,
    keys: KeyCache,
    fn: Callable[..., Any],
    signature: inspect.Signature,
    options: _gate.Options,
    default_execution: str | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Flow[Any]:
    """A gated function's call: ask, wait, refuse unless these very arguments were approved,
    run the body, and report what it returned or raised."""
    call = _gate.plan(fn, options, default_execution, *args, **kwargs)
    decision = yield from request_approval(config, **call.request())
    # An approver's edit runs only where the gate allowed edits (the request said so); the
    # body then gets the edited arguments, checked against the approved digest and grant.
    args, kwargs = _gate.edited_arguments(decision, signature, options, args, kwargs)
    _gate.refuse_unless_approved(decision, signature, *args, **kwargs)
    to_run = _gate.arguments(signature, args, kwargs) if decision.edited else call.parameters
    yield from verify_grant(config, keys, decision.grant, to_run, call.tool_name, None)
    try:
        result = yield Body(fn, args, kwargs)
    except Exception as exc:
        yield from _report_quietly(config, decision, _gate.error_report(exc))
        raise
    yield from _report_quietly(config, decision, _gate.result_report(result))
    return result


def _report_quietly(config: _http.Config, decision: Decision, report: dict[str, Any]) -> Flow[None]:
    # A result that cannot be reported is logged, never raised over the body's own outcome.
    try:
        yield from report_result(config, decision, report.get("result"), report.get("error"))
    except (CosignerError, httpx.HTTPError) as exc:
        _gate.log_unreported(decision.approval_id, exc)


class Streaming:
    """The state of `stream()` across reconnections: which events to pass on, and the backoff."""

    def __init__(self, config: _http.Config, approval: str | Decision) -> None:
        self.config = config
        self.path = path_of(approval, "/events")
        self.started = False
        self.done = False
        self.delays: Iterator[float] | None = None

    def connected(self, response: httpx.Response) -> EventParser:
        """A parser for a fresh connection's lines; raises its API error (the body must be read)."""
        error = _http.error_of(response)
        if error is not None:
            raise error
        return EventParser()

    def take(self, parser: EventParser, line: str) -> ApprovalEvent | None:
        """The event to yield for `line`, if any: a repeated pending start after a reconnect is not."""
        event = parser.feed(line)
        if event is None or (self.started and event.decision.pending):
            return None
        self.started = True
        self.delays = None
        self.done = event.event == DECIDED
        return event

    def retry(self, exc: httpx.TransportError) -> float:
        """The pause before reconnecting after `exc`; raises it once `retry_for` has passed."""
        self.delays = self.delays or _http.Backoff(self.config.retry_for).delays()
        delay = next(self.delays, None)
        if delay is None:
            raise exc
        return delay

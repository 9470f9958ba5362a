"""What the sync and async clients share: configuration, request bodies, error mapping, backoff."""

from __future__ import annotations

import functools
import json
import os
import random
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import ValidationError

from cosigner import wire
from cosigner.errors import ConfigurationError, CosignerError, InvalidRequest, error_for
from cosigner.surfaces import Surface

URL_ENV = "COSIGNER_URL"
KEY_ENV = "COSIGNER_API_KEY"
MAX_WAIT = 60  # the server's long-poll limit, in seconds
RETRY_STATUSES = frozenset({502, 503, 504})
JSON_TYPE = {"Content-Type": "application/json"}


class Reply:
    """An answer from Cosigner, as the SDK's flows read it (an `httpx.Response` reads the same)."""

    __slots__ = ("content", "headers", "status_code")

    def __init__(self, status_code: int, headers: list[tuple[bytes, bytes]], content: bytes) -> None:
        self.status_code = status_code
        self.headers = headers
        self.content = content

    def json(self) -> Any:
        """The body, decoded as JSON."""
        return json.loads(self.content)


Response = httpx.Response | Reply
"""What a request to Cosigner answers: httpx's response, or the SDK's own connections' `Reply`."""


def _trace_propagator() -> Any:
    # OpenTelemetry is optional (`cosigner-sdk[otel]`): without it no trace context is sent.
    try:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError:
        return None
    return TraceContextTextMapPropagator()


_PROPAGATOR = _trace_propagator()


@dataclass(frozen=True)
class Config:
    """Where Cosigner is and how long to keep trying while it cannot be reached."""

    url: str
    headers: dict[str, str]
    timeout: float
    retry_for: float

    @functools.cached_property
    def poll_timeout(self) -> httpx.Timeout:
        """Read timeout for a long-poll: its 60 s plus room for a slow answer."""
        return httpx.Timeout(self.timeout, read=MAX_WAIT + max(self.timeout, 15.0))


def configure(url: str | None, api_key: str | None, timeout: float, retry_for: float) -> Config:
    """The client's configuration from arguments, else COSIGNER_URL and COSIGNER_API_KEY."""
    url = url or os.environ.get(URL_ENV)
    key = api_key or os.environ.get(KEY_ENV)
    if not url and not key:
        # Both at once: fixing one and running again should not reveal the other.
        raise ConfigurationError(
            f"no Cosigner URL and no API key: pass url= and api_key=, or set {URL_ENV} (e.g. "
            f"http://127.0.0.1:8000) and {KEY_ENV} (`cosigner tenants create NAME` prints one; "
            "`./run dev` prints the line that sets both)"
        )
    if not url:
        raise ConfigurationError(f"no Cosigner URL: pass url= or set {URL_ENV} (e.g. http://127.0.0.1:8000)")
    if not key:
        raise ConfigurationError(
            f"no API key: pass api_key= or set {KEY_ENV} (`cosigner tenants create NAME` prints one)"
        )
    return Config(
        url=url.rstrip("/"),
        headers={"Authorization": f"Bearer {key.strip()}", "User-Agent": "cosigner-sdk-python"},
        timeout=timeout,
        retry_for=retry_for,
    )


def request_headers(content: bytes | None) -> dict[str, str] | None:
    """Headers of one request: the JSON type for a body, and the caller's current trace
    context as W3C `traceparent`/`tracestate` when OpenTelemetry is installed."""
    headers = dict(JSON_TYPE) if content is not None else {}
    if _PROPAGATOR is not None:
        _PROPAGATOR.inject(headers)
    return headers or None


def _checked(model: type[wire.Wire], body: dict[str, Any]) -> bytes:
    # Checked as the server checks it: the JSON bytes that will be sent, against the model.
    try:
        raw = json.dumps({k: v for k, v in body.items() if v is not None}, separators=(",", ":")).encode()
    except (TypeError, ValueError) as exc:
        raise InvalidRequest(f"body is not JSON: {exc}", field="body") from None
    try:
        model.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise InvalidRequest(f"{where}: {first['msg']}", field=where) from None
    return raw


def approval_body(
    *,
    execution_id: str,
    tool_call_id: str,
    tool_name: str | None,
    parameters: Mapping[str, Any] | None,
    surface: Surface,
    reason: str | None,
    timeout_seconds: int | None,
    callback_url: str | None,
    operation: str | None = None,
    request: Mapping[str, Any] | None = None,
    accepts_edits: bool = False,
    parameters_schema: Mapping[str, Any] | None = None,
    tool_annotations: Mapping[str, bool] | None = None,
) -> bytes:
    """The `POST /v1/approvals` body, checked against the wire model before it is sent."""
    if (operation is None) == (tool_name is None):
        raise InvalidRequest(
            "give tool_name and parameters for a gated call, or operation and request for an operation",
            field="operation" if operation is not None else "toolName",
        )
    if operation is not None:
        return _checked(
            wire.OperationRequest,
            {
                "executionId": execution_id,
                "toolCallId": tool_call_id,
                "operation": operation,
                "request": dict(request or {}),
                "reason": reason,
                "surface": surface.to_json(),
                "timeoutSeconds": timeout_seconds,
                "callbackUrl": callback_url,
            },
        )
    return _checked(
        wire.ApprovalRequest,
        {
            "executionId": execution_id,
            "toolCallId": tool_call_id,
            "toolName": tool_name,
            "parameters": dict(parameters or {}),
            "reason": reason,
            "surface": surface.to_json(),
            "timeoutSeconds": timeout_seconds,
            "callbackUrl": callback_url,
            # Only when set: a body without them is the one every server version takes.
            **({"acceptsEdits": True} if accepts_edits else {}),
            **({"parametersSchema": dict(parameters_schema)} if parameters_schema is not None else {}),
            **({"toolAnnotations": dict(tool_annotations)} if tool_annotations else {}),
        },
    )


def admit_body(execution_id: str, surface: Surface, tools: list[str]) -> bytes:
    """The `POST /v1/runs/admit` body."""
    return _checked(
        wire.AdmitRequest, {"executionId": execution_id, "surface": surface.to_json(), "tools": tools}
    )


def decision_body(
    decision: str,
    user_id: str,
    comment: str | None,
    edit: Mapping[str, Any] | None = None,
    parameters_digest: str | None = None,
) -> bytes:
    """The `POST /v1/approvals/{id}/decision` body (dashboard surface); `edit` approves an
    edited call, `parameters_digest` names the call the user was shown."""
    body: dict[str, Any] = {"decision": decision, "userId": user_id, "comment": comment}
    if edit is not None:
        body["edit"] = dict(edit)
    if parameters_digest is not None:
        body["parametersDigest"] = parameters_digest
    return _checked(wire.DecisionRequest, body)


def result_body(result: Any, error: str | None) -> bytes:
    """The `POST /v1/approvals/{id}/result` body: `failed` when `error` is given."""
    outcome = "failed" if error is not None else "succeeded"
    return _checked(wire.ResultReport, {"outcome": outcome, "result": result, "error": error})


def error_of(response: Response) -> CosignerError | None:
    """The exception for a non-2xx response, or None for a 2xx.

    Read as plain JSON, not the strict model, so a code this SDK does not know yet still
    arrives with its message and fields."""
    if response.status_code < 400:
        return None
    try:
        detail = dict(json.loads(response.content)["error"])
        code, message = str(detail.pop("code")), str(detail.pop("message"))
    except (ValueError, KeyError, TypeError):
        return error_for(
            response.status_code,
            f"HTTP_{response.status_code}",
            f"Cosigner answered HTTP {response.status_code} without an error body; check COSIGNER_URL",
            {},
        )
    return error_for(response.status_code, code, message, detail)


def retryable(response: Response) -> bool:
    """A gateway or restart answer (502/503/504 without a Cosigner error body): try again."""
    if response.status_code not in RETRY_STATUSES:
        return False
    try:
        json.loads(response.content)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return True
    return False


class Backoff:
    """Delays between attempts while Cosigner is unreachable: doubling, jittered, capped."""

    def __init__(self, retry_for: float, first: float = 0.05, cap: float = 2.0) -> None:
        self.retry_for = retry_for
        self.first = first
        self.cap = cap
        self.started: float | None = None

    def delays(self) -> Iterator[float]:
        """Yield the next delay, until `retry_for` seconds of failures have passed."""
        self.started = time.monotonic()
        delay = self.first
        while time.monotonic() - self.started < self.retry_for:
            yield delay * random.uniform(0.5, 1.0)
            delay = min(delay * 2, self.cap)


def wait_seconds(deadline: float | None) -> int:
    """The `?wait=` value for the next long-poll: up to 60 s, never past the caller's deadline."""
    if deadline is None:
        return MAX_WAIT
    return max(0, min(MAX_WAIT, int(deadline - time.monotonic())))


def approval_id_of(approval: Any) -> str:
    """An approval id from an id or a Decision."""
    return approval if isinstance(approval, str) else str(approval.approval_id)

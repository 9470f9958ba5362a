"""AsyncCosigner: the asyncio client, the same calls as Cosigner with `await`."""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, Literal, TypeVar

import httpx

from cosigner import _gate, _http
from cosigner._protocol import GrantClaims, GrantRefused
from cosigner.decision import Decision, parse_approval
from cosigner.errors import CosignerError
from cosigner.events import DECIDED, ApprovalEvent, EventParser
from cosigner.keys import KEYS_PATH, KeyCache
from cosigner.surfaces import Surface

F = TypeVar("F", bound=Callable[..., Any])


class AsyncCosigner:
    """Ask Cosigner before gated tool calls, wait for decisions, verify grants; awaitable calls."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        execution_id: str | None = None,
        timeout: float = 10.0,
        retry_for: float = 120.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = _http.configure(url, api_key, timeout, retry_for)
        self.execution_id = execution_id
        self.keys = KeyCache()
        self._http = httpx.AsyncClient(
            base_url=self.config.url, headers=self.config.headers, timeout=timeout, transport=transport
        )

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncCosigner:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(
        self,
        method: str,
        path: str,
        *,
        content: bytes | None = None,
        params: dict[str, Any] | None = None,
        timeout: httpx.Timeout | None = None,  # noqa: ASYNC109 (an httpx timeout, per request)
        idempotent: bool = True,
    ) -> httpx.Response:
        delays: Iterator[float] | None = None
        headers = _http.JSON_TYPE if content is not None else None
        while True:
            failure: httpx.TransportError | None = None
            try:
                response = await self._http.request(
                    method,
                    path,
                    content=content,
                    params=params,
                    headers=headers,
                    timeout=timeout or self.config.timeout,
                )
                if not _http.retryable(response):
                    break
            except httpx.TransportError as exc:
                # A request that may have reached the server is retried only if repeating it is safe.
                if not idempotent and not isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
                    raise
                failure = exc
            delays = delays or _http.Backoff(self.config.retry_for).delays()
            delay = next(delays, None)
            if delay is None:
                if failure is not None:
                    raise failure
                break
            await asyncio.sleep(delay)
        error = _http.error_of(response)
        if error is not None:
            raise error
        return response

    async def request_approval(
        self,
        *,
        execution_id: str,
        tool_call_id: str,
        tool_name: str,
        parameters: Mapping[str, Any],
        surface: Surface,
        reason: str | None = None,
        timeout_seconds: int | None = None,
        callback_url: str | None = None,
        wait: bool = True,
        wait_timeout: float | None = None,
    ) -> Decision:
        """Ask before a gated call; return once decided (or at once, pending, with `wait=False`).

        Idempotent: the same execution_id + tool_call_id + parameters return the same
        approval, so an agent that crashed while waiting resumes by calling this again.
        """
        body = _http.approval_body(
            execution_id=execution_id,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            parameters=parameters,
            surface=surface,
            reason=reason,
            timeout_seconds=timeout_seconds,
            callback_url=callback_url,
        )
        decision = parse_approval((await self._send("POST", "/v1/approvals", content=body)).content)
        if wait and decision.pending:
            return await self.wait(decision, timeout=wait_timeout)
        return decision

    async def admit(self, *, execution_id: str, surface: Surface, tools: list[str]) -> None:
        """Check, before a run starts, that its surface can host every approval it may need."""
        await self._send("POST", "/v1/runs/admit", content=_http.admit_body(execution_id, surface, tools))

    async def get(self, approval: str | Decision) -> Decision:
        """The approval as it is now."""
        response = await self._send("GET", f"/v1/approvals/{_http.approval_id_of(approval)}")
        return parse_approval(response.content)

    async def wait(self, approval: str | Decision, *, timeout: float | None = None) -> Decision:  # noqa: ASYNC109
        """Long-poll until decided; reconnects across the 60 s limit, restarts and network errors.

        With `timeout` (seconds), raise TimeoutError if still pending then; the approval stays open.
        """
        path = f"/v1/approvals/{_http.approval_id_of(approval)}"
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            seconds = _http.wait_seconds(deadline)
            response = await self._send(
                "GET", path, params={"wait": seconds}, timeout=self.config.poll_timeout
            )
            decision = parse_approval(response.content)
            if not decision.pending:
                return decision
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"approval {decision.approval_id} is still pending after {timeout} s")

    async def stream(self, approval: str | Decision) -> AsyncIterator[ApprovalEvent]:
        """Yield the approval's server-sent events until it is decided, reconnecting on errors."""
        path = f"/v1/approvals/{_http.approval_id_of(approval)}/events"
        started = False
        delays: Iterator[float] | None = None
        while True:
            try:
                async with self._http.stream("GET", path, timeout=self.config.poll_timeout) as response:
                    if response.status_code >= 400:
                        await response.aread()
                        raise _http.error_of(response) or CosignerError("unreadable error")
                    parser = EventParser()
                    async for line in response.aiter_lines():
                        event = parser.feed(line)
                        if event is None or (started and event.decision.pending):
                            continue
                        started = True
                        delays = None
                        yield event
                        if event.event == DECIDED:
                            return
            except httpx.TransportError:
                delays = delays or _http.Backoff(self.config.retry_for).delays()
                delay = next(delays, None)
                if delay is None:
                    raise
                await asyncio.sleep(delay)

    async def cancel(self, approval: str | Decision) -> Decision:
        """Withdraw a pending request; the decision comes back `cancelled`."""
        path = f"/v1/approvals/{_http.approval_id_of(approval)}/cancel"
        return parse_approval((await self._send("POST", path, idempotent=False)).content)

    async def report_result(
        self, approval: str | Decision, *, result: Any = None, error: str | None = None
    ) -> None:
        """Put what the executed call returned (or the error it raised) on the audit record."""
        path = f"/v1/approvals/{_http.approval_id_of(approval)}/result"
        await self._send("POST", path, content=_http.result_body(result, error), idempotent=False)

    async def decide(
        self,
        approval: str | Decision,
        *,
        decision: Literal["approve", "deny", "done", "cancel"],
        user_id: str,
        comment: str | None = None,
    ) -> Decision:
        """Answer a `dashboard` request on behalf of the tenant app's signed-in `user_id`."""
        path = f"/v1/approvals/{_http.approval_id_of(approval)}/decision"
        body = _http.decision_body(decision, user_id, comment)
        return parse_approval((await self._send("POST", path, content=body, idempotent=False)).content)

    async def audit(self, approval: str | Decision) -> list[dict[str, Any]]:
        """The approval's hash-chained audit events."""
        response = await self._send("GET", f"/v1/approvals/{_http.approval_id_of(approval)}/audit")
        return list(json.loads(response.content)["events"])

    async def verify_grant(
        self,
        grant: str | None,
        parameters: Any,
        *,
        tool_name: str | None = None,
        tool_call_id: str | None = None,
    ) -> GrantClaims:
        """Check a grant offline against the cached `/v1/keys`; raise GrantRefused on any mismatch."""
        if grant is None:
            raise GrantRefused("no grant: only an approved decision carries one")
        if self.keys.needs_fetch(grant):
            self.keys.store((await self._send("GET", KEYS_PATH)).json())
        return self.keys.verify(grant, parameters, tool_name=tool_name, tool_call_id=tool_call_id)

    def gate(
        self,
        *,
        surface: Surface | None = None,
        tool_name: str | None = None,
        execution_id: str | None = None,
        reason: str | None = None,
        timeout_seconds: int | None = None,
    ) -> Callable[[F], F]:
        """Decorate an async tool: its body runs only once Cosigner approved exactly these arguments."""
        options = _gate.Options(surface, tool_name, execution_id, reason, timeout_seconds)
        return lambda fn: self._gated(fn, options)  # type: ignore[return-value]

    async def _report(self, decision: Decision, report: dict[str, Any]) -> None:
        try:
            await self.report_result(decision, **report)
        except (CosignerError, httpx.HTTPError) as exc:
            _gate.log_unreported(decision.approval_id, exc)

    def _gated(self, fn: Callable[..., Any], options: _gate.Options) -> Callable[..., Any]:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(
                f"AsyncCosigner.gate needs an async function and {fn.__name__} is not; "
                "gate it with Cosigner.gate (the blocking client) instead"
            )
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        async def run(*a: Any, **kw: Any) -> Any:
            call = _gate.plan(fn, options, self.execution_id, *a, **kw)
            decision = await self.request_approval(**call.request())
            _gate.refuse_unless_approved(decision, signature, *a, **kw)
            await self.verify_grant(decision.grant, call.parameters, tool_name=call.tool_name)
            try:
                result = await fn(*a, **kw)
            except Exception as exc:
                await self._report(decision, _gate.error_report(exc))
                raise
            await self._report(decision, _gate.result_report(result))
            return result

        return run

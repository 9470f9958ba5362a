"""AsyncCosigner: the asyncio client, the same calls as Cosigner with `await`."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Literal

import httpx

from cosigner import _core, _gate, _http
from cosigner._drivers import Shell, arguments, drive_async
from cosigner._keepalive import BlockingKeepAlive, KeepAlive, Origin, send_async
from cosigner._outbox import Outbox
from cosigner.answers import AuditEvent
from cosigner.decision import Decision
from cosigner.errors import ConfigurationError
from cosigner.events import ApprovalEvent
from cosigner.grants import GrantClaims, Seen
from cosigner.surfaces import Surface


class AsyncCosigner(Shell):
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
        try:
            super().__init__(url, api_key, execution_id, timeout, retry_for)
        except ConfigurationError as exc:
            # Raised again here, so that the caller sees its own line and the fix, not our frames.
            raise ConfigurationError(str(exc)) from None
        self._http = httpx.AsyncClient(
            base_url=self.config.url, headers=self.config.headers, timeout=timeout, transport=transport
        )
        # A plain-http Cosigner gets kept-alive connections of the client's own (cosigner._keepalive).
        self._origin = Origin.of(self.config.url, self.config.headers, transport)
        self._keepalive = KeepAlive(self._origin.host, self._origin.port) if self._origin else None
        # Queued reports are sent from a worker thread, which an asyncio client cannot serve:
        # over blocking connections of their own, so they outlive the event loop. With a
        # transport of the caller's own, they are sent on the call's path instead.
        self._reporting: httpx.Client | None = None
        self._reporting_keepalive = BlockingKeepAlive(self._origin) if self._origin else None
        starter = None
        if self._reporting_keepalive is not None:
            starter = functools.partial(self._reporting_keepalive.start, connect=False)
        self._outbox = Outbox(self.config, self._reporting_sender, starter) if transport is None else None

    def _reporting_sender(self) -> Callable[[_core.Send], _http.Response]:
        # Called on the outbox's only worker thread.
        if self._reporting_keepalive is not None:
            return self._reporting_keepalive.send
        if self._reporting is None:
            self._reporting = httpx.Client(headers=self.config.headers, timeout=self.config.timeout)
        http = self._reporting
        return lambda step: http.request(step.method, self._url(step), **arguments(step))

    async def aclose(self) -> None:
        """Send the reports still queued (`report_result(wait=False)`), then close the connections."""
        if self._outbox is not None:
            await asyncio.to_thread(self._outbox.close)
        if self._reporting is not None:
            self._reporting.close()
        if self._reporting_keepalive is not None:
            self._reporting_keepalive.close()
        if self._keepalive is not None:
            self._keepalive.close()
        await self._http.aclose()

    async def __aenter__(self) -> AsyncCosigner:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _send(self, step: _core.Send) -> _http.Response:
        if self._keepalive is not None:
            assert self._origin is not None
            return await send_async(self._keepalive, self._origin, step)
        return await self._http.request(step.method, self._url(step), **arguments(step))

    async def request_approval(
        self,
        *,
        execution_id: str,
        tool_call_id: str,
        tool_name: str | None = None,
        parameters: Mapping[str, Any] | None = None,
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
    ) -> Decision:
        """Ask before a gated call; return once decided (or at once, pending, with `wait=False`).

        Idempotent: the same execution_id + tool_call_id + parameters return the same
        approval, so an agent that crashed while waiting resumes by calling this again.

        With `operation` and `request` instead of `tool_name` and `parameters`, the agent
        proposes an operation its application carries out once approved; waiting then
        returns once the application's `outcome` is known.

        With `accepts_edits` (and the tool's `parameters_schema`), an approver may edit the call
        where the policy allows it; the decision's `parameters` is then the call to run.

        `tool_annotations` are an MCP tool's hints (`readOnlyHint`, `destructiveHint`, …) as
        its server lists them; the policy may ask or refuse by them, never allow.
        """
        flow = _core.request_approval(
            self.config,
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
            wait=wait,
            wait_timeout=wait_timeout,
            accepts_edits=accepts_edits,
            parameters_schema=parameters_schema,
            tool_annotations=tool_annotations,
        )
        return await drive_async(flow, self._send)

    async def admit(self, *, execution_id: str, surface: Surface, tools: list[str]) -> None:
        """Check, before a run starts, that its surface can host every approval it may need."""
        await drive_async(_core.admit(self.config, execution_id, surface, tools), self._send)

    async def get(self, approval: str | Decision) -> Decision:
        """The approval as it is now."""
        return await drive_async(_core.get(self.config, approval), self._send)

    async def wait(self, approval: str | Decision, *, timeout: float | None = None) -> Decision:  # noqa: ASYNC109
        """Long-poll until decided; reconnects across the 60 s limit, restarts and network errors.

        With `timeout` (seconds), raise TimeoutError if still pending then; the approval stays open.
        """
        return await drive_async(_core.wait_for(self.config, approval, timeout), self._send)

    async def stream(self, approval: str | Decision) -> AsyncIterator[ApprovalEvent]:
        """Yield the approval's server-sent events until it is decided, reconnecting on errors."""
        state = _core.Streaming(self.config, approval)
        while not state.done:
            try:
                async with self._http.stream("GET", state.path, timeout=self.config.poll_timeout) as response:
                    if response.is_error:
                        await response.aread()
                    parser = state.connected(response)
                    async for line in response.aiter_lines():
                        event = state.take(parser, line)
                        if event is not None:
                            yield event
                            if state.done:
                                return
            except httpx.TransportError as exc:
                await asyncio.sleep(state.retry(exc))

    async def cancel(self, approval: str | Decision) -> Decision:
        """Withdraw a pending request; the decision comes back `cancelled`."""
        return await drive_async(_core.cancel(self.config, approval), self._send)

    async def report_result(
        self, approval: str | Decision, *, result: Any = None, error: str | None = None, wait: bool = True
    ) -> None:
        """Put what the executed call returned (or the error it raised) on the audit record.

        With `wait=False` the report leaves while the caller goes on, even after the event
        loop ends: written at once on an idle kept-alive connection (its answer read later),
        else sent by a worker thread (`cosigner._outbox`). A report that cannot be sent is
        logged, not raised; `flush_reports()` (and `aclose()`, and the end of the process)
        wait for the queued ones. A client made with a `transport=` of its own sends it at
        once, on the call's path, instead.
        """
        if not wait and self._outbox is not None:
            self._outbox.put(_http.approval_id_of(approval), result, error)
            return
        await drive_async(_core.report_result(self.config, approval, result, error), self._send)

    async def flush_reports(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Wait until every report queued with `wait=False` was sent (or logged); False on `timeout`."""
        if self._outbox is None:
            return True
        return await asyncio.to_thread(self._outbox.flush, timeout)

    async def decide(
        self,
        approval: str | Decision,
        *,
        decision: Literal["approve", "deny", "always_deny", "done", "cancel"],
        user_id: str,
        comment: str | None = None,
        edit: Mapping[str, Any] | None = None,
        parameters_digest: str | None = None,
    ) -> Decision:
        """Answer a `dashboard` request on behalf of the tenant app's signed-in `user_id` (approver key only).

        `edit` (with `decision="approve"`) approves an edited call: the parameters changed and
        their new values, of those the pending approval lists as `editable`.

        `parameters_digest` names the call your app showed the user: the pending approval's
        `parameters_digest`, or once an approver edited it (a quorum) its `current_digest`. An
        answer for another version is refused with `ParametersMismatch` (409): fetch the
        approval and show its current call. Left out, the answer is for the agent's own call.

        A client made with an agent key gets `WrongKeyScope` (`KEY_SCOPE`): the agent may ask,
        never answer; the approval app holds an approver key.
        """
        return await drive_async(
            _core.decide(self.config, approval, decision, user_id, comment, edit, parameters_digest),
            self._send,
        )

    async def audit(self, approval: str | Decision) -> list[dict[str, Any]]:
        """The approval's hash-chained audit events."""
        return await drive_async(_core.audit(self.config, approval), self._send)

    async def audit_trail(self, approval: str | Decision) -> list[AuditEvent]:
        """The approval's hash-chained audit events as models (see `Cosigner.audit_trail`)."""
        return await drive_async(_core.audit_trail(self.config, approval), self._send)

    async def verify_grant(
        self,
        grant: str | None,
        parameters: Any,
        *,
        tool_name: str | None = None,
        tool_call_id: str | None = None,
        audience: str | None = None,
        seen: Seen | None = None,
    ) -> GrantClaims:
        """Check a grant offline against the cached `/v1/keys`; raise GrantRefused on any mismatch
        (`audience`: this executor's name; `seen`: grant ids used already, see `cosigner.grants`)."""
        flow = _core.verify_grant(
            self.config, self.keys, grant, parameters, tool_name, tool_call_id, audience, seen
        )
        return await drive_async(flow, self._send)

    def _gated(
        self, fn: Callable[..., Any], options: _gate.Options, signature: inspect.Signature
    ) -> Callable[..., Any]:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(
                f"AsyncCosigner.gate needs an async function and {fn.__name__} is not; "
                "gate it with Cosigner.gate (the blocking client) instead"
            )
        flow = self._flow(fn, options, signature)

        @functools.wraps(fn)
        async def run(*a: Any, **kw: Any) -> Any:
            return await drive_async(flow(*a, **kw), self._send)

        return run

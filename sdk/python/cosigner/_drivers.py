"""Where the SDK's flows meet I/O: one blocking driver, one asyncio driver, and what both clients hold.

A driver runs a flow (`cosigner._core`) to its end: it sends each `Send` with the client's
httpx client, sleeps each `Pause`, runs each `Body`, and hands the outcome back to the flow.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlencode

import httpx

from cosigner import _core, _gate, _http
from cosigner.keys import KeyCache
from cosigner.surfaces import Surface

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def drive(flow: _core.Flow[T], send: Callable[[_core.Send], _http.Response]) -> T:
    """Run `flow` to its end with blocking calls; its value, or the exception it ends with."""
    reply: Any = None
    failure: BaseException | None = None
    while True:
        try:
            step = flow.send(reply) if failure is None else flow.throw(failure)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        reply = failure = None
        if isinstance(step, _core.Send):
            try:
                reply = send(step)
            except httpx.TransportError as exc:
                failure = exc
        elif isinstance(step, _core.Pause):
            time.sleep(step.seconds)
        else:
            try:
                reply = step.fn(*step.args, **step.kwargs)
            except Exception as exc:
                failure = exc


async def drive_async(flow: _core.Flow[T], send: Callable[[_core.Send], Awaitable[_http.Response]]) -> T:
    """Run `flow` to its end with `await`; its value, or the exception it ends with."""
    reply: Any = None
    failure: BaseException | None = None
    while True:
        try:
            step = flow.send(reply) if failure is None else flow.throw(failure)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        reply = failure = None
        if isinstance(step, _core.Send):
            try:
                reply = await send(step)
            except httpx.TransportError as exc:
                failure = exc
        elif isinstance(step, _core.Pause):
            await asyncio.sleep(step.seconds)
        else:
            try:
                reply = await step.fn(*step.args, **step.kwargs)
            except Exception as exc:
                failure = exc


MAX_URLS = 256


def arguments(step: _core.Send) -> dict[str, Any]:
    """The keyword arguments of `httpx.Client.request` (or AsyncClient's) for `step`, but the URL."""
    return {"content": step.content, "headers": step.headers, "timeout": step.timeout}


class Shell:
    """What `Cosigner` and `AsyncCosigner` hold alike: configuration, execution, key cache, gate."""

    def __init__(
        self, url: str | None, api_key: str | None, execution_id: str | None, timeout: float, retry_for: float
    ) -> None:
        self.config = _http.configure(url, api_key, timeout, retry_for)
        self.execution_id = execution_id
        self.keys = KeyCache()
        self._urls: dict[str, httpx.URL] = {}

    def _url(self, step: _core.Send) -> httpx.URL:
        """The absolute URL of `step`, query included.

        Built here once, not merged with the client's base URL by httpx at each request,
        which parses the path and then the whole URL again (most of a request's own CPU on
        loopback). Kept for repeated paths (`/v1/approvals`, a long-poll reconnecting).
        """
        path = step.path if not step.params else f"{step.path}?{urlencode(step.params)}"
        url = self._urls.get(path)
        if url is None:
            if len(self._urls) >= MAX_URLS:
                self._urls.clear()
            url = self._urls[path] = httpx.URL(self.config.url + path)
        return url

    def gate(
        self,
        *,
        surface: Surface | None = None,
        tool_name: str | None = None,
        execution_id: str | None = None,
        reason: str | None = None,
        timeout_seconds: int | None = None,
        allow_edits: bool = False,
    ) -> Callable[[F], F]:
        """Decorate a tool: its body runs only once Cosigner approved exactly these arguments.

        With `allow_edits`, the request says the call may be edited (`acceptsEdits`, with the
        arguments' JSON Schema from the signature): an approver may change the arguments the
        policy marks `editable`, and the body then runs once, with exactly the edited ones."""

        def wrap(fn: F) -> F:
            schema = _gate.schema_of(fn) if allow_edits else None
            options = _gate.Options(
                surface, tool_name, execution_id, reason, timeout_seconds, allow_edits, schema
            )
            return self._gated(fn, options, inspect.signature(fn))  # type: ignore[return-value]

        return wrap

    def _gated(
        self, fn: Callable[..., Any], options: _gate.Options, signature: inspect.Signature
    ) -> Callable[..., Any]:
        raise NotImplementedError

    def _flow(
        self, fn: Callable[..., Any], options: _gate.Options, signature: inspect.Signature
    ) -> Callable[..., _core.Flow[Any]]:
        """The flow of one call of the gated `fn`."""

        def flow(*a: Any, **kw: Any) -> _core.Flow[Any]:
            return _core.gated_call(self.config, self.keys, fn, signature, options, self.execution_id, a, kw)

        return flow

"""Result reports sent after the call returned, off its path: queued, sent once.

The framework adapters report what an executed call returned (`POST /v1/approvals/{id}/result`)
without making the model wait for the answer.

Where the client holds an idle kept-alive connection (a plain-http Cosigner), a report of
up to `AT_ONCE_MAX` bytes is written on it at once, on the caller's thread: the idle
socket takes it whole without waiting. Its answer is read later, on a caller's thread
again, once it has arrived: at the next report, at `flush()` and when the client closes.
No thread is woken for it. A worker thread would get Python's interpreter lock only when
the caller next blocks, which is on its next request to Cosigner, so the report and that
request would reach Cosigner together; written at once, the report is done before the
agent's next call.

Otherwise, and for an answer that calls for another attempt (Cosigner unreachable or
restarting), one worker thread sends the report with the client's own retries (a report
that may have reached Cosigner is not sent again). The worker is not a daemon, and the
process's exit reads the answers still owed, so a process that ends sends the queued
reports first; only a killed process loses them. A report that cannot be sent (Cosigner
refused it, or stayed unreachable for `retry_for`) is logged, as a report sent on the
call's path is.
"""

from __future__ import annotations

import atexit
import contextvars
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import httpx

from cosigner import _core, _gate, _http
from cosigner._drivers import drive
from cosigner._keepalive import Started

Sender = Callable[[_core.Send], _http.Response]
Starter = Callable[[_core.Send], Started | None]
"""Writes a request at once on an idle connection; None when none could take it."""
Answer = _http.Response | httpx.TransportError
AT_ONCE_MAX = 32 * 1024
"""The largest report written at once: an idle socket takes it whole without waiting (its
send buffer holds far more); a larger one, which might wait for Cosigner to read, goes to
the worker."""


@dataclass(frozen=True)
class _Owed:
    """A report written at once whose answer is still to be read."""

    approval_id: str
    request: _core.Send
    started: Started
    future: Future[None]
    context: contextvars.Context


class Outbox:
    """Reports queued for one client: written at once where a kept-alive connection is idle,
    else sent on a worker thread started on first use."""

    def __init__(
        self, config: _http.Config, sender: Callable[[], Sender], starter: Starter | None = None
    ) -> None:
        self.config = config
        self._sender = sender
        self._starter = starter
        self._lock = threading.Lock()
        self._worker: ThreadPoolExecutor | None = None
        self._pending: set[Future[None]] = set()
        self._owed: list[_Owed] = []
        self._closed = False
        _OPEN.add(self)

    def put(self, approval_id: str, result: Any, error: str | None) -> Future[None]:
        """Queue the report of an executed call; returns at once, its future done once it was
        recorded or logged. The body is built now, so a result changed later is not what is sent."""
        # Built in the caller's context, so the report carries its trace (`traceparent`).
        request = _core.report_request(self.config, approval_id, _http.result_body(result, error))
        future: Future[None] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the Cosigner client is closed: its reports can no longer be sent")
            self._pending.add(future)
            started = self._start(request)
            if started is not None:
                self._owed.append(_Owed(approval_id, request, started, future, contextvars.copy_context()))
        future.add_done_callback(self._done)
        if started is None:
            self._to_worker(approval_id, request, None, future, contextvars.copy_context())
        self._read_answers(0.0)
        return future

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every report queued so far was sent (or logged); False if `timeout` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._read_answers(timeout)
        with self._lock:
            pending = list(self._pending)
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        return not wait(pending, left).not_done

    def close(self) -> None:
        """Send what is queued, then stop the worker; later reports are refused."""
        with self._lock:
            self._closed = True
        self._read_answers(None)
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.shutdown(wait=True)
        _OPEN.discard(self)

    def _start(self, request: _core.Send) -> Started | None:
        if self._starter is None or len(request.content or b"") > AT_ONCE_MAX:
            return None
        try:
            return self._starter(request)
        except Exception:  # nothing was written: the worker sends it
            return None

    def _read_answers(self, timeout: float | None, *, inline: bool = False) -> None:
        """Read the answers owed that arrive within `timeout` (0: those already here; None:
        every one), in the order the reports were written, and settle their reports; one
        to send again goes to the worker (or, `inline`, is sent on this thread)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                if not self._owed:
                    return
                owed = self._owed[0]
            if deadline is None:  # every one: `finish` below waits up to the read timeout
                owed.started.arrived(owed.started.read_timeout)
            elif not owed.started.arrived(max(0.0, deadline - time.monotonic())):
                return
            with self._lock:
                if not self._owed or self._owed[0] is not owed:
                    continue  # another thread took it
                self._owed.pop(0)
            reply: Answer
            try:
                status, headers, content = owed.started.finish_raw()
            except httpx.TransportError as exc:
                reply = exc
            else:
                if status < 400:  # recorded (as `_http.error_of` reads it): nothing more to do
                    owed.future.set_result(None)
                    continue
                reply = _http.Reply(status, headers, content)
            if inline or (not isinstance(reply, httpx.TransportError) and not _http.retryable(reply)):
                # Recorded, or refused for good: settled here, with nothing left to wait for.
                owed.context.run(self._send, owed.approval_id, owed.request, reply, owed.future)
            else:
                self._to_worker(owed.approval_id, owed.request, reply, owed.future, owed.context)

    def _to_worker(
        self,
        approval_id: str,
        request: _core.Send,
        first: Answer | None,
        future: Future[None],
        context: contextvars.Context,
    ) -> None:
        with self._lock:
            if self._worker is None:
                self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cosigner-reports")
            worker = self._worker
        worker.submit(context.run, self._send, approval_id, request, first, future)

    def _send(
        self, approval_id: str, request: _core.Send, first: Answer | None, future: Future[None]
    ) -> None:
        """Drive the report's flow to its end; `first` is the answer to an attempt already made."""
        sender = self._sender()

        def send(step: _core.Send) -> _http.Response:
            nonlocal first
            if first is None:
                return sender(step)
            reply, first = first, None
            if isinstance(reply, httpx.TransportError):
                raise reply
            return reply

        try:
            drive(_core.send_report(self.config, request), send)
        except Exception as exc:  # the call already ran: a report that failed is logged, not raised
            _gate.log_unreported(approval_id, exc)
        finally:
            future.set_result(None)

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._pending.discard(future)


_OPEN: weakref.WeakSet[Outbox] = weakref.WeakSet()


@atexit.register
def _read_owed_answers() -> None:
    """At exit, read the answers still owed; a report to send again is sent on this thread
    (the worker threads have stopped by then)."""
    for outbox in list(_OPEN):
        outbox._read_answers(None, inline=True)

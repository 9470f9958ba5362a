"""Result reports sent after the call returned, off its path: queued, sent in order, once.

The framework adapters report what an executed call returned (`POST /v1/approvals/{id}/result`)
without making the model wait for the answer: the report is queued and one worker thread
sends it with the client's own retries (a report that may have reached Cosigner is not sent
again). The worker is not a daemon, so a process that ends sends the queued reports first;
only a killed process loses them. `flush()` waits for them earlier, and closing the client
flushes. A report that cannot be sent (Cosigner refused it, or stayed unreachable for
`retry_for`) is logged, as a report sent on the call's path is.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import httpx

from cosigner import _core, _gate, _http
from cosigner._drivers import drive

Sender = Callable[[_core.Send], httpx.Response]


class Outbox:
    """Reports queued for one client, sent one at a time on a worker thread started on first use."""

    def __init__(self, config: _http.Config, sender: Callable[[], Sender]) -> None:
        self.config = config
        self._sender = sender
        self._lock = threading.Lock()
        self._worker: ThreadPoolExecutor | None = None
        self._pending: set[Future[None]] = set()
        self._closed = False

    def put(self, approval_id: str, result: Any, error: str | None) -> Future[None]:
        """Queue the report of an executed call; returns at once, its future done once it was
        recorded or logged. The body is built now, so a result changed later is not what is sent."""
        body = _http.result_body(result, error)
        with self._lock:
            if self._closed:
                raise RuntimeError("the Cosigner client is closed: its reports can no longer be sent")
            if self._worker is None:
                self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cosigner-reports")
            # In the caller's context, so the report carries its trace (`traceparent`).
            future = self._worker.submit(contextvars.copy_context().run, self._send, approval_id, body)
            self._pending.add(future)
        future.add_done_callback(self._done)
        return future

    def _send(self, approval_id: str, body: bytes) -> None:
        try:
            drive(_core.send_report(self.config, approval_id, body), self._sender())
        except Exception as exc:  # the call already ran: a report that failed is logged, not raised
            _gate.log_unreported(approval_id, exc)

    def _done(self, future: Future[None]) -> None:
        with self._lock:
            self._pending.discard(future)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every report queued so far was sent (or logged); False if `timeout` passed first."""
        with self._lock:
            pending = list(self._pending)
        return not wait(pending, timeout).not_done

    def close(self) -> None:
        """Send what is queued, then stop the worker; later reports are refused."""
        with self._lock:
            self._closed = True
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.shutdown(wait=True)

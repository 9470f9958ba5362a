"""A scripted HTTP/1.1 server for the SDK's connection tests: it answers each request with the
next bytes of its script (or closes, or stays silent) and records what it received."""

from __future__ import annotations

import json
import socketserver
import threading
from typing import Any

CLOSE = b"<close>"  # close the connection instead of answering
SILENT = b"<silent>"  # read the request, never answer
THEN_CLOSE = b"<then close>"  # answer, then close the connection while it is idle

DECISION = {
    "type": "approval_decided",
    "approvalId": "apv_" + "A" * 20,
    "executionId": "e1",
    "toolCallId": "c1",
    "toolName": "lookup_order",
    "parametersDigest": "sha256:" + "0" * 64,
    "status": "approved",
    "comment": None,
    "grant": "a.b.c",
    "decidedBy": {"kind": "policy", "rule": "tools.lookup_order"},
    "decidedAt": "2026-01-01T00:00:00.000Z",
}


MISSING = json.dumps({"error": {"code": "APPROVAL_NOT_FOUND", "message": "no such approval"}}).encode()
NOT_FOUND = b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n%s" % (len(MISSING), MISSING)


def ok(body: bytes = b"{}", *extra: bytes) -> bytes:
    head = b"".join(h + b"\r\n" for h in extra)
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), head, body)


class Threaded:
    """The scripted server of the blocking tests: a thread per connection, answering from
    the same kind of script, and telling when a request has arrived."""

    def __init__(self, *answers: bytes) -> None:
        self.script = list(answers)
        self.received: list[tuple[int, bytes, bytes]] = []
        self.connections = 0
        self.closed = 0  # connections the server has closed
        self.arrived = threading.Condition()
        state = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                with state.arrived:
                    state.connections += 1
                    number = state.connections
                while True:
                    head = b""
                    while not head.endswith(b"\r\n\r\n"):
                        line = self.rfile.readline()
                        if not line:
                            return
                        head += line
                    length = 0
                    for line in head.split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":", 1)[1])
                    body = self.rfile.read(length)
                    with state.arrived:
                        state.received.append((number, head, body))
                        answer = state.script.pop(0)
                        state.arrived.notify_all()
                    if answer == CLOSE:
                        return
                    if answer == SILENT:
                        self.rfile.read()
                        return
                    if answer.endswith(THEN_CLOSE):
                        self.wfile.write(answer.removesuffix(THEN_CLOSE))
                        return
                    self.wfile.write(answer)
                    if b"Connection: close" in answer:
                        return

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True

            def shutdown_request(self, request: Any) -> None:
                super().shutdown_request(request)
                with state.arrived:
                    state.closed += 1
                    state.arrived.notify_all()

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, count: int) -> None:
        """Return once `count` requests have arrived."""
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.received) >= count, timeout=30)

    def __enter__(self) -> Threaded:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

"""A loopback HTTP server that answers the hook's requests with scripted bodies.

The hook's client must deny on every answer that is not an approval of its own call; the
real Cosigner never sends such answers, so this server does: each request to a path is
answered by the next (status, body) queued for it, and every request is recorded.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from cosigner.digest import parameters_digest
from cosigner.hooks.event import Agent, ToolUse, read_tool_use

APPROVAL = "apv_" + "A" * 20
OTHER_APPROVAL = "apv_" + "B" * 20


@dataclass
class Script:
    """Answers queued per request line start (`POST /v1/approvals`, `GET /v1/approvals/…`)."""

    answers: dict[str, list[tuple[int, bytes]]] = field(default_factory=dict)
    seen: list[tuple[str, str, bytes]] = field(default_factory=list)

    def add(self, request: str, status: int, body: bytes | dict[str, Any]) -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.answers.setdefault(request, []).append((status, raw))

    def answer(self, method: str, path: str) -> tuple[int, bytes]:
        # The longest matching prefix: `POST /v1/approvals/…/cancel` is not `POST /v1/approvals`.
        for prefix in sorted(self.answers, key=len, reverse=True):
            queued = self.answers[prefix]
            if f"{method} {path}".startswith(prefix) and queued:
                return queued.pop(0) if len(queued) > 1 else queued[0]
        return 404, b'{"error": {"code": "NOT_FOUND", "message": "not scripted"}}'


@contextmanager
def scripted_cosigner(script: Script) -> Iterator[str]:
    """Serve `script` on 127.0.0.1; yields the URL."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            script.seen.append((self.command, self.path, body))
            status, raw = script.answer(self.command, self.path)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def use_of(event: dict[str, Any]) -> ToolUse:
    """The tool use the hook reads from `event`."""
    return read_tool_use(json.dumps(event).encode(), Agent.CLAUDE_CODE)


def started(use: ToolUse, **changes: Any) -> dict[str, Any]:
    """A pending `approval_start` for `use`, as Cosigner answers `POST /v1/approvals` (201)."""
    return {
        "type": "approval_start",
        "approvalId": APPROVAL,
        "executionId": use.session_id,
        "toolCallId": use.tool_use_id,
        "toolName": use.tool_name,
        "parameters": use.tool_input,
        "parametersDigest": parameters_digest(use.tool_input),
        "timeout": 290000,
        "startedAt": "2026-12-06T10:00:00.000Z",
        "expiresAt": "2026-12-06T10:04:50.000Z",
        "status": "pending",
        **changes,
    }


def decided(use: ToolUse, status: str = "approved", **changes: Any) -> dict[str, Any]:
    """An `approval_decided` for `use`: by a person on Slack, unless `changes` say otherwise."""
    return {
        "type": "approval_decided",
        "approvalId": APPROVAL,
        "executionId": use.session_id,
        "toolCallId": use.tool_use_id,
        "toolName": use.tool_name,
        "status": status,
        "decidedBy": {"kind": "person", "surface": "slack", "userId": "U0ADMIN"},
        "decidedAt": "2026-12-06T10:01:00.000Z",
        "comment": None,
        "parametersDigest": parameters_digest(use.tool_input),
        "grant": "eyJhbGciOiJFZERTQSJ9.e30.c2ln" if status == "approved" else None,
        **changes,
    }

"""An example `expect` endpoint: the application says whether a handed-off step really happened.

A tool with a `[tools.NAME.handoff]` section is done by a person (here: publishing a change
needs the owner's verification code). When the person presses Done, Cosigner POSTs the
call to the handoff's `expect.url`, signed like callbacks (Standard Webhooks) with the secret in
`expect.secret_env`. This app checks the signature on the raw body first (a forged or stale
call gets 401 and learns nothing), then looks at its own state, never at the person's word:

    {"done": true, "detail": "change chg_1 is live"}      the step happened
    {"done": false, "detail": "chg_1 is not published"}    it did not

Run it next to `cosigner dev` (which expects it on port 8765, see bot/dev/sandbox_policy.toml):

    APP_EXPECT_SECRET=… .venv/bin/python examples/expect_app.py      # then "publish chg_1"
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from cosigner.errors import InvalidSignature
from cosigner.webhooks import verify_request

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
MAX_BODY = 64 * 1024


class ExpectApp:
    """An ASGI app answering Cosigner's expect calls from the set of published changes."""

    def __init__(self, secret: str, now: Callable[[], float] = time.time) -> None:
        self.secret = secret
        self.now = now
        self.published: set[str] = set()
        self.calls: list[dict[str, Any]] = []  # every verified call, for the curious
        self.refused = 0  # calls whose signature did not verify

    def publish(self, change_id: str) -> None:
        """What the person does in the application (with their code): the change goes live."""
        self.published.add(change_id)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] != "POST":
            await _answer(send, 405, {"error": "POST only"})
            return
        body = await _read(receive)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        try:
            if body is None:
                raise InvalidSignature("body over the limit")
            verify_request(body, headers, self.secret, now=self.now())
        except InvalidSignature:
            self.refused += 1
            await _answer(send, 401, {"error": "signature does not verify"})
            return
        call = json.loads(body)
        self.calls.append(call)
        change = str(call.get("parameters", {}).get("changeId", ""))
        if change in self.published:
            await _answer(send, 200, {"done": True, "detail": f"change {change} is live"})
        else:
            await _answer(send, 200, {"done": False, "detail": f"change {change} is not published"})


async def _read(receive: Receive) -> bytes | None:
    chunks, size = [], 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


async def _answer(send: Send, status: int, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def main() -> None:
    """Serve on 127.0.0.1:8765 and read change ids to publish from stdin."""
    import threading

    import uvicorn

    secret = os.environ.get("APP_EXPECT_SECRET")
    if not secret:
        sys.exit("set APP_EXPECT_SECRET to the secret Cosigner signs expect calls with")
    app = ExpectApp(secret)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=8765, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    print("expect endpoint on http://127.0.0.1:8765/ — type a change id to publish it (Ctrl-D ends)")
    for line in sys.stdin:
        if line.strip():
            app.publish(line.strip())
            print(f"published {line.strip()}")


if __name__ == "__main__":
    main()

"""A Slack Web API emulator on loopback, for `cosigner dev` and the tests.

It answers the methods Cosigner calls with Slack's response and error shapes, records every
message, ephemeral and modal, and can be told to fail (`fail_next`) the way Slack does:
429 with `Retry-After`, 5xx, `{"ok": false, "error": ...}`, or slow answers. Point the real
`AsyncWebClient(base_url=emu.api_url)` at it.

It also plays Slack's Socket Mode: `apps.connections.open` hands an app-level token
(`xapp-…`, see `app_tokens`) a WebSocket URL on the same port, and `socket_click` sends a
click there as an `interactive` envelope and waits for its acknowledgement.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from surfaces.loopback import LoopbackServer
from surfaces.slack import emulated_methods, interactions
from surfaces.slack.emulated_methods import OpenedView, Recorded, Workspace
from surfaces.slack.openid_provider import OpenIdProvider


@dataclass
class Fault:
    """How the next calls of one method fail."""

    status: int = 500
    error: str | None = None
    retry_after: int | None = None
    times: int = 1
    delay: float = 0.0


# Slack drops an envelope that is not acknowledged within 3 seconds (and retries it).
SOCKET_ACK_SECONDS = 3.0
APP_TOKEN = "xapp-1-A0EMU-1-emulated"  # the app-level token the emulator accepts by default


@dataclass
class _State:
    messages: list[Recorded] = field(default_factory=list)
    ephemerals: list[Recorded] = field(default_factory=list)
    views: list[OpenedView] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    latest: dict[tuple[str, str], Recorded] = field(default_factory=dict)


class SlackEmulator:
    """A fake Slack Web API with Slack's shapes, faults and a record of what it was sent."""

    def __init__(
        self,
        *,
        team_id: str = "T0EMU",
        enterprise_id: str | None = None,
        app_id: str = "A0EMU",
        bot_user_id: str = "U0BOT",
        client_id: str | None = None,
        client_secret: str | None = None,
        app_tokens: tuple[str, ...] = (APP_TOKEN,),
        bot_tokens: tuple[str, ...] | None = None,
    ) -> None:
        self.team_id, self.enterprise_id, self.app_id = team_id, enterprise_id, app_id
        self.app_tokens = set(app_tokens)
        # None: any bot token (xoxb-…) is the emulated workspace's; else only these are,
        # and any other is refused as Slack refuses a wrong or revoked one (invalid_auth).
        self.bot_tokens = None if bot_tokens is None else set(bot_tokens)
        self.bot_user_id, self.client_id, self.client_secret = bot_user_id, client_id, client_secret
        self.workspaces: dict[str, Workspace] = {}
        self.missing_channels: set[str] = set()
        self.users: dict[str, dict[str, Any]] = {}
        self.triggers: set[str] = set()
        self.strict_triggers = False
        self._faults: dict[str, list[Fault]] = {}
        self._codes: dict[str, Workspace] = {}
        self._dms: dict[str, str] = {}
        self._seq = itertools.count(1)
        self._last_ts = 0.0
        self._state = _State()
        self._loopback: LoopbackServer | None = None
        self.port: int | None = None
        self.responses: list[dict[str, Any]] = []
        self.home_tabs: dict[str, dict[str, Any]] = {}  # views.publish: the latest Home tab per user
        self.home_opens = 0  # app_home_opened events sent, for their event ids
        self.openid = OpenIdProvider(lambda: self.api_url.removesuffix("/api/"), team_id)
        self._tickets: set[str] = set()
        self._sockets: list[WebSocket] = []
        self._connected = asyncio.Event()
        self._acks: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.app = Starlette(
            routes=[
                *self.openid.routes(),
                Route("/api/{method}", self._dispatch, methods=["GET", "POST"]),
                Route("/hooks/{path:path}", self._hook, methods=["POST"]),
                WebSocketRoute("/socket-mode/{ticket}", self._socket),
            ]
        )
        self._methods = emulated_methods.table(self)

    # --- records -------------------------------------------------------------------------

    @property
    def messages(self) -> list[Recorded]:
        """Every `chat.postMessage` and `chat.update`, in order."""
        return self._state.messages

    @property
    def ephemerals(self) -> list[Recorded]:
        """Every `chat.postEphemeral`, in order."""
        return self._state.ephemerals

    @property
    def views(self) -> list[OpenedView]:
        """Every modal opened."""
        return self._state.views

    @property
    def calls(self) -> list[tuple[str, dict[str, Any]]]:
        """Every API call as (method, arguments without the token)."""
        return self._state.calls

    def latest(self, channel: str, ts: str) -> Recorded | None:
        """The message at (channel, ts) as it currently reads, after any updates."""
        return self._state.latest.get((channel, ts))

    def record(self, message: Recorded) -> None:
        """Store a posted or updated message."""
        target = self._state.ephemerals if message.method == "chat.postEphemeral" else self.messages
        target.append(message)
        if message.method != "chat.postEphemeral":
            self._state.latest[(message.channel, message.ts)] = message

    # --- set-up --------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        """Base URL for `AsyncWebClient(base_url=...)`, e.g. `http://127.0.0.1:PORT/api/`."""
        if self.port is None:
            raise RuntimeError("SlackEmulator is not running; use `async with SlackEmulator.running()`")
        return f"http://127.0.0.1:{self.port}/api/"

    def fail_next(
        self,
        method: str,
        *,
        status: int = 500,
        error: str | None = None,
        retry_after: int | None = None,
        times: int = 1,
        delay: float = 0.0,
    ) -> None:
        """Make the next `times` calls of `method` fail (status 200 and no error: just slow)."""
        self._faults.setdefault(method, []).append(Fault(status, error, retry_after, times, delay))

    def issue_oauth_code(
        self,
        team_id: str | None,
        enterprise_id: str | None = None,
        is_enterprise_install: bool = False,
    ) -> str:
        """A one-time code that `oauth.v2.access` exchanges for a bot token of that workspace."""
        code = f"code-{next(self._seq)}"
        self._codes[code] = Workspace(team_id, enterprise_id, is_enterprise_install)
        return code

    def take_code(self, code: str) -> Workspace | None:
        """Consume an OAuth code."""
        return self._codes.pop(code, None)

    def next_ts(self) -> str:
        """A fresh, strictly increasing message ts shaped like Slack's."""
        now = max(time.time(), self._last_ts + 0.000001)
        self._last_ts = now
        return f"{now:.6f}"

    def dm_channel(self, user_id: str) -> str:
        """The `D…` channel of the app's DM with a user."""
        return self._dms.setdefault(user_id, f"D{len(self._dms) + 1:08d}")

    def workspace_for(self, token: str | None) -> Workspace | None:
        """The workspace a token belongs to, or None when Slack would say `invalid_auth`."""
        if token is None:
            return None
        if token in self.workspaces:
            return self.workspaces[token]
        if token.startswith("xoxb-") and (self.bot_tokens is None or token in self.bot_tokens):
            return Workspace(self.team_id, self.enterprise_id)
        return None

    async def click(self, http: httpx.AsyncClient, **options: Any) -> httpx.Response:
        """Click a button on a recorded message with a really signed request."""
        return await interactions.click(self, http, **options)

    async def click_in_view(self, http: httpx.AsyncClient, **options: Any) -> httpx.Response:
        """Press a button inside an opened modal, really signed (`interactions.click_in_view`)."""
        return await interactions.click_in_view(self, http, **options)

    async def submit_view(self, http: httpx.AsyncClient, **options: Any) -> httpx.Response:
        """Submit an opened modal with a really signed request (`interactions.submit_view`)."""
        return await interactions.submit_view(self, http, **options)

    async def open_home(self, http: httpx.AsyncClient, **options: Any) -> httpx.Response:
        """Open the Home tab as a user, really signed (`interactions.open_home`)."""
        return await interactions.open_home(self, http, **options)

    # --- Socket Mode ---------------------------------------------------------------------

    def socket_url(self) -> str:
        """A one-time `ws://` URL, as `apps.connections.open` returns (`wss://` at Slack)."""
        ticket = uuid.uuid4().hex
        self._tickets.add(ticket)
        return self.api_url.replace("http://", "ws://").replace("/api/", f"/socket-mode/{ticket}")

    @property
    def socket_connections(self) -> int:
        """How many Socket Mode connections are open now."""
        return len(self._sockets)

    async def wait_connected(self, seconds: float = 5.0) -> None:
        """Wait until an app holds a Socket Mode connection."""
        await asyncio.wait_for(self._connected.wait(), seconds)

    async def push(
        self, payload: dict[str, Any], *, kind: str = "interactive", seconds: float = SOCKET_ACK_SECONDS
    ) -> dict[str, Any]:
        """Send one envelope over Socket Mode and return its acknowledgement.

        Raises `TimeoutError` when the app does not acknowledge in time (Slack would then
        show the user an error and retry), `LookupError` when no app is connected.
        """
        if not self._sockets:
            raise LookupError("no app holds a Socket Mode connection to the emulator")
        envelope_id = str(uuid.uuid4())
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._acks[envelope_id] = waiter
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": kind != "events_api",
            "retry_attempt": 0,
            "retry_reason": "",
        }
        try:
            await self._sockets[-1].send_text(json.dumps(envelope))
            return await asyncio.wait_for(waiter, seconds)
        finally:
            self._acks.pop(envelope_id, None)

    async def socket_click(self, *, channel: str, ts: str, action_id: str, **fields: Any) -> dict[str, Any]:
        """Click a button on a recorded message through Socket Mode; returns the ack."""
        payload = interactions.click_payload(self, channel=channel, ts=ts, action_id=action_id, **fields)
        return await self.push(payload)

    async def _socket(self, websocket: WebSocket) -> None:
        ticket = websocket.path_params["ticket"]
        if ticket not in self._tickets:
            await websocket.close(code=4001)  # a URL not issued, or used already
            return
        self._tickets.discard(ticket)
        await websocket.accept()
        self._sockets.append(websocket)
        self._connected.set()
        hello = {
            "type": "hello",
            "num_connections": len(self._sockets),
            "connection_info": {"app_id": self.app_id},
            "debug_info": {"host": "emulated", "approximate_connection_time": 18060},
        }
        try:
            await websocket.send_text(json.dumps(hello))
            while True:
                ack = json.loads(await websocket.receive_text())
                waiter = self._acks.get(ack.get("envelope_id", "")) if isinstance(ack, dict) else None
                if waiter is not None and not waiter.done():
                    waiter.set_result(ack)
        except WebSocketDisconnect:
            pass
        finally:
            self._sockets.remove(websocket)
            if not self._sockets:
                self._connected.clear()

    # --- serving -------------------------------------------------------------------------

    @classmethod
    @contextlib.asynccontextmanager
    async def running(cls, **options: Any) -> AsyncIterator[SlackEmulator]:
        """Serve an emulator on a free loopback port for the duration of the block."""
        emulator = cls(**options)
        await emulator.start()
        try:
            yield emulator
        finally:
            await emulator.stop()

    async def start(self) -> None:
        """Bind a free loopback port (port 0) and serve until `stop()`."""
        self._loopback = LoopbackServer(self.app, "Slack emulator", ws="websockets-sansio")
        self.port = await self._loopback.start()

    async def stop(self) -> None:
        """Stop serving and release the port."""
        for websocket in list(self._sockets):
            with contextlib.suppress(RuntimeError, WebSocketDisconnect):
                await websocket.close(code=1001)
        if self._loopback is not None:
            await self._loopback.stop()
        self._loopback = None

    @property
    def response_url(self) -> str:
        """A `response_url` for interaction payloads; what is posted there lands in `responses`."""
        return self.api_url.replace("/api/", f"/hooks/actions/{next(self._seq)}")

    async def _hook(self, request: Request) -> PlainTextResponse:
        body = json.loads(await request.body() or b"{}")
        self.responses.append(body if isinstance(body, dict) else {"body": body})
        return PlainTextResponse("ok")

    async def _dispatch(self, request: Request) -> JSONResponse:
        method = request.path_params["method"]
        args, token = await _arguments(request)
        self.calls.append((method, {k: v for k, v in args.items() if k != "client_secret"}))
        faults = self._faults.get(method)
        if faults:
            fault = faults[0]
            fault.times -= 1
            if fault.times <= 0:
                faults.pop(0)
            if fault.delay:
                await asyncio.sleep(fault.delay)
            if fault.status == 429:
                headers = {"Retry-After": str(fault.retry_after or 1)}
                return JSONResponse({"ok": False, "error": "ratelimited"}, 429, headers=headers)
            if fault.status != 200 or fault.error:
                error = fault.error or "internal_error"
                return JSONResponse({"ok": False, "error": error}, fault.status)
        handler = self._methods.get(method)
        if handler is None:
            return JSONResponse({"ok": False, "error": "unknown_method"}, 404)
        return JSONResponse(handler(args, token))


async def _arguments(request: Request) -> tuple[dict[str, Any], str | None]:
    args: dict[str, Any] = dict(request.query_params)
    if request.method == "POST":
        if request.headers.get("content-type", "").startswith("application/json"):
            body = json.loads(await request.body() or b"{}")
            if isinstance(body, dict):
                args.update(body)
        else:
            args.update(parse_qsl((await request.body()).decode(), keep_blank_values=True))
    token = args.pop("token", None)
    auth = request.headers.get("authorization", "")
    if auth.startswith("Bearer "):
        token = auth.removeprefix("Bearer ")
    elif auth.startswith("Basic "):
        client_id, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
        args.setdefault("client_id", client_id)
        args.setdefault("client_secret", secret)
    return args, token

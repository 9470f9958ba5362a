"""HTTP/1.1 keep-alive clients for the benchmarks, behind one small interface.

    client = make_client("raw" | "aiohttp" | "httpx", base_url, limit=N, timeout=60)
    r = await client.request("POST", "/v1/approvals", json={...}, headers={...})
    r.status, r.body, r.json()
    await client.aclose()

`on_wire` (an asyncio.Event) is set once the request has been handed to the socket, so a
caller can start a long-poll and act only once it is really on its way to the server.

- raw:     a minimal asyncio.Protocol client (one request in flight per connection, no
           pipelining; Content-Length and chunked bodies; `Connection: close` honoured).
           Cheapest by far: the benchmark's client should cost little next to the server.
- aiohttp: aiohttp.ClientSession over a TCPConnector(limit=N).
- httpx:   httpx.AsyncClient (the original client), HTTP/1.1.

Every client raises on connection errors and timeouts; the caller counts those as errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import json as jsonlib
from collections import deque
from typing import Any, Protocol
from urllib.parse import urlsplit

CLIENTS = ("raw", "aiohttp", "httpx")


class Resp:
    """A complete response: status and body bytes."""

    __slots__ = ("body", "status")

    def __init__(self, status: int, body: bytes) -> None:
        self.status = status
        self.body = body

    def json(self) -> Any:
        return jsonlib.loads(self.body)

    @property
    def text(self) -> str:
        return self.body.decode(errors="replace")


class Client(Protocol):
    name: str

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        on_wire: asyncio.Event | None = None,
    ) -> Resp: ...

    async def aclose(self) -> None: ...


def _encode(json: Any, body: bytes, headers: dict[str, str] | None) -> tuple[bytes, dict[str, str]]:
    h = dict(headers or {})
    if json is not None:
        body = jsonlib.dumps(json, separators=(",", ":")).encode()
        h.setdefault("Content-Type", "application/json")
    return body, h


# --- raw asyncio ----------------------------------------------------------------------------


class ProtocolError(Exception):
    """The server answered something this minimal client cannot read."""


def _chunked(buf: bytearray) -> tuple[bytes, int] | None:
    """(body, bytes consumed) of a complete chunked body at the start of `buf`, else None."""
    pos = 0
    parts: list[bytes] = []
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return None
        size = int(bytes(buf[pos:eol]).split(b";", 1)[0].strip() or b"0", 16)
        start = eol + 2
        if size == 0:  # trailers end with an empty line
            end = buf.find(b"\r\n\r\n", eol)
            if end < 0:
                return None
            return b"".join(parts), end + 4
        if len(buf) < start + size + 2:
            return None
        parts.append(bytes(buf[start : start + size]))
        pos = start + size + 2


class _Conn(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.waiter: asyncio.Future[Resp] | None = None
        self.head: tuple[int, int | None, bool, bool] | None = None
        self.usable = True  # False once closed, broken or told `Connection: close`

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.usable = False
        w, self.waiter = self.waiter, None
        if w is not None and not w.done():
            w.set_exception(ConnectionError(f"connection closed by the server ({exc})"))

    def eof_received(self) -> bool | None:
        self.usable = False
        return None

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if self.waiter is None:
            self._fail(ProtocolError("data with no request in flight"))
            return
        try:
            self._parse()
        except Exception as exc:  # a malformed response breaks this connection only
            self._fail(exc)

    def _parse(self) -> None:
        if self.head is None:
            i = self.buf.find(b"\r\n\r\n")
            if i < 0:
                return
            lines = bytes(self.buf[:i]).split(b"\r\n")
            del self.buf[: i + 4]
            status = int(lines[0].split(b" ", 2)[1])
            length: int | None = None
            chunked = close = False
            for ln in lines[1:]:
                k, _, v = ln.partition(b":")
                k = k.strip().lower()
                if k == b"content-length":
                    length = int(v)
                elif k == b"transfer-encoding":
                    chunked = b"chunked" in v.lower()
                elif k == b"connection":
                    close = b"close" in v.lower()
            if length is None and not chunked:
                if status >= 200 and status not in (204, 304):
                    raise ProtocolError("response without Content-Length or chunked body")
                length = 0
            self.head = (status, length, chunked, close)
        status, length, chunked, close = self.head
        if chunked:
            got = _chunked(self.buf)
            if got is None:
                return
            body, used = got
        else:
            assert length is not None
            if len(self.buf) < length:
                return
            body, used = bytes(self.buf[:length]), length
        del self.buf[:used]
        self.head = None
        if status < 200:  # 1xx: an interim answer, the real one follows
            return
        if close or self.buf:
            self.usable = False
        w, self.waiter = self.waiter, None
        if w is not None and not w.done():
            w.set_result(Resp(status, body))

    def _fail(self, exc: Exception) -> None:
        self.usable = False
        w, self.waiter = self.waiter, None
        if w is not None and not w.done():
            w.set_exception(exc)
        if self.transport is not None:
            self.transport.close()


def _expire(fut: asyncio.Future[Resp], seconds: float) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError(f"no response within {seconds:g} s"))


class RawClient:
    """A pool of at most `limit` keep-alive connections to one host."""

    name = "raw"

    def __init__(self, base_url: str, *, limit: int, timeout: float = 60.0) -> None:
        u = urlsplit(base_url)
        if u.scheme != "http" or not u.hostname:
            raise ValueError("the raw client speaks plain http:// only")
        self.host, self.port = u.hostname, u.port or 80
        self.prefix = u.path.rstrip("/")
        self.host_header = f"{self.host}:{self.port}"
        self.limit, self.timeout = limit, timeout
        self.idle: list[_Conn] = []
        self.count = 0
        self.waiters: deque[asyncio.Future[_Conn | None]] = deque()
        self.all: set[_Conn] = set()

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(loop.create_connection(_Conn, self.host, self.port), 10.0)
        except BaseException:
            self.count -= 1
            self._wake(None)
            raise
        self.all.add(conn)
        return conn

    async def _acquire(self) -> _Conn:
        while self.idle:
            conn = self.idle.pop()
            if conn.usable:
                return conn
            self._discard(conn)
        if self.count < self.limit:
            self.count += 1
            return await self._connect()
        w: asyncio.Future[_Conn | None] = asyncio.get_running_loop().create_future()
        self.waiters.append(w)
        try:
            got = await w
        except asyncio.CancelledError:
            if w.done() and not w.cancelled() and w.result() is not None:
                self._release(w.result(), True)  # type: ignore[arg-type]
            raise
        if got is None:  # a slot was freed: open a connection in it
            self.count += 1
            return await self._connect()
        return got

    def _wake(self, conn: _Conn | None) -> bool:
        while self.waiters:
            w = self.waiters.popleft()
            if not w.done():
                w.set_result(conn)
                return True
        return False

    def _discard(self, conn: _Conn) -> None:
        self.all.discard(conn)
        if conn.transport is not None:
            conn.transport.close()
        self.count -= 1

    def _release(self, conn: _Conn, ok: bool) -> None:
        if ok and conn.usable:
            if not self._wake(conn):
                self.idle.append(conn)
            return
        conn.usable = False
        self._discard(conn)
        self._wake(None)

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        on_wire: asyncio.Event | None = None,
    ) -> Resp:
        body, h = _encode(json, body, headers)
        lines = [
            f"{method} {self.prefix}{path} HTTP/1.1",
            f"Host: {self.host_header}",
            f"Content-Length: {len(body)}",
        ]
        lines.extend(f"{k}: {v}" for k, v in h.items())
        data = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
        conn = await self._acquire()
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Resp] = loop.create_future()
        conn.waiter = fut
        ok = False
        timer = loop.call_later(self.timeout, _expire, fut, self.timeout)
        try:
            if not conn.usable or conn.transport is None or conn.transport.is_closing():
                raise ConnectionError("connection closed before the request was sent")
            conn.transport.write(data)
            if on_wire is not None:
                on_wire.set()
            resp = await fut
            ok = True
            return resp
        finally:
            timer.cancel()
            if not ok:
                conn.waiter = None
            self._release(conn, ok)

    async def aclose(self) -> None:
        for w in self.waiters:
            if not w.done():
                w.cancel()
        for conn in list(self.all):
            if conn.transport is not None:
                conn.transport.close()
        self.all.clear()
        self.idle.clear()
        self.waiters.clear()
        self.count = 0
        await asyncio.sleep(0)


# --- aiohttp --------------------------------------------------------------------------------


class AiohttpClient:
    """aiohttp.ClientSession with a TCPConnector(limit=N); `on_wire` via a trace hook."""

    name = "aiohttp"

    def __init__(self, base_url: str, *, limit: int, timeout: float = 60.0) -> None:
        import aiohttp

        trace = aiohttp.TraceConfig()
        trace.on_request_headers_sent.append(self._headers_sent)
        self.session = aiohttp.ClientSession(
            base_url=base_url.rstrip("/") + "/",
            connector=aiohttp.TCPConnector(limit=limit, limit_per_host=limit),
            timeout=aiohttp.ClientTimeout(total=timeout, connect=10.0),
            trace_configs=[trace],
            auto_decompress=False,
        )

    @staticmethod
    async def _headers_sent(session: Any, ctx: Any, params: Any) -> None:
        event = ctx.trace_request_ctx
        if isinstance(event, asyncio.Event):
            event.set()

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        on_wire: asyncio.Event | None = None,
    ) -> Resp:
        body, h = _encode(json, body, headers)
        async with self.session.request(
            method, path.lstrip("/"), data=body or None, headers=h, trace_request_ctx=on_wire
        ) as r:
            return Resp(r.status, await r.read())

    async def aclose(self) -> None:
        await self.session.close()


# --- httpx ----------------------------------------------------------------------------------


class HttpxClient:
    """httpx.AsyncClient over HTTP/1.1; `on_wire` via httpcore's trace extension."""

    name = "httpx"

    def __init__(self, base_url: str, *, limit: int, timeout: float = 60.0) -> None:
        import httpx

        self.client = httpx.AsyncClient(
            base_url=base_url,
            http1=True,
            http2=False,
            timeout=httpx.Timeout(timeout, connect=10.0, pool=timeout),
            limits=httpx.Limits(max_connections=limit, max_keepalive_connections=limit),
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        on_wire: asyncio.Event | None = None,
    ) -> Resp:
        body, h = _encode(json, body, headers)
        extensions: dict[str, Any] = {}
        if on_wire is not None:

            async def trace(event: str, info: dict[str, Any]) -> None:
                if event == "http11.send_request_body.complete":
                    on_wire.set()

            extensions["trace"] = trace
        r = await self.client.request(method, path, content=body or None, headers=h, extensions=extensions)
        return Resp(r.status_code, r.content)

    async def aclose(self) -> None:
        await self.client.aclose()


def make_client(kind: str, base_url: str, *, limit: int, timeout: float = 60.0) -> Client:
    if kind == "raw":
        return RawClient(base_url, limit=limit, timeout=timeout)
    if kind == "aiohttp":
        return AiohttpClient(base_url, limit=limit, timeout=timeout)
    if kind == "httpx":
        return HttpxClient(base_url, limit=limit, timeout=timeout)
    raise ValueError(f"unknown client {kind!r}; one of {', '.join(CLIENTS)}")


def client_version(kind: str) -> str:
    with contextlib.suppress(Exception):
        if kind == "aiohttp":
            import aiohttp

            return f"aiohttp {aiohttp.__version__}"
        if kind == "httpx":
            import httpx

            return f"httpx {httpx.__version__}"
    return "raw asyncio (bench/httpclients.py)"

"""The SDK's kept-alive HTTP/1.1 connections to Cosigner, against a scripted server.

The server answers each request with the next bytes of its script (or closes, or stays
silent), and records what it received and on which connection; the gateway tests
(test_mcp_gateway*.py) run the same client against the real Cosigner. Every test runs with
both answer readers: httptools (where installed, as here) and h11 (where it is not).
"""

from __future__ import annotations

import asyncio
import json
import select
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx
import pytest

from cosigner import AsyncCosigner, Cosigner, DashboardSurface, _keepalive
from cosigner._core import Send
from cosigner._keepalive import EXPIRY, BlockingKeepAlive, KeepAlive, Origin, _readable, request_bytes
from cosigner.errors import ApprovalNotFound
from tests.sdk.scripted import CLOSE, DECISION, NOT_FOUND, SILENT, THEN_CLOSE, Threaded, ok

HOST = [(b"Host", b"cosigner.test")]


@pytest.fixture(autouse=True, params=["httptools", "h11"])
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test once with each way of reading answers."""
    kind = str(request.param)
    monkeypatch.setattr(
        _keepalive, "Reading", _keepalive._FastReading if kind == "httptools" else _keepalive._H11Reading
    )
    return kind


@dataclass
class Scripted:
    """What the scripted server received: (connection number, request head, body)."""

    port: int
    script: list[bytes]
    received: list[tuple[int, bytes, bytes]] = field(default_factory=list)
    connections: int = 0


@asynccontextmanager
async def scripted(*answers: bytes) -> AsyncIterator[Scripted]:
    state = Scripted(0, list(answers))

    handlers: set[asyncio.Task[None]] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.add(asyncio.current_task())  # type: ignore[arg-type]
        state.connections += 1
        number = state.connections
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length)
                state.received.append((number, head, body))
                answer = state.script.pop(0)
                if answer == CLOSE:
                    return
                if answer == SILENT:
                    await reader.read()  # until the client gives up and closes
                    return
                writer.write(answer)
                await writer.drain()
                if b"Connection: close" in answer:
                    return
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    state.port = server.sockets[0].getsockname()[1]
    try:
        yield state
    finally:
        server.close()
        for handler in handlers:
            handler.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)


async def test_connections_are_kept_alive_and_reused() -> None:
    async with scripted(ok(b"one"), ok(b"two")) as server:
        pool = KeepAlive("127.0.0.1", server.port)
        first = await pool.request("GET", "/a", HOST)
        second = await pool.request("GET", "/b", HOST)
        pool.close()
    assert (first[0], first[2], second[2]) == (200, b"one", b"two")
    assert [n for n, _, _ in server.received] == [1, 1] and server.connections == 1


async def test_chunked_interim_and_close_delimited_answers_are_read_whole() -> None:
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    trailers = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nf\r\n0\r\nX-T: 1\r\n\r\n"
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"after")
    until_close = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nto the end"
    async with scripted(chunked, trailers, interim, until_close, ok(b"fresh")) as server:
        pool = KeepAlive("127.0.0.1", server.port)
        bodies = [(await pool.request("GET", "/", HOST))[2] for _ in range(5)]
        pool.close()
    assert bodies == [b"abcde", b"f", b"after", b"to the end", b"fresh"]
    # Kept alive through the chunked and interim answers; a new connection after `close`.
    assert [n for n, _, _ in server.received] == [1, 1, 1, 1, 2]


async def test_a_connection_the_server_closed_while_idle_is_not_reused() -> None:
    async with scripted(ok(b"one", b"Connection: keep-alive"), CLOSE, ok(b"two")) as server:
        pool = KeepAlive("127.0.0.1", server.port)
        await pool.request("GET", "/", HOST)
        with pytest.raises(httpx.RemoteProtocolError):
            await pool.request("GET", "/", HOST)  # closed with the request in flight
        status, _, body = await pool.request("GET", "/", HOST)
        pool.close()
    assert (status, body) == (200, b"two") and server.connections == 2


async def test_failures_are_httpx_transport_errors_and_drop_the_connection() -> None:
    async with scripted(SILENT, b"HTTP/1.1 abc\r\n\r\n", ok(b"fine")) as server:
        pool = KeepAlive("127.0.0.1", server.port)
        with pytest.raises(httpx.ReadTimeout):
            await pool.request("GET", "/", HOST, read_timeout=0.01)
        with pytest.raises(httpx.RemoteProtocolError, match="malformed"):
            await pool.request("GET", "/", HOST)
        assert (await pool.request("GET", "/", HOST))[2] == b"fine"
        pool.close()
    assert server.connections == 3
    port = server.port  # nothing listens there any more
    with pytest.raises(httpx.ConnectError):
        await KeepAlive("127.0.0.1", port).request("GET", "/", HOST)


async def test_requests_beyond_max_connections_wait_for_one_and_a_cancelled_wait_passes_its_turn() -> None:
    async with scripted(ok(b"1"), ok(b"2"), ok(b"3")) as server:
        pool = KeepAlive("127.0.0.1", server.port, max_connections=1)
        first = asyncio.ensure_future(pool.request("GET", "/1", HOST))
        cancelled = asyncio.ensure_future(pool.request("GET", "/x", HOST))
        third = asyncio.ensure_future(pool.request("GET", "/3", HOST))
        await asyncio.sleep(0)
        cancelled.cancel()
        results = [(await first)[2], (await third)[2]]
        assert (await pool.request("GET", "/4", HOST))[2] == b"3"
        pool.close()
    assert results == [b"1", b"2"] and server.connections == 1
    assert cancelled.cancelled()


async def test_the_async_client_sends_its_requests_over_kept_alive_connections() -> None:
    async with scripted(ok(json.dumps(DECISION).encode()), NOT_FOUND) as server:
        async with AsyncCosigner(url=f"http://127.0.0.1:{server.port}/base", api_key="csk_k") as cosigner:
            got = await cosigner.request_approval(
                execution_id="e1",
                tool_call_id="c1",
                tool_name="lookup_order",
                parameters={"orderId": "ord_1"},
                surface=DashboardSurface(user_id="u_1"),
            )
            with pytest.raises(ApprovalNotFound, match="no such approval"):
                await cosigner.get("apr 2")
    assert got.approved and got.approval_id == DECISION["approvalId"]
    (_, post, body), (_, get, _) = server.received
    assert post.startswith(b"POST /base/v1/approvals HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{server.port}\r\n".encode() in post
    assert b"Authorization: Bearer csk_k\r\n" in post and b"Content-Type: application/json\r\n" in post
    assert json.loads(body)["parameters"] == {"orderId": "ord_1"}
    assert get.startswith(b"GET /base/v1/approvals/apr%202 HTTP/1.1\r\n") and b"Content-Length" not in get
    assert server.connections == 1


async def test_both_clients_keep_httpx_for_tls_a_proxy_or_a_given_transport(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert AsyncCosigner(url="http://127.0.0.1:8000", api_key="k")._keepalive is not None
    assert AsyncCosigner(url="https://cosigner.example", api_key="k")._keepalive is None
    given = httpx.MockTransport(lambda request: httpx.Response(200))
    assert AsyncCosigner(url="http://127.0.0.1:8000", api_key="k", transport=given)._keepalive is None
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.internal:3128")
    assert AsyncCosigner(url="http://cosigner.internal:8000", api_key="k")._keepalive is None
    monkeypatch.setenv("NO_PROXY", "cosigner.internal")
    assert AsyncCosigner(url="http://cosigner.internal:8000", api_key="k")._keepalive is not None


def test_a_key_with_a_line_break_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(ValueError, match="line break"):
        AsyncCosigner(url="http://127.0.0.1:8000", api_key="csk_k\r\nX-Evil: 1")


def step(path: str = "/", *, method: str = "GET", content: bytes | None = None, timeout: float = 5.0) -> Send:
    return Send(method, path, content, None, None, timeout)


def pool_for(port: int, clock: Callable[[], float] = time.monotonic) -> BlockingKeepAlive:
    origin = Origin.of(f"http://127.0.0.1:{port}", {"Authorization": "Bearer csk_k"}, None)
    assert origin is not None
    return BlockingKeepAlive(origin, clock=clock)


def test_blocking_connections_are_kept_alive_reused_and_read_whole() -> None:
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"after")
    until_close = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nto the end"
    with Threaded(ok(b"one"), chunked, interim, until_close, ok(b"fresh")) as server:
        pool = pool_for(server.port)
        bodies = [pool.send(step(f"/{i}")).content for i in range(5)]
        pool.close()
    assert bodies == [b"one", b"abcde", b"after", b"to the end", b"fresh"]
    assert [n for n, _, _ in server.received] == [1, 1, 1, 1, 2]
    head = server.received[0][1]
    assert head.startswith(b"GET /0 HTTP/1.1\r\n") and b"Authorization: Bearer csk_k\r\n" in head
    assert f"Host: 127.0.0.1:{server.port}\r\n".encode() in head


def test_a_blocking_connection_closed_while_idle_or_expired_is_not_reused() -> None:
    now = [0.0]
    with Threaded(ok(b"one") + THEN_CLOSE, ok(b"two"), ok(b"three"), ok(b"four")) as server:
        pool = pool_for(server.port, clock=lambda: now[0])
        assert pool.send(step()).content == b"one"
        with server.arrived:
            assert server.arrived.wait_for(lambda: server.closed == 1, timeout=30)
        # Closed by the server while idle: seen before reuse, so nothing fails.
        idle = pool._idle[-1]
        assert idle.sock is not None
        select.select([idle.sock], [], [], 30)  # its end has reached this side
        assert _readable(idle)
        assert pool.send(step()).content == b"two"
        assert pool.send(step()).content == b"three"  # kept alive
        now[0] += EXPIRY  # idle as long as the expiry: dropped, not reused
        assert pool.send(step()).content == b"four"
        pool.close()
    assert [n for n, _, _ in server.received] == [1, 2, 2, 3]


def test_blocking_failures_are_httpx_transport_errors_and_drop_the_connection() -> None:
    with Threaded(SILENT, b"HTTP/1.1 abc\r\n\r\n", CLOSE, ok(b"fine")) as server:
        pool = pool_for(server.port)
        with pytest.raises(httpx.ReadTimeout):
            pool.send(step(timeout=0.01))
        with pytest.raises(httpx.RemoteProtocolError, match="malformed"):
            pool.send(step())
        with pytest.raises(httpx.RemoteProtocolError, match="without an answer"):
            pool.send(step())  # closed with the request in flight
        assert pool.send(step()).content == b"fine"
        pool.close()
    assert server.connections == 4
    with pytest.raises(httpx.ConnectError):
        pool_for(server.port).send(step())


def test_starting_without_an_idle_connection_writes_nothing() -> None:
    with Threaded(ok(b"one"), ok(b"two")) as server:
        pool = pool_for(server.port)
        assert pool.start(step(), connect=False) is None
        assert server.connections == 0
        assert pool.send(step()).content == b"one"
        started = pool.start(step(method="POST", content=b"{}"), connect=False)
        assert started is not None
        server.wait_for(2)  # written at once; its answer is read when asked for
        assert started.arrived(30) and started.finish().content == b"two"
        pool.close()
    assert [n for n, _, _ in server.received] == [1, 1]
    assert b"Content-Length: 2\r\n" in server.received[1][1] and server.received[1][2] == b"{}"


def test_the_blocking_client_sends_its_requests_over_kept_alive_connections() -> None:
    with Threaded(ok(json.dumps(DECISION).encode()), NOT_FOUND) as server:
        with Cosigner(url=f"http://127.0.0.1:{server.port}/base", api_key="csk_k") as cosigner:
            got = cosigner.request_approval(
                execution_id="e1",
                tool_call_id="c1",
                tool_name="lookup_order",
                parameters={"orderId": "ord_1"},
                surface=DashboardSurface(user_id="u_1"),
            )
            with pytest.raises(ApprovalNotFound, match="no such approval"):
                cosigner.get("apr 2")
    assert got.approved and got.approval_id == DECISION["approvalId"]
    (_, post, body), (_, get, _) = server.received
    assert post.startswith(b"POST /base/v1/approvals HTTP/1.1\r\n")
    assert b"Content-Type: application/json\r\n" in post and json.loads(body)["parameters"] == {
        "orderId": "ord_1"
    }
    assert get.startswith(b"GET /base/v1/approvals/apr%202 HTTP/1.1\r\n") and b"Content-Length" not in get
    assert server.connections == 1


async def test_an_idle_connection_past_the_expiry_is_not_reused() -> None:
    now = [0.0]
    async with scripted(ok(b"one"), ok(b"two"), ok(b"three")) as server:
        pool = KeepAlive("127.0.0.1", server.port, clock=lambda: now[0])
        await pool.request("GET", "/", HOST)
        now[0] += EXPIRY - 0.1
        await pool.request("GET", "/", HOST)  # still fresh: kept alive
        now[0] += EXPIRY
        await pool.request("GET", "/", HOST)  # idle as long as the expiry: a new connection
        pool.close()
    assert [n for n, _, _ in server.received] == [1, 1, 2]


async def test_bytes_after_an_answer_are_kept_out_of_it_and_drop_the_connection() -> None:
    stray = ok(b"one") + b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nextra"
    async with scripted(stray, ok(b"two")) as server:
        pool = KeepAlive("127.0.0.1", server.port)
        first = await pool.request("GET", "/", HOST)
        second = await pool.request("GET", "/", HOST)
        pool.close()
    assert (first[2], second[2]) == (b"one", b"two")
    assert server.connections == 2  # the connection out of step was not reused


def test_blocking_bytes_after_an_answer_are_kept_out_of_it_and_drop_the_connection() -> None:
    with Threaded(ok(b"one") + b"garbage", ok(b"two")) as server:
        pool = pool_for(server.port)
        assert pool.send(step()).content == b"one"
        assert pool.send(step()).content == b"two"
        pool.close()
    assert [n for n, _, _ in server.received] == [1, 2]


def test_a_request_that_would_not_be_one_request_line_and_headers_is_refused() -> None:
    assert request_bytes("POST", "/v1/a?b=c", HOST, b"{}") == (
        b"POST /v1/a?b=c HTTP/1.1\r\nHost: cosigner.test\r\nContent-Length: 2\r\n\r\n{}"
    )
    for method, target, headers in (
        ("GET", "/a b", HOST),
        ("GET", "/a\r\nX-Evil: 1", HOST),
        ("GET", "/\u00e9", HOST),
        ("GE T", "/", HOST),
        ("GET", "/", [(b"X-Evil", b"1\r\nX-More: 2")]),
        ("GET", "/", [(b"X Evil", b"1")]),
    ):
        with pytest.raises(ValueError, match="cannot send"):
            request_bytes(method, target, headers, b"")
    with pytest.raises(ValueError, match="not a header name"):
        Origin.of("http://127.0.0.1:8000", {"X Evil": "1"}, None)
    # A path in the URL is quoted once, as the paths under it are.
    origin = Origin.of("http://127.0.0.1:8000/my base", {}, None)
    assert origin is not None and origin.request(step("/v1/x")).startswith(
        b"GET /my%20base/v1/x HTTP/1.1\r\n"
    )


def test_an_answer_whose_headers_run_past_the_bound_is_refused() -> None:
    endless = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n" + b"X-Pad: " + b"a" * (200 * 1024) + b"\r\n\r\n"
    with Threaded(endless, ok(b"fine")) as server:
        pool = pool_for(server.port)
        with pytest.raises(httpx.RemoteProtocolError, match="malformed"):
            pool.send(step())
        assert pool.send(step()).content == b"fine"  # on a new connection
        pool.close()
    assert server.connections == 2


async def test_a_header_line_that_never_ends_is_refused_not_buffered() -> None:
    # No line end ever comes, and the connection stays open: the reader must give up on its
    # own at the head's bound, not hold the bytes until the read timeout.
    endless = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Pad: " + b"a" * (200 * 1024)
    async with scripted(endless, ok(b"fine")) as server:
        pool = KeepAlive("127.0.0.1", server.port)
        with pytest.raises(httpx.RemoteProtocolError, match="malformed"):
            await pool.request("GET", "/", HOST, read_timeout=60)
        status, _, body = await pool.request("GET", "/", HOST)  # on a new connection
        pool.close()
    assert (status, body) == (200, b"fine") and server.connections == 2

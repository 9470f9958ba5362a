"""The SDK's HTTP client options, side by side: client CPU per request to a plain-http server.

    .venv/bin/python bench/sdk_http.py [--requests 2000] [--rounds 5]

A subprocess (pinned to one core where there are two) answers every request on a kept-alive
connection with the same 200 and a JSON body the size of a policy-allowed read's answer
(about 700 bytes), doing nothing else. From this process (pinned to the other core) each
client sends `--requests` POSTs of a read's body one after another, in rounds that take
turns, and the figure is this thread's own CPU time (`time.thread_time`) per request: what
the agent's process spends on one request to Cosigner, the flows' own work excluded.

Asyncio clients (what `AsyncCosigner` and the MCP gateway send with):

- keepalive: the SDK's own connections (`cosigner._keepalive.KeepAlive`, a request written
  whole, the answer read by httptools);
- httpcore-free-list: httpcore's `AsyncHTTP11Connection`s on streams of the event loop's
  protocol callbacks, in a free list, without their anyio lock (bench/httpcore_connections.py,
  what `bench/httpcore_sdk.py` builds the SDK on);
- httpx: `httpx.AsyncClient`, as `AsyncCosigner` uses it for `https://`;
- httpx-tuned: `httpx.AsyncClient(trust_env=False)` over an HTTP/1.1-only
  `httpx.AsyncHTTPTransport`, requests sent with a prebuilt `httpx.URL`;
- httpcore: `httpcore.AsyncConnectionPool.request`, httpx's pooled layer without httpx;
- httpcore-conn: one `httpcore.AsyncHTTPConnection` reused, no pool;
- httpcore-asyncio: the pool over a network backend of asyncio streams instead of anyio's;
- httpcore-h11conn: one `httpcore.AsyncHTTP11Connection` on such a stream, no pool;
- httpx+ka-transport: `httpx.AsyncClient` over an `httpx.AsyncBaseTransport` that writes
  and reads as `keepalive` does (httpx's own seam, httpx's request and response models);
- ka-transport-direct: that transport called with a prebuilt `httpx.Request`, no client.

Blocking clients (what `Cosigner` and the queued reports send with): keepalive
(`BlockingKeepAlive`), httpcore-free-list (`httpcore.HTTP11Connection`s on blocking sockets in
a free list, bench/httpcore_connections.py), httpx (`httpx.Client`) and httpcore
(`httpcore.ConnectionPool`).

The server's egress (callbacks, `expect` checks, operation calls), `--concurrent` requests
at a time (1 and 64 by default): `bot.egress.transport.Egress` (aiohttp's connector, checked and
pinned) against `httpx.AsyncClient(trust_env=False)` with the same connection limit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import httpcore
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "sdk" / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from cosigner._core import Send
from cosigner._keepalive import BlockingKeepAlive, KeepAlive, Origin, send_async

sys.path.insert(0, str(Path(__file__).resolve().parent))
import httpcore_connections

ANSWER = json.dumps(
    {
        "approvalId": "apr_" + "0" * 26,
        "status": "approved",
        "decidedBy": {"kind": "policy", "rule": "tools.lookup_order.kind"},
        "grant": "eyJ" + "a" * 400,
        "expiresAt": "2026-12-01T12:00:00Z",
        "toolName": "lookup_order",
        "executionId": "run_1",
        "toolCallId": "call_1",
    }
).encode()
BODY = json.dumps(
    {
        "executionId": "run_1",
        "toolCallId": "call_1",
        "toolName": "lookup_order",
        "parameters": {"orderId": "ord_4421"},
        "surface": {"type": "dashboard", "userId": "u_1"},
    },
    separators=(",", ":"),
).encode()
HEADERS = {"Authorization": "Bearer csk_" + "k" * 40, "User-Agent": "cosigner-sdk-python"}
JSON_TYPE = {"Content-Type": "application/json"}

SERVER = r"""
import asyncio, sys
ANSWER = sys.stdin.buffer.read()
RESPONSE = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
            % len(ANSWER)) + ANSWER

class Serve(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport, self.buf = transport, b""
    def data_received(self, data):
        self.buf += data
        while True:
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buf[:head_end].lower()
            length = 0
            at = head.find(b"content-length:")
            if at >= 0:
                length = int(head[at + 15:].split(b"\r\n", 1)[0])
            end = head_end + 4 + length
            if len(self.buf) < end:
                return
            self.buf = self.buf[end:]
            self.transport.write(RESPONSE)

async def main():
    server = await asyncio.get_running_loop().create_server(Serve, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def serve() -> tuple[subprocess.Popen[bytes], int]:
    """Start the answering server; its process and port."""
    cores = sorted(os.sched_getaffinity(0))
    pin = ["taskset", "-c", str(cores[0])] if len(cores) > 1 else []
    process = subprocess.Popen(
        [*pin, sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(ANSWER)
    process.stdin.close()
    port = int(process.stdout.readline())
    if len(cores) > 1:
        os.sched_setaffinity(0, {cores[-1]})
    return process, port


def step() -> Send:
    """A policy-allowed read's request, as the SDK's flows hand it to a driver."""
    return Send("POST", "/v1/approvals", BODY, None, dict(JSON_TYPE), httpx.Timeout(10.0))


class AsyncioStream(httpcore.AsyncNetworkStream):
    """An httpcore network stream on asyncio's own streams (no anyio)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        try:
            return await asyncio.wait_for(self._reader.read(max_bytes), timeout)
        except TimeoutError:
            raise httpcore.ReadTimeout("read timed out") from None

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        self._writer.write(buffer)

    async def aclose(self) -> None:
        self._writer.close()

    def get_extra_info(self, info: str) -> Any:
        return self._writer.get_extra_info(info)


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend on asyncio streams."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return AsyncioStream(reader, writer)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class KeepAliveTransport(httpx.AsyncBaseTransport):
    """httpx's transport seam over the SDK's own asyncio connections: httpx's request and
    response models, the bytes written and read as `KeepAlive` does."""

    def __init__(self, pool: KeepAlive) -> None:
        self._pool = pool

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        target = request.url.raw_path.decode("ascii")
        content = request.read()
        status, headers, body = await self._pool.request(
            request.method, target, list(request.headers.raw), content, read_timeout=10.0
        )
        return httpx.Response(status, headers=headers, content=body, request=request)


AsyncSend = Callable[[], Awaitable[int]]


async def async_clients(url: str) -> tuple[dict[str, AsyncSend], Callable[[], Awaitable[None]]]:
    """Each asyncio client's one request, and how to close them all."""
    origin = Origin.of(url, HEADERS, None)
    assert origin is not None
    pool = KeepAlive(origin.host, origin.port)

    async def keepalive() -> int:
        return (await send_async(pool, origin, step())).status_code

    plain = httpx.AsyncClient(base_url=url, headers=HEADERS)

    async def httpx_default() -> int:
        s = step()
        r = await plain.request(s.method, s.path, content=s.content, headers=s.headers, timeout=s.timeout)
        return r.status_code

    tuned = httpx.AsyncClient(headers=HEADERS, trust_env=False, transport=httpx.AsyncHTTPTransport())
    target = httpx.URL(url + "/v1/approvals")

    async def httpx_tuned() -> int:
        s = step()
        r = await tuned.request(s.method, target, content=s.content, headers=s.headers, timeout=s.timeout)
        return r.status_code

    core = httpcore.AsyncConnectionPool()
    fixed = [(k.encode(), v.encode()) for k, v in {**HEADERS, **JSON_TYPE}.items()]
    core_url = httpcore.URL(url + "/v1/approvals")
    timeouts = {"connect": 10.0, "read": 10.0, "write": 10.0, "pool": 10.0}

    async def httpcore_pool() -> int:
        s = step()
        r = await core.request(
            s.method, core_url, headers=fixed, content=s.content, extensions={"timeout": timeouts}
        )
        return r.status

    host, port = url.removeprefix("http://").split(":")
    connection = httpcore.AsyncHTTPConnection(httpcore.Origin(b"http", host.encode(), int(port)))

    async def httpcore_conn() -> int:
        s = step()
        r = await connection.request(
            s.method, core_url, headers=fixed, content=s.content, extensions={"timeout": timeouts}
        )
        return r.status

    native = httpcore.AsyncConnectionPool(network_backend=AsyncioBackend())

    async def httpcore_asyncio() -> int:
        s = step()
        r = await native.request(
            s.method, core_url, headers=fixed, content=s.content, extensions={"timeout": timeouts}
        )
        return r.status

    stream = await AsyncioBackend().connect_tcp(host, int(port), timeout=10.0)
    h11_only = httpcore.AsyncHTTP11Connection(httpcore.Origin(b"http", host.encode(), int(port)), stream)

    async def httpcore_h11() -> int:
        s = step()
        r = await h11_only.request(
            s.method, core_url, headers=fixed, content=s.content, extensions={"timeout": timeouts}
        )
        return r.status

    seam_pool = KeepAlive(origin.host, origin.port)
    seam = httpx.AsyncClient(headers=HEADERS, trust_env=False, transport=KeepAliveTransport(seam_pool))
    transport = KeepAliveTransport(seam_pool)
    prepared = httpx.Headers({**HEADERS, **JSON_TYPE, "Host": url.removeprefix("http://")})

    async def keepalive_transport() -> int:
        s = step()
        r = await seam.request(s.method, target, content=s.content, headers=s.headers, timeout=s.timeout)
        return r.status_code

    async def keepalive_transport_direct() -> int:
        s = step()
        request = httpx.Request(s.method, target, content=s.content, headers=prepared)
        return (await transport.handle_async_request(request)).status_code

    core_origin = httpcore_connections.Origin.of(url, HEADERS, None)
    assert core_origin is not None
    sdk_core = httpcore_connections.AsyncConnections(core_origin)

    async def httpcore_free_list() -> int:
        return (await sdk_core.send(step())).status_code

    async def close() -> None:
        sdk_core.close()
        pool.close()
        seam_pool.close()
        await seam.aclose()
        await h11_only.aclose()
        await plain.aclose()
        await tuned.aclose()
        await core.aclose()
        await connection.aclose()
        await native.aclose()

    clients: dict[str, AsyncSend] = {
        "keepalive": keepalive,
        "httpcore-free-list": httpcore_free_list,
        "httpx": httpx_default,
        "httpx-tuned": httpx_tuned,
        "httpcore": httpcore_pool,
        "httpcore-conn": httpcore_conn,
        "httpcore-asyncio": httpcore_asyncio,
        "httpcore-h11conn": httpcore_h11,
        "httpx+ka-transport": keepalive_transport,
        "ka-transport-direct": keepalive_transport_direct,
    }
    return clients, close


def blocking_clients(url: str) -> tuple[dict[str, Callable[[], int]], Callable[[], None]]:
    """Each blocking client's one request, and how to close them all."""
    origin = Origin.of(url, HEADERS, None)
    assert origin is not None
    pool = BlockingKeepAlive(origin)
    plain = httpx.Client(base_url=url, headers=HEADERS)
    core = httpcore.ConnectionPool()
    fixed = [(k.encode(), v.encode()) for k, v in {**HEADERS, **JSON_TYPE}.items()]
    core_url = httpcore.URL(url + "/v1/approvals")
    timeouts = {"connect": 10.0, "read": 10.0, "write": 10.0, "pool": 10.0}

    def httpx_default() -> int:
        s = step()
        return plain.request(
            s.method, s.path, content=s.content, headers=s.headers, timeout=s.timeout
        ).status_code

    def httpcore_pool() -> int:
        s = step()
        return core.request(
            s.method, core_url, headers=fixed, content=s.content, extensions={"timeout": timeouts}
        ).status

    core_origin = httpcore_connections.Origin.of(url, HEADERS, None)
    assert core_origin is not None
    sdk_core = httpcore_connections.BlockingConnections(core_origin)

    def close() -> None:
        sdk_core.close()
        pool.close()
        plain.close()
        core.close()

    clients = {
        "keepalive": lambda: pool.send(step()).status_code,
        "httpcore-free-list": lambda: sdk_core.send(step()).status_code,
        "httpx": httpx_default,
        "httpcore": httpcore_pool,
    }
    return clients, close


async def measure_async(url: str, requests: int, rounds: int) -> dict[str, list[float]]:
    clients, close = await async_clients(url)
    cpu: dict[str, list[float]] = {name: [] for name in clients}
    for send in clients.values():  # warm: connect, caches
        for _ in range(200):
            assert await send() == 200
    for turn in range(rounds):
        names = list(clients) if turn % 2 == 0 else list(reversed(clients))
        for name in names:
            send = clients[name]
            started = time.thread_time()
            for _ in range(requests):
                await send()
            cpu[name].append((time.thread_time() - started) / requests * 1e6)
    await close()
    return cpu


def measure_blocking(url: str, requests: int, rounds: int) -> dict[str, list[float]]:
    clients, close = blocking_clients(url)
    cpu: dict[str, list[float]] = {name: [] for name in clients}
    for send in clients.values():
        for _ in range(200):
            assert send() == 200
    for turn in range(rounds):
        names = list(clients) if turn % 2 == 0 else list(reversed(clients))
        for name in names:
            send = clients[name]
            started = time.thread_time()
            for _ in range(requests):
                send()
            cpu[name].append((time.thread_time() - started) / requests * 1e6)
    close()
    return cpu


async def measure_egress(url: str, requests: int, rounds: int, concurrent: int) -> dict[str, list[float]]:
    from bot.egress.transport import Egress
    from bot.egress.urls import parse_allow_list

    egress = Egress(parse_allow_list("127.0.0.0/8"))
    plain = httpx.AsyncClient(
        trust_env=False,
        follow_redirects=False,
        limits=httpx.Limits(max_connections=100, max_keepalive_connections=100),
    )
    target = url + "/hook"
    headers = {"Content-Type": "application/json", "User-Agent": "Cosigner"}

    async def aiohttp_post() -> int:
        return (await egress.post(target, content=BODY, headers=headers, timeout=10.0)).status_code

    async def httpx_post() -> int:
        return (await plain.post(target, content=BODY, headers=headers, timeout=10.0)).status_code

    clients: dict[str, AsyncSend] = {"keepalive": aiohttp_post, "httpx": httpx_post}

    async def batch(send: AsyncSend, n: int) -> None:
        left = [n]

        async def worker() -> None:
            while left[0] > 0:
                left[0] -= 1
                assert await send() == 200

        await asyncio.gather(*(worker() for _ in range(concurrent)))

    cpu: dict[str, list[float]] = {name: [] for name in clients}
    for send in clients.values():
        await batch(send, 400)
    for turn in range(rounds):
        names = list(clients) if turn % 2 == 0 else list(reversed(clients))
        for name in names:
            started = time.thread_time()
            await batch(clients[name], requests)
            cpu[name].append((time.thread_time() - started) / requests * 1e6)
    await egress.aclose()
    await plain.aclose()
    return {"aiohttp (Egress)" if k == "keepalive" else k: v for k, v in cpu.items()}


def show(title: str, cpu: dict[str, list[float]]) -> None:
    print(f"\n{title}: client CPU µs per request (median of rounds; min..max)")
    base = statistics.median(next(iter(cpu.values())))
    for name, figures in cpu.items():
        median = statistics.median(figures)
        print(f"  {name:18} {median:7.1f}  ({min(figures):.1f}..{max(figures):.1f})  x{median / base:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrent", type=int, nargs="*", default=[1, 64])
    parser.add_argument("--only", choices=["sdk", "egress"], default=None)
    args = parser.parse_args()
    process, port = serve()
    url = f"http://127.0.0.1:{port}"
    try:
        if args.only in (None, "sdk"):
            show("asyncio", asyncio.run(measure_async(url, args.requests, args.rounds)))
            show("blocking", measure_blocking(url, args.requests, args.rounds))
        if args.only in (None, "egress"):
            for n in args.concurrent:
                cpu = asyncio.run(measure_egress(url, args.requests, args.rounds, n))
                show(f"egress, {n} at a time", cpu)
    finally:
        process.kill()
        process.wait()


if __name__ == "__main__":
    main()

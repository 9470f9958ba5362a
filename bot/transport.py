"""The HTTP transport callbacks leave through: it checks each target and connects to what it checked.

A check followed by an ordinary request would resolve the name twice, and a DNS server
that answers a public address first and a private one second (DNS rebinding) would win.
So the name is resolved once, in `PinnedBackend.connect_tcp`, every address is checked,
and the socket is opened to those addresses. httpcore still starts TLS with the URL's
host name, so SNI and certificate verification are for the name, not the address. A
connection kept alive for the same host (5 s idle at most) is reused without a new lookup:
it already goes to a checked address.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable, Sequence
from ipaddress import ip_address

import httpcore
import httpx

from bot.egress import (
    AllowList,
    EgressRefused,
    IPAddress,
    check_addresses,
    check_url,
    parse_host,
    unmapped,
)

LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0)
"""httpx's default connection limits, stated here because the pool is built here."""

Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""Resolve (host, port) to IP address strings."""


async def system_resolver(host: str, port: int) -> list[str]:
    """The operating system's answer for `host`, each address once, in its order."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """Resolves a host once, refuses it unless every address is allowed, connects to those."""

    def __init__(
        self,
        allow: AllowList,
        resolver: Resolver = system_resolver,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.allow = allow
        self.resolver = resolver
        self.inner = inner or httpcore.AnyIOBackend()

    async def addresses(self, host: str, port: int, limit: float | None) -> list[IPAddress]:
        """The checked addresses of `host`; `EgressRefused` if any is not allowed."""
        literal = parse_host(host)
        if literal is not None:
            check_addresses(host, [literal], self.allow)
            return [literal]
        try:
            async with asyncio.timeout(limit):
                answers = await self.resolver(host, port)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host} timed out") from None
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}") from exc
        try:
            found = [unmapped(ip_address(answer)) for answer in answers]
        except ValueError:
            raise EgressRefused(f"{host} resolved to something that is not an IP address") from None
        if not found:
            raise httpcore.ConnectError(f"{host} has no address")
        check_addresses(host, found, self.allow)
        return found

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Connect to the first checked address of `host` that answers."""
        failure: Exception = httpcore.ConnectError(f"cannot connect to {host}")
        for ip in await self.addresses(host, port, timeout):
            try:
                return await self.inner.connect_tcp(str(ip), port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        """Never: a callback goes to a network address."""
        raise EgressRefused("callbacks are not sent to Unix sockets")

    async def sleep(self, seconds: float) -> None:
        """Sleep as the inner backend does."""
        await self.inner.sleep(seconds)


class CallbackTransport(httpx.AsyncHTTPTransport):
    """httpx's transport with the URL checked first and every connection made by `PinnedBackend`."""

    def __init__(
        self,
        allow: AllowList,
        resolver: Resolver = system_resolver,
        verify: ssl.SSLContext | bool = True,
        limits: httpx.Limits = LIMITS,
    ) -> None:
        ssl_context = httpx.create_ssl_context(verify=verify)
        super().__init__(verify=ssl_context, limits=limits)
        self.allow = allow
        # httpx 0.28 takes no network backend, so the pool it built is replaced by one with
        # the same settings that connects through ours. Refuse to run if that pool moved.
        if not isinstance(getattr(self, "_pool", None), httpcore.AsyncConnectionPool):
            raise RuntimeError("this httpx version keeps no _pool; callbacks cannot be pinned")
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=PinnedBackend(allow, resolver),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Refuse a refused scheme or literal address before any connection is made."""
        check_url(str(request.url), self.allow)
        return await super().handle_async_request(request)


def callback_client(
    allow: AllowList, resolver: Resolver = system_resolver, verify: ssl.SSLContext | bool = True
) -> httpx.AsyncClient:
    """The client callbacks are sent with: checked, pinned, no redirects, no proxy from the environment."""
    return httpx.AsyncClient(
        transport=CallbackTransport(allow, resolver, verify), follow_redirects=False, trust_env=False
    )

"""The HTTP client requests to tenants and applications leave through: checked, then pinned.

Callbacks, a handoff's `expect` check and an operation's `prepare`/`execute`/`status` all
go to a URL that someone other than the operator chose, from inside the operator's
network. So every request is checked first (`bot.egress.urls.check_url`: scheme and literal
address), and a host name is resolved once, by `PinnedResolver`: every address it
resolves to is checked, and aiohttp opens the socket to exactly those addresses. A check
followed by an ordinary request would resolve the name twice, and a DNS server that
answers a public address first and a private one second (DNS rebinding) would win. TLS
still starts with the URL's host name, so SNI and certificate verification are for the
name, not the address. A kept-alive connection (4 s idle at most, under the usual 5 s of
application servers) is reused without a new lookup: it already goes to a checked
address; resolved answers are kept 10 s, and only checked answers are kept.

aiohttp rather than httpx here: these calls are many and concurrent (a callback per
decision, a `prepare` and an `execute` per operation), and on this path httpx with
httpcore's pool cost about ten times the CPU per request of aiohttp's connector
(bench/contract_trips.py; docs/performance.md). Redirects are never followed, proxies
from the environment are not used, cookies are not kept.

Every request is signed by Standard Webhooks (`Egress.post_signed`, the one signing place;
`webhook-id` is the delivery id, the same on each retry). `Egress.post` answers a `Reply`
(status and body) or raises `EgressRefused` (the rules refuse the target), `Unreached` (no
connection was made: the request cannot have arrived) or `Lost` (the request may have
arrived; its answer did not come).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from ipaddress import ip_address

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from bot.egress.urls import AllowList, EgressRefused, IPAddress, check_addresses, check_url, unmapped
from contracts import webhooks

Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
"""Resolve (host, port) to IP address strings."""

MAX_CONNECTIONS = 100
"""Connections open at once, to all targets together; more requests wait for one."""
KEEPALIVE_SECONDS = 4.0
"""How long an idle connection is kept: less than an application server's usual 5 s."""
DNS_CACHE_SECONDS = 10
"""How long a checked answer for a host name is reused."""


async def system_resolver(host: str, port: int) -> list[str]:
    """The operating system's answer for `host`, each address once, in its order."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


async def checked_addresses(host: str, port: int, allow: AllowList, resolver: Resolver) -> list[IPAddress]:
    """The addresses `host` resolves to, each checked; `EgressRefused` if any is not allowed."""
    answers = await resolver(host, port)
    try:
        found = [unmapped(ip_address(answer)) for answer in answers]
    except ValueError:
        raise EgressRefused(f"{host} resolved to something that is not an IP address") from None
    if not found:
        raise OSError(f"{host} has no address")
    check_addresses(host, found, allow)
    return found


class PinnedResolver(AbstractResolver):
    """aiohttp's resolver: one lookup, every address checked, only those addresses returned."""

    def __init__(self, allow: AllowList, resolver: Resolver = system_resolver) -> None:
        self.allow = allow
        self.resolver = resolver

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """The checked addresses of `host`, as aiohttp connects to them."""
        return [
            ResolveResult(
                hostname=host,
                host=str(ip),
                port=port,
                family=socket.AF_INET6 if ip.version == 6 else socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
            for ip in await checked_addresses(host, port, self.allow, self.resolver)
        ]

    async def close(self) -> None:
        """Nothing to release."""


@dataclass(frozen=True, slots=True)
class Reply:
    """What the target answered: its HTTP status and body."""

    status_code: int
    content: bytes


class EgressFailed(Exception):
    """No answer came; `reason` names what happened (aiohttp's error class), never a secret."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Unreached(EgressFailed):
    """No connection could be made (refused, unresolvable, a bad certificate, connect timeout)."""


class Lost(EgressFailed):
    """The request may have reached the target, but no complete answer came back."""


class Egress:
    """The checked, pinned client; its aiohttp session is made in the loop that first uses it."""

    def __init__(
        self,
        allow: AllowList,
        resolver: Resolver = system_resolver,
        verify: ssl.SSLContext | None = None,
    ) -> None:
        self.allow = allow
        self.resolver = resolver
        # Certificates are always verified: `verify` only names other trusted roots (tests).
        self.ssl = ssl.create_default_context() if verify is None else verify
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _client(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            connector = aiohttp.TCPConnector(
                resolver=PinnedResolver(self.allow, self.resolver),
                ssl=self.ssl,
                limit=MAX_CONNECTIONS,
                keepalive_timeout=KEEPALIVE_SECONDS,
                ttl_dns_cache=DNS_CACHE_SECONDS,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                cookie_jar=aiohttp.DummyCookieJar(),
                trust_env=False,
                auto_decompress=False,
                skip_auto_headers=("Accept-Encoding",),
            )
            self._loop = loop
        return self._session

    async def post(
        self,
        url: str,
        *,
        content: bytes,
        headers: Mapping[str, str] | None = None,
        timeout: float = 10.0,  # noqa: ASYNC109 (a per-request limit, as in httpx)
    ) -> Reply:
        """POST `content` to `url` once (never redirected) and read the whole answer."""
        check_url(url, self.allow)
        try:
            async with self._client().post(
                url,
                data=content,
                headers=dict(headers or {}),
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=timeout),
            ) as response:
                return Reply(response.status, await response.read())
        except EgressRefused:
            raise
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError, aiohttp.InvalidURL) as exc:
            raise Unreached(type(exc).__name__) from None
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            raise Lost(type(exc).__name__) from None

    async def post_signed(
        self,
        url: str,
        body: bytes,
        *,
        secret: str,
        delivery: str,
        at: float,
        user_agent: str,
        timeout: float = 10.0,  # noqa: ASYNC109 (a per-request limit, as in httpx)
        content_type: str = "application/json",
    ) -> Reply:
        """POST JSON `body` signed by Standard Webhooks as delivery `delivery` (`webhook-id`)."""
        headers = {
            "Content-Type": content_type,
            "User-Agent": user_agent,
            **webhooks.sign(secret, delivery, int(at), body),
        }
        return await self.post(url, content=body, headers=headers, timeout=timeout)

    async def aclose(self) -> None:
        """Close the open connections."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> Egress:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def callback_client(
    allow: AllowList, resolver: Resolver = system_resolver, verify: ssl.SSLContext | None = None
) -> Egress:
    """The client callbacks, `expect` checks and operation calls are sent with."""
    return Egress(allow, resolver, verify)

"""Where callbacks may go: address classes, the operator's allow list, and URL checks.

A tenant chooses its `callbackUrl`, and Cosigner sends it a request from inside the
operator's network. So a target whose address is loopback, private, link-local (the cloud
metadata service), CGNAT, multicast, unspecified or reserved is refused unless the
operator allows it with `COSIGNER_CALLBACK_ALLOW`. Hosts are read the way URL parsers and
`inet_aton` read them (`0x7f.1` and `2130706433` are 127.0.0.1; `::ffff:127.0.0.1` is
IPv4), so no spelling slips past. `bot.egress.transport` applies the same rules to every address
a name resolves to, and connects to the address it checked.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address, ip_network

import httpx

from contracts.enums import AddressClass

IPAddress = IPv4Address | IPv6Address
"""An IPv4 or IPv6 address."""
IPNetwork = IPv4Network | IPv6Network
"""An IPv4 or IPv6 network."""

LOOPBACK_ALLOW = "127.0.0.0/8,::1/128,localhost"
"""The allow list of `cosigner dev`: callbacks to this machine."""

_FIX = "use a public https URL, or ask the operator to allow it in COSIGNER_CALLBACK_ALLOW"
_LABEL = re.compile(r"^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$")
_DIGITS = {16: set(string.hexdigits), 10: set(string.digits), 8: set(string.octdigits)}

# First match wins: the embedded IPv4 of NAT64 and 6to4 addresses is classified on its own.
_CLASSES: tuple[tuple[IPNetwork, AddressClass], ...] = tuple(
    (ip_network(net), cls)
    for net, cls in (
        ("0.0.0.0/8", AddressClass.UNSPECIFIED),
        ("10.0.0.0/8", AddressClass.PRIVATE),
        ("100.64.0.0/10", AddressClass.SHARED),
        ("127.0.0.0/8", AddressClass.LOOPBACK),
        ("169.254.0.0/16", AddressClass.LINK_LOCAL),
        ("172.16.0.0/12", AddressClass.PRIVATE),
        ("192.0.0.0/24", AddressClass.RESERVED),
        ("192.0.2.0/24", AddressClass.RESERVED),
        ("192.88.99.0/24", AddressClass.RESERVED),
        ("192.168.0.0/16", AddressClass.PRIVATE),
        ("198.18.0.0/15", AddressClass.RESERVED),
        ("198.51.100.0/24", AddressClass.RESERVED),
        ("203.0.113.0/24", AddressClass.RESERVED),
        ("224.0.0.0/4", AddressClass.MULTICAST),
        ("240.0.0.0/4", AddressClass.RESERVED),
        ("::/128", AddressClass.UNSPECIFIED),
        ("::1/128", AddressClass.LOOPBACK),
        ("::/96", AddressClass.RESERVED),
        ("::ffff:0:0:0/96", AddressClass.RESERVED),
        ("64:ff9b:1::/48", AddressClass.PRIVATE),
        ("100::/64", AddressClass.RESERVED),
        ("2001:db8::/32", AddressClass.RESERVED),
        ("fc00::/7", AddressClass.PRIVATE),
        ("fe80::/10", AddressClass.LINK_LOCAL),
        ("fec0::/10", AddressClass.RESERVED),
        ("ff00::/8", AddressClass.MULTICAST),
    )
)
_NAT64 = ip_network("64:ff9b::/96")


class EgressRefused(Exception):
    """A callback target the egress rules refuse; the message says why and how to allow it."""


def unmapped(ip: IPAddress) -> IPAddress:
    """The IPv4 address inside an IPv4-mapped IPv6 address, else the address itself."""
    if isinstance(ip, IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def classify(ip: IPAddress) -> AddressClass | None:
    """Why `ip` is not a public internet address, or None when it is one."""
    ip = unmapped(ip)
    if isinstance(ip, IPv6Address):
        embedded = ip.sixtofour or (IPv4Address(int(ip) & 0xFFFFFFFF) if ip in _NAT64 else None)
        if embedded is not None:
            return classify(embedded)
    for net, cls in _CLASSES:
        if ip in net:
            return cls
    return None if ip.is_global else AddressClass.RESERVED


def _ipv4_number(part: str) -> int | None:
    radix = 10
    if part[:2].lower() == "0x":
        part, radix = part[2:], 16
    elif len(part) > 1 and part.startswith("0"):
        part, radix = part[1:], 8
    if not set(part) <= _DIGITS[radix]:
        return None
    return int(part, radix) if part else 0


def _ipv4(host: str) -> IPv4Address | None:
    """WHATWG URL host parsing: a host whose last label is a number is an IPv4 address."""
    parts = host.split(".")
    if len(parts) > 1 and parts[-1] == "":
        parts.pop()
    last = parts[-1]
    if not (last.isascii() and last.isdigit()) and not (
        last[:2].lower() == "0x" and _ipv4_number(last) is not None
    ):
        return None
    numbers = [_ipv4_number(p) if p else None for p in parts]
    if len(parts) > 4 or None in numbers:
        raise EgressRefused(f"{host} is neither a host name nor a valid IPv4 address")
    values = [n for n in numbers if n is not None]
    if any(n > 255 for n in values[:-1]) or values[-1] >= 256 ** (5 - len(values)):
        raise EgressRefused(f"{host} is neither a host name nor a valid IPv4 address")
    return IPv4Address(sum(n * 256 ** (3 - i) for i, n in enumerate(values[:-1])) + values[-1])


def parse_host(host: str) -> IPAddress | None:
    """The address a URL host denotes (any spelling, IPv4-mapped unwrapped), or None for a name."""
    text = host.strip().lower()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if ":" in text:
        try:
            return unmapped(ip_address(text))
        except ValueError:
            raise EgressRefused(f"{host} is not a valid IPv6 address") from None
    return _ipv4(text) if text else None


def host_key(host: str) -> str:
    """A host name as the allow list compares it: lower case, without a trailing dot."""
    return host.strip().lower().removesuffix(".")


@dataclass(frozen=True)
class AllowList:
    """Networks and host names the operator allows although they are not public."""

    networks: tuple[IPNetwork, ...] = ()
    hosts: frozenset[str] = frozenset()

    def allows_address(self, ip: IPAddress) -> bool:
        """True if `ip` lies in an allowed network."""
        ip = unmapped(ip)
        return any(ip in net for net in self.networks)

    def allows_host(self, host: str) -> bool:
        """True if `host` is an allowed host name (it may then resolve anywhere)."""
        return host_key(host) in self.hosts


def _entry(entry: str) -> IPNetwork | str:
    if "://" in entry or "*" in entry:
        raise ValueError(
            f"{entry!r}: write bare host names (hooks.internal) or CIDRs, without scheme or wildcard"
        )
    if "/" in entry:
        try:
            return ip_network(entry)
        except ValueError:
            try:
                hint = f"; did you mean {ip_network(entry, strict=False)}?"
            except ValueError:
                hint = ""
            raise ValueError(f"{entry!r} is not a network in CIDR form{hint}") from None
    try:
        ip = parse_host(entry)
    except EgressRefused:
        raise ValueError(f"{entry!r} is neither a host name nor an IP address") from None
    if ip is not None:
        return ip_network(ip)
    name = host_key(entry)
    if len(name) > 253 or not all(_LABEL.match(label) for label in name.split(".")):
        raise ValueError(
            f"{entry!r} is not a host name (write bare names like hooks.internal, "
            "without scheme, port or wildcard)"
        )
    return name


def parse_allow_list(text: str) -> AllowList:
    """Read `COSIGNER_CALLBACK_ALLOW`: comma-separated CIDRs, IP addresses and host names."""
    if not text.strip():
        return AllowList()
    networks: list[IPNetwork] = []
    hosts: set[str] = set()
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            raise ValueError("COSIGNER_CALLBACK_ALLOW has an empty entry; remove the extra comma")
        try:
            parsed = _entry(entry)
        except ValueError as exc:
            raise ValueError(f"COSIGNER_CALLBACK_ALLOW: {exc}") from None
        if isinstance(parsed, str):
            hosts.add(parsed)
        else:
            networks.append(parsed)
    return AllowList(tuple(networks), frozenset(hosts))


def _is_localhost(name: str) -> bool:
    key = host_key(name)
    return key == "localhost" or key.endswith(".localhost")


def check_url(url: str, allow: AllowList) -> None:
    """Refuse a callback URL whose scheme or literal address the rules do not allow."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        raise EgressRefused("callbackUrl is not a valid URL") from None
    if parsed.scheme not in ("http", "https"):
        raise EgressRefused("callbackUrl must be an https URL")
    host = parsed.raw_host.decode("ascii")
    if not host:
        raise EgressRefused("callbackUrl has no host")
    # `localhost` names never leave the machine (RFC 6761), so they count as loopback.
    ip = IPv4Address("127.0.0.1") if _is_localhost(host) else parse_host(host)
    listed = allow.allows_host(host) or (ip is not None and allow.allows_address(ip))
    if ip is not None and not listed and (cls := classify(ip)) is not None:
        raise EgressRefused(f"callbackUrl points at a {cls} address; {_FIX}")
    if parsed.scheme == "http" and not listed:
        raise EgressRefused(
            "callbackUrl must use https; http is only for targets the operator allows "
            "in COSIGNER_CALLBACK_ALLOW"
        )


def check_addresses(host: str, addresses: list[IPAddress], allow: AllowList) -> None:
    """Refuse a host unless every address it resolved to is public or allowed."""
    if allow.allows_host(host):
        return
    for ip in addresses:
        cls = classify(ip)
        if cls is not None and not allow.allows_address(ip):
            raise EgressRefused(f"{host} resolves to a {cls} address; {_FIX}")

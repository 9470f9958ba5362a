"""The egress rules: every spelling of an address is classified, the allow list is strict."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, ip_address

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.egress.urls import (
    AllowList,
    EgressRefused,
    check_addresses,
    check_url,
    classify,
    parse_allow_list,
    parse_host,
)
from contracts.enums import AddressClass

NOTHING = AllowList()


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0X7F.0.0.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.1", "127.0.0.1"),
        ("127.0.0.1.", "127.0.0.1"),
        ("[::ffff:127.0.0.1]", "127.0.0.1"),
        ("::ffff:7f00:1", "127.0.0.1"),
        ("[::FFFF:A9FE:A9FE]", "169.254.169.254"),
        ("0xa9fea9fe", "169.254.169.254"),
        ("10.1", "10.0.0.1"),
        ("0", "0.0.0.0"),
        ("0x", "0.0.0.0"),
        ("[::1]", "::1"),
        ("[fe80::1]", "fe80::1"),
        ("8.8.8.8", "8.8.8.8"),
    ],
)
def test_odd_spellings_name_the_address_a_url_parser_would(host: str, address: str) -> None:
    assert parse_host(host) == ip_address(address)


@pytest.mark.parametrize("host", ["agent.example", "hooks.internal", "xn--bcher-kva.example", "a1.b2.c3x"])
def test_names_are_names(host: str) -> None:
    assert parse_host(host) is None


@pytest.mark.parametrize(
    "host", ["256.0.0.1", "1.2.3.4.5", "0x100.1.1.1", "08.0.0.1", "hooks.123", "1..2", "[::g]"]
)
def test_a_host_that_ends_in_a_number_must_be_a_valid_address(host: str) -> None:
    with pytest.raises(EgressRefused, match=r"nor a valid|not a valid"):
        parse_host(host)


@pytest.mark.parametrize(
    ("address", "cls"),
    [
        ("127.0.0.1", AddressClass.LOOPBACK),
        ("127.255.0.9", AddressClass.LOOPBACK),
        ("::1", AddressClass.LOOPBACK),
        ("10.20.30.40", AddressClass.PRIVATE),
        ("172.16.0.1", AddressClass.PRIVATE),
        ("172.31.255.255", AddressClass.PRIVATE),
        ("192.168.1.1", AddressClass.PRIVATE),
        ("fd12:3456::1", AddressClass.PRIVATE),
        ("169.254.169.254", AddressClass.LINK_LOCAL),
        ("fe80::1", AddressClass.LINK_LOCAL),
        ("fe80::1%2", AddressClass.LINK_LOCAL),
        ("100.64.0.1", AddressClass.SHARED),
        ("100.127.255.254", AddressClass.SHARED),
        ("224.0.0.1", AddressClass.MULTICAST),
        ("ff02::1", AddressClass.MULTICAST),
        ("0.0.0.0", AddressClass.UNSPECIFIED),
        ("::", AddressClass.UNSPECIFIED),
        ("240.0.0.1", AddressClass.RESERVED),
        ("255.255.255.255", AddressClass.RESERVED),
        ("192.0.2.1", AddressClass.RESERVED),
        ("198.18.0.1", AddressClass.RESERVED),
        ("2001:db8::1", AddressClass.RESERVED),
        ("::127.0.0.1", AddressClass.RESERVED),
        ("fec0::1", AddressClass.RESERVED),
        ("::ffff:10.0.0.1", AddressClass.PRIVATE),
        ("2002:7f00:1::", AddressClass.LOOPBACK),  # 6to4 around 127.0.0.1
        ("64:ff9b::a9fe:a9fe", AddressClass.LINK_LOCAL),  # NAT64 around 169.254.169.254
        ("8.8.8.8", None),
        ("172.32.0.1", None),
        ("100.128.0.1", None),
        ("2606:4700:4700::1111", None),
        ("2002:808:808::", None),
    ],
)
def test_classes(address: str, cls: AddressClass | None) -> None:
    assert classify(ip_address(address)) == cls


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_every_spelling_of_an_ipv4_address_is_that_address(n: int) -> None:
    v4 = IPv4Address(n)
    octets = v4.packed
    spellings = [
        str(n),
        hex(n),
        "0" + oct(n)[2:],
        ".".join(hex(o) for o in octets),
        ".".join("0" + oct(o)[2:] for o in octets),
        f"{octets[0]}.{int.from_bytes(octets[1:])}",
        f"{octets[0]}.{octets[1]}.{int.from_bytes(octets[2:])}",
        f"[::ffff:{v4}]",
    ]
    for spelling in spellings:
        assert parse_host(spelling) == v4, spelling


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_a_mapped_address_is_classified_as_its_ipv4(n: int) -> None:
    v4 = IPv4Address(n)
    assert classify(IPv6Address(f"::ffff:{v4}")) == classify(v4)
    assert classify(v4) is not None or v4.is_global


@given(st.integers(min_value=0, max_value=2**128 - 1).map(IPv6Address))
def test_an_ipv6_address_that_passes_is_global(ip: IPv6Address) -> None:
    if classify(ip) is None:
        assert ip.is_global


def test_the_allow_list_reads_cidrs_addresses_and_names() -> None:
    allow = parse_allow_list(" 10.20.0.0/16, hooks.internal ,127.0.0.1,[::1],HOOKS2.Internal.")
    assert allow.allows_address(ip_address("10.20.5.6"))
    assert not allow.allows_address(ip_address("10.21.0.1"))
    assert allow.allows_address(ip_address("::ffff:10.20.0.1"))
    assert allow.allows_address(ip_address("127.0.0.1")) and not allow.allows_address(ip_address("127.0.0.2"))
    assert allow.allows_address(ip_address("::1"))
    assert allow.allows_host("hooks.internal") and allow.allows_host("HOOKS.internal.")
    assert allow.allows_host("hooks2.internal") and not allow.allows_host("other.internal")
    assert parse_allow_list("") == AllowList() == parse_allow_list("  ")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("10.0.0.1/8", "did you mean 10.0.0.0/8"),
        ("10.0.0.0/33", "not a network"),
        ("10.0.0.0/8,,hooks.internal", "empty entry"),
        ("hooks.internal,", "empty entry"),
        ("https://hooks.internal", "without scheme"),
        ("*.internal", "wildcard"),
        ("hooks.internal:8080", "neither a host name nor an IP"),
        ("hooks.123", "neither a host name nor an IP"),
        ("hooks internal", "not a host name"),
    ],
)
def test_a_bad_allow_list_entry_is_named(text: str, says: str) -> None:
    with pytest.raises(ValueError, match="COSIGNER_CALLBACK_ALLOW") as caught:
        parse_allow_list(text)
    assert says in str(caught.value)


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/hook",
        "https://0x7f.1/hook",
        "https://2130706433/hook",
        "https://[::ffff:127.0.0.1]/hook",
        "https://[::1]:8443/hook",
        "https://10.0.0.5/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[fe80::1]/hook",
        "https://100.64.1.1/hook",
        "https://224.0.0.1/hook",
        "https://0.0.0.0/hook",
        "https://localhost/hook",
        "https://api.localhost/hook",
        "http://agent.example/hook",
        "ftp://agent.example/hook",
        "https://300.1.1.1/hook",
    ],
)
def test_urls_refused_without_an_allow_list(url: str) -> None:
    with pytest.raises(EgressRefused, match=r"callbackUrl|not a valid"):
        check_url(url, NOTHING)


def test_allowed_targets_may_use_http() -> None:
    allow = parse_allow_list("10.20.0.0/16,hooks.internal,127.0.0.0/8")
    for url in (
        "http://10.20.1.1:8080/x",
        "http://hooks.internal/x",
        "http://0x7f.1/x",
        "https://localhost/x",
    ):
        check_url(url, allow)
    check_url("https://agent.example/hook", NOTHING)
    check_url("https://8.8.8.8/hook", NOTHING)
    with pytest.raises(EgressRefused, match="must use https"):
        check_url("http://svc.other/x", allow)  # a name is allowed http only when listed itself
    with pytest.raises(EgressRefused, match="private"):
        check_url("https://10.21.0.1/x", allow)


def test_every_resolved_address_must_be_allowed() -> None:
    public, private = ip_address("93.184.216.34"), ip_address("10.0.0.7")
    check_addresses("agent.example", [public], NOTHING)
    with pytest.raises(EgressRefused, match=r"agent\.example resolves to a private address") as caught:
        check_addresses("agent.example", [public, private], NOTHING)
    assert "10.0.0.7" not in str(caught.value), "the operator's addresses are not told to the tenant"
    check_addresses("agent.example", [public, private], parse_allow_list("10.0.0.0/24"))
    check_addresses("hooks.internal", [private, ip_address("127.0.0.1")], parse_allow_list("hooks.internal"))

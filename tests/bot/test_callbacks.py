"""Callback signatures: `Cosigner-Signature: t=…,v1=…`, HMAC-SHA256 over the raw body."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.grants import callback_secret
from contracts.grants import sign_callback, verify_callback

SECRET = "grant-test-secret-" + "k" * 24
NOW = 1_800_000_000

BODY = json.dumps({"approvalId": "apr_1", "status": "approved"}).encode()


def test_callback_signature_round_trip() -> None:
    secret = callback_secret(SECRET, "acme")
    header = sign_callback(secret, BODY, NOW)
    assert header.startswith(f"t={NOW},v1=")
    assert len(header.split("v1=")[1]) == 64
    assert verify_callback(secret, header, BODY, now=NOW)
    assert verify_callback(secret, header, BODY, now=NOW + 299)
    assert verify_callback(secret, header, BODY, now=NOW - 299), "a little clock skew is fine"


def test_callback_secret_is_per_tenant_and_stable() -> None:
    assert callback_secret(SECRET, "acme") == callback_secret(SECRET, "acme")
    assert callback_secret(SECRET, "acme") != callback_secret(SECRET, "globex")
    assert callback_secret(SECRET, "acme") != callback_secret(SECRET + "x", "acme")
    assert callback_secret(SECRET, "acme").startswith("whsec_")


def test_callback_refused_on_altered_body_wrong_secret_or_stale_time() -> None:
    secret = callback_secret(SECRET, "acme")
    header = sign_callback(secret, BODY, NOW)
    assert not verify_callback(secret, header, BODY + b" ", now=NOW)
    assert not verify_callback(secret, header, BODY.replace(b"approved", b"denied"), now=NOW)
    assert not verify_callback(callback_secret(SECRET, "globex"), header, BODY, now=NOW)
    assert not verify_callback(secret, header, BODY, now=NOW + 301)
    assert not verify_callback(secret, header, BODY, now=NOW - 301)
    assert not verify_callback(secret, header, BODY, now=NOW + 61, tolerance=60)
    # Moving the timestamp forward without re-signing breaks the signature.
    mac = header.split(",v1=")[1]
    assert not verify_callback(secret, f"t={NOW + 100},v1={mac}", BODY, now=NOW + 100)


@pytest.mark.parametrize(
    "header",
    [
        "",
        "garbage",
        "t=abc,v1=00",
        f"v1={'0' * 64}",
        f"t={NOW}",
        f"t={NOW},v1=",
        f"t={NOW},v1={'0' * 64}",
        f"t={NOW},v1=\u00e9\u00e9",
        f"t={NOW},v1=日本",
        "t=,v1=x",
    ],
)
def test_callback_garbage_headers_are_false(header: str) -> None:
    assert verify_callback("whsec_x", header, BODY, now=NOW) is False


@given(st.binary(max_size=200), st.text(min_size=1, max_size=20), st.integers(0, 2**40))
def test_generated_callbacks_verify_only_with_their_body(body: bytes, secret: str, t: int) -> None:
    header = sign_callback(secret, body, t)
    assert verify_callback(secret, header, body, now=t)
    assert not verify_callback(secret, header, body + b"\x00", now=t)
    assert not verify_callback(secret + "x", header, body, now=t)


@given(st.text(max_size=120))
def test_arbitrary_signature_headers_never_crash(header: str) -> None:
    assert verify_callback("whsec_x", header, BODY, now=NOW) is False

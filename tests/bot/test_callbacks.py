"""Standard Webhooks signatures (`webhook-id`, `webhook-timestamp`, `webhook-signature`) and
the mapping of secrets onto HMAC keys, checked against the `standardwebhooks` library."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import pytest
import standardwebhooks
from hypothesis import given
from hypothesis import strategies as st

from bot.approvals.grants import callback_secret
from cosigner.errors import InvalidSignature
from cosigner.webhooks import sign, signing_key, verify_request

SECRET = "grant-test-secret-" + "k" * 24
NOW = 1_800_000_000

BODY = json.dumps({"approvalId": "apr_1", "status": "approved"}).encode()


def test_signature_round_trip_and_its_header_shapes() -> None:
    secret = callback_secret(SECRET, "acme")
    headers = sign(secret, "dlv_1", NOW, BODY)
    assert headers["webhook-id"] == "dlv_1" and headers["webhook-timestamp"] == str(NOW)
    version, mac = headers["webhook-signature"].split(",")
    assert version == "v1" and len(base64.b64decode(mac)) == 32
    assert verify_request(BODY, headers, secret, now=NOW) == "dlv_1"
    assert verify_request(BODY, headers, secret, now=NOW + 299)
    assert verify_request(BODY, headers, secret, now=NOW - 299), "a little clock skew is fine"


def test_callback_secret_is_per_tenant_stable_and_a_standard_webhooks_secret() -> None:
    assert callback_secret(SECRET, "acme") == callback_secret(SECRET, "acme")
    assert callback_secret(SECRET, "acme") != callback_secret(SECRET, "globex")
    assert callback_secret(SECRET, "acme") != callback_secret(SECRET + "x", "acme")
    printed = callback_secret(SECRET, "acme")
    assert printed.startswith("whsec_")
    # The key is what the specification says: base64 of the part after whsec_.
    assert signing_key(printed) == base64.b64decode(printed.removeprefix("whsec_"))


@pytest.mark.parametrize(
    "secret", [callback_secret(SECRET, "acme"), "whsec_" + base64.b64encode(b"k" * 24).decode()]
)
def test_the_standardwebhooks_library_signs_what_cosigner_signs(secret: str) -> None:
    ours = sign(secret, "msg_1", NOW, BODY)["webhook-signature"]
    theirs = standardwebhooks.Webhook(secret).sign("msg_1", datetime.fromtimestamp(NOW, UTC), BODY.decode())
    assert ours == theirs


def test_a_secret_without_the_prefix_is_its_utf8_bytes() -> None:
    ours = sign("app-secret-\u00e9", "msg_1", NOW, BODY)["webhook-signature"]
    library = standardwebhooks.Webhook("app-secret-\u00e9".encode())
    assert ours == library.sign("msg_1", datetime.fromtimestamp(NOW, UTC), BODY.decode())


@pytest.mark.parametrize("secret", ["", "whsec_", "whsec_not base64!"])
def test_an_unusable_secret_is_refused_naming_the_fix(secret: str) -> None:
    with pytest.raises(ValueError, match="secret"):
        signing_key(secret)


def test_refused_on_altered_body_id_time_wrong_secret_or_stale() -> None:
    secret = callback_secret(SECRET, "acme")
    headers = sign(secret, "dlv_1", NOW, BODY)
    for body in (BODY + b" ", BODY.replace(b"approved", b"denied")):
        with pytest.raises(InvalidSignature, match="does not match"):
            verify_request(body, headers, secret, now=NOW)
    with pytest.raises(InvalidSignature, match="does not match"):
        verify_request(BODY, headers, callback_secret(SECRET, "globex"), now=NOW)
    with pytest.raises(InvalidSignature, match="does not match"):
        verify_request(BODY, {**headers, "webhook-id": "dlv_2"}, secret, now=NOW)
    with pytest.raises(InvalidSignature, match="does not match"):
        verify_request(BODY, {**headers, "webhook-timestamp": str(NOW + 100)}, secret, now=NOW + 100)
    for now, tolerance in ((NOW + 301, 300), (NOW - 301, 300), (NOW + 61, 60)):
        with pytest.raises(InvalidSignature, match="stale"):
            verify_request(BODY, headers, secret, now=now, tolerance=tolerance)


def test_one_matching_signature_among_several_is_enough() -> None:
    headers = sign("whsec_" + base64.b64encode(b"new").decode(), "dlv_1", NOW, BODY)
    old = sign("whsec_" + base64.b64encode(b"old").decode(), "dlv_1", NOW, BODY)["webhook-signature"]
    rotated = {**headers, "webhook-signature": f"{old} {headers['webhook-signature']}"}
    assert verify_request(BODY, rotated, "whsec_" + base64.b64encode(b"new").decode(), now=NOW)


@pytest.mark.parametrize(
    "signature",
    ["", "garbage", "v1,", "v1," + "0" * 44, "v2," + "0" * 44, "v1,\u00e9\u00e9", "v1,日本", ",", "v1 v1"],
)
def test_garbage_signature_headers_are_refused(signature: str) -> None:
    headers = {"webhook-id": "dlv_1", "webhook-timestamp": str(NOW), "webhook-signature": signature}
    with pytest.raises(InvalidSignature):
        verify_request(BODY, headers, "whsec_eA==", now=NOW)


@given(st.binary(max_size=200), st.text(min_size=1, max_size=20), st.integers(0, 2**40))
def test_generated_requests_verify_only_with_their_body(body: bytes, secret: str, t: int) -> None:
    secret = "k" + secret  # not whsec_-prefixed: the UTF-8 bytes are the key
    headers = sign(secret, "dlv_x", t, body)
    assert verify_request(body, headers, secret, now=t) == "dlv_x"
    with pytest.raises(InvalidSignature):
        verify_request(body + b"\x00", headers, secret, now=t)
    with pytest.raises(InvalidSignature):
        verify_request(body, headers, secret + "x", now=t)


@given(st.text(max_size=120), st.text(max_size=20))
def test_arbitrary_headers_never_crash(signature: str, stamp: str) -> None:
    headers = {"webhook-id": "dlv_1", "webhook-timestamp": stamp, "webhook-signature": signature}
    with pytest.raises(InvalidSignature):
        verify_request(BODY, headers, "whsec_eA==", now=NOW)

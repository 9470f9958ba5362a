"""Grants (Ed25519 JWS bound to tenant, tool call, tool and digest) and callback signatures."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.grants import GrantSigner, callback_secret
from contracts.digest import parameters_digest
from contracts.grants import (
    GRANT_TYPE,
    GrantRefused,
    b64url,
    b64url_decode,
    sign_callback,
    verify_callback,
    verify_grant,
)

SECRET = "grant-test-secret-" + "k" * 24
NOW = 1_800_000_000
PARAMS = {"orderId": "ord_4421", "amountCents": 12900, "cardToken": "tok_x"}


def claims(**overrides: Any) -> dict[str, Any]:
    base = {
        "iss": "cosigner",
        "sub": "apr_1",
        "tenant": "acme",
        "executionId": "run_81",
        "toolCallId": "call_7",
        "toolName": "issue_refund",
        "digest": parameters_digest(PARAMS),
        "iat": NOW,
        "exp": NOW + 300,
    }
    base.update(overrides)
    return base


def verify(token: str, signer: GrantSigner | None = None, **kw: Any) -> Any:
    args: dict[str, Any] = {
        "tool_name": "issue_refund",
        "parameters": PARAMS,
        "tool_call_id": "call_7",
        "tenant": "acme",
        "now": NOW + 10,
    }
    args.update(kw)
    return verify_grant(token, (signer or GrantSigner(SECRET)).jwks(), **args)


def refused(token: str, *words: str, signer: GrantSigner | None = None, **kw: Any) -> str:
    with pytest.raises(GrantRefused) as info:
        verify(token, signer, **kw)
    message = str(info.value)
    for w in words:
        assert w in message, message
    return message


def test_good_grant_verifies_and_returns_its_claims() -> None:
    token = GrantSigner(SECRET).sign(claims())
    got = verify(token)
    assert got.tenant == "acme"
    assert got.approval_id == "apr_1"
    assert got.execution_id == "run_81"
    assert got.tool_call_id == "call_7"
    assert got.tool_name == "issue_refund"
    assert got.digest == parameters_digest(PARAMS)
    assert (got.issued_at, got.expires_at) == (NOW, NOW + 300)
    # Key order of the parameters does not matter; only their content does.
    assert verify(token, parameters=dict(reversed(list(PARAMS.items())))).tool_name == "issue_refund"
    # tool_call_id and tenant are optional checks.
    assert verify(token, tool_call_id=None, tenant=None).approval_id == "apr_1"


def test_jwks_shape() -> None:
    signer = GrantSigner(SECRET)
    jwks = signer.jwks()
    (jwk,) = jwks["keys"]
    assert jwk["kty"] == "OKP" and jwk["crv"] == "Ed25519" and jwk["alg"] == "EdDSA"
    assert jwk["kid"] == signer.kid
    assert len(b64url_decode(jwk["x"])) == 32
    assert "d" not in jwk, "the private key must never be published"
    jwks["keys"][0]["kid"] = "changed"
    assert signer.jwks()["keys"][0]["kid"] == signer.kid, "jwks() hands out a copy"
    header = json.loads(b64url_decode(signer.sign(claims()).split(".")[0]))
    assert header == {"alg": "EdDSA", "typ": GRANT_TYPE, "kid": signer.kid}


@pytest.mark.parametrize(
    "change", [{"amountCents": 12901}, {"cardToken": "tok_y"}, {"extra": True}, {"orderId": "ord_4422"}]
)
def test_altered_parameters_are_refused(change: dict[str, Any]) -> None:
    token = GrantSigner(SECRET).sign(claims())
    refused(token, "parameters differ", parameters={**PARAMS, **change})


def test_missing_parameter_is_refused() -> None:
    token = GrantSigner(SECRET).sign(claims())
    refused(token, "parameters differ", parameters={"orderId": "ord_4421", "amountCents": 12900})


def test_other_tool_call_or_tenant_is_refused() -> None:
    token = GrantSigner(SECRET).sign(claims())
    assert "delete_account" in refused(token, "issue_refund", tool_name="delete_account")
    refused(token, "another tool call", tool_call_id="call_8")
    refused(token, "another tenant", tenant="globex")


def test_expiry_with_leeway() -> None:
    token = GrantSigner(SECRET).sign(claims())
    assert verify(token, now=NOW + 300)
    assert verify(token, now=NOW + 305), "five seconds of leeway for clock skew"
    refused(token, "expired", now=NOW + 306)
    refused(token, "expired", now=NOW + 10_000)
    refused(token, "expired", now=NOW + 301, leeway=0)


def test_signers_from_the_same_secret_agree_and_others_do_not() -> None:
    a, b = GrantSigner(SECRET), GrantSigner(SECRET)
    assert a.jwks() == b.jwks()
    assert a.sign(claims()) == b.sign(claims()), "replicas issue the same token"
    assert verify(a.sign(claims()), signer=b)
    other = GrantSigner(SECRET + "-other")
    assert other.kid != a.kid
    assert other.jwks() != a.jwks()
    refused(other.sign(claims()), "unknown key id", signer=a)


def test_token_from_another_key_under_our_kid_is_refused() -> None:
    ours, theirs = GrantSigner(SECRET), GrantSigner("attacker-secret")
    forged = theirs.sign(claims())
    _head, body, sig = forged.split(".")
    our_head = ours.sign(claims()).split(".")[0]
    refused(f"{our_head}.{body}.{sig}", "signature does not verify")


def test_tampered_payload_is_refused() -> None:
    signer = GrantSigner(SECRET)
    head, _body, sig = signer.sign(claims()).split(".")
    for evil in [
        claims(exp=NOW + 10**6),
        claims(toolName="delete_account"),
        claims(digest=parameters_digest({"amountCents": 1})),
        claims(tenant="globex"),
    ]:
        body = b64url(json.dumps(evil, sort_keys=True, separators=(",", ":")).encode())
        refused(f"{head}.{body}.{sig}", "signature does not verify")
    # A signature flipped by one byte.
    raw = bytearray(b64url_decode(sig))
    raw[0] ^= 1
    refused(f"{head}.{_body}.{b64url(bytes(raw))}", "signature does not verify")


def test_other_algorithms_and_types_are_refused() -> None:
    signer = GrantSigner(SECRET)
    _head, body, sig = signer.sign(claims()).split(".")
    for header in [
        {"alg": "none", "typ": GRANT_TYPE, "kid": signer.kid},
        {"alg": "HS256", "typ": GRANT_TYPE, "kid": signer.kid},
        {"alg": "EdDSA", "typ": "JWT", "kid": signer.kid},
    ]:
        head = b64url(json.dumps(header).encode())
        refused(f"{head}.{body}.{sig}", "not a Cosigner grant")
        refused(f"{head}.{body}.", "not a Cosigner grant")


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "a",
        "a.b",
        "a.b.c.d",
        "...",
        "not a token at all",
        "ey.ey.ey",
        b64url(b"[1]") + "." + b64url(b"{}") + ".AA",
        b64url(b'"EdDSA"') + "." + b64url(b"{}") + ".AA",
        b64url(b"null") + ".e30.AA",
        "\u00e9.\u00e9.\u00e9",
    ],
)
def test_garbage_is_refused(garbage: str) -> None:
    refused(garbage)


@given(st.text(max_size=80))
def test_arbitrary_text_is_refused_not_crashing(text: str) -> None:
    with pytest.raises(GrantRefused):
        verify(text)


# --- callbacks -----------------------------------------------------------------------------

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

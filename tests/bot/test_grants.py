"""Grants (Ed25519 JWS over JCS claims, bound to tenant, approval, tool call, tool and digest)
and callback signatures."""

from __future__ import annotations

import json
import time
from typing import Any

import jwt
import pytest
from hypothesis import given
from hypothesis import strategies as st
from joserfc import jwt as jose_jwt
from joserfc.errors import BadSignatureError
from joserfc.jwk import KeySet
from jwt.utils import base64url_decode, base64url_encode

from bot.approvals.grants import GrantSigner
from contracts.digest import canonical_json, parameters_digest
from contracts.grants import (
    GRANT_TYPE,
    GrantRefused,
    jwk_thumbprint,
    verify_grant,
)

SECRET = "grant-test-secret-" + "k" * 24
NOW = 1_800_000_000
PARAMS = {"orderId": "ord_4421", "amountCents": 12900, "cardToken": "tok_x"}


def b64(data: bytes) -> str:
    return base64url_encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    return base64url_decode(text.encode("ascii"))


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


def key_set(jwks: dict[str, Any]) -> KeySet:
    """joserfc's key set of a JWKS body."""
    return KeySet.import_key_set({"keys": jwks["keys"]})


def verify(token: str, signer: GrantSigner | None = None, **kw: Any) -> Any:
    args: dict[str, Any] = {
        "tool_name": "issue_refund",
        "parameters": PARAMS,
        "tool_call_id": "call_7",
        "tenant": "acme",
        "approval_id": "apr_1",
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
    # tool_call_id, tenant and approval_id are optional checks.
    assert verify(token, tool_call_id=None, tenant=None, approval_id=None).approval_id == "apr_1"


def test_payload_is_the_jcs_form_of_the_claims() -> None:
    _head, body, _sig = GrantSigner(SECRET).sign(claims(toolName="Zoë_tool")).split(".")
    assert unb64(body) == canonical_json(claims(toolName="Zoë_tool"))


def test_jwks_shape_and_kid_is_the_rfc7638_thumbprint() -> None:
    signer = GrantSigner(SECRET)
    jwks = signer.jwks()
    (jwk,) = jwks["keys"]
    assert set(jwk) == {"kty", "crv", "x", "kid", "alg", "use"}, "the private key is never published"
    assert (jwk["kty"], jwk["crv"], jwk["alg"], jwk["use"]) == ("OKP", "Ed25519", "EdDSA", "sig")
    assert len(unb64(jwk["x"])) == 32
    assert jwk["kid"] == signer.kid == jwk_thumbprint(jwk)
    # Another implementation computes the same thumbprint.
    assert key_set(jwks).keys[0].thumbprint() == signer.kid
    jwks["keys"][0]["kid"] = "changed"
    assert signer.jwks()["keys"][0]["kid"] == signer.kid, "jwks() hands out a copy"
    header = json.loads(unb64(signer.sign(claims()).split(".")[0]))
    assert header == {"alg": "EdDSA", "typ": GRANT_TYPE, "kid": signer.kid}


def test_thumbprint_matches_rfc8037_example() -> None:
    # RFC 8037 appendix A.3: the thumbprint of the appendix A.2 public key.
    jwk = {"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
    assert jwk_thumbprint(jwk) == "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"


@pytest.mark.parametrize(
    "change", [{"amountCents": 12901}, {"cardToken": "tok_y"}, {"extra": True}, {"orderId": "ord_4422"}]
)
def test_altered_parameters_are_refused(change: dict[str, Any]) -> None:
    token = GrantSigner(SECRET).sign(claims())
    refused(token, "parameters differ", parameters={**PARAMS, **change})


def test_missing_parameter_is_refused() -> None:
    token = GrantSigner(SECRET).sign(claims())
    refused(token, "parameters differ", parameters={"orderId": "ord_4421", "amountCents": 12900})


def test_parameters_without_a_canonical_form_are_refused() -> None:
    token = GrantSigner(SECRET).sign(claims())
    refused(token, "no canonical JSON form", "NaN", parameters={**PARAMS, "amountCents": float("nan")})


def test_other_tool_call_tenant_or_approval_is_refused() -> None:
    token = GrantSigner(SECRET).sign(claims())
    assert "delete_account" in refused(token, "issue_refund", tool_name="delete_account")
    refused(token, "another tool call", tool_call_id="call_8")
    refused(token, "another tenant", tenant="globex")
    refused(token, "another approval", approval_id="apr_2")


def test_expiry_with_an_injected_clock() -> None:
    token = GrantSigner(SECRET).sign(claims())
    assert verify(token, now=NOW + 299)
    assert verify(token, now=NOW + 304), "five seconds of leeway for clock skew"
    refused(token, "expired", now=NOW + 305)
    refused(token, "expired", now=NOW + 10_000)
    refused(token, "expired", now=NOW + 300, leeway=0)
    assert verify(token, now=NOW - 5), "an executor clock a little behind is fine"
    refused(token, "issued in the future", now=NOW - 6)


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
    head, body, sig = signer.sign(claims()).split(".")
    for evil in [
        claims(exp=NOW + 10**6),
        claims(toolName="delete_account"),
        claims(digest=parameters_digest({"amountCents": 1})),
        claims(tenant="globex"),
        claims(sub="apr_2"),
    ]:
        refused(f"{head}.{b64(canonical_json(evil))}.{sig}", "signature does not verify")
    # A signature flipped by one bit.
    raw = bytearray(unb64(sig))
    raw[0] ^= 1
    refused(f"{head}.{body}.{b64(bytes(raw))}", "signature does not verify")


def test_alg_none_and_hmac_keyed_with_the_public_key_are_refused() -> None:
    signer = GrantSigner(SECRET)
    headers = {"kid": signer.kid, "typ": GRANT_TYPE}
    public_x = signer.jwks()["keys"][0]["x"]
    unsigned = jwt.encode(claims(), "", algorithm="none", headers=headers)
    # The classic confusion: an HMAC "signed" with the published key as its secret.
    for secret in (public_x, unb64(public_x)):
        confused = jwt.encode(claims(), secret, algorithm="HS256", headers=headers)
        refused(confused, "not a Cosigner grant", "EdDSA")
    refused(unsigned, "not a Cosigner grant", "EdDSA")
    _head, body, sig = signer.sign(claims()).split(".")
    for header in [
        {"alg": "none", "typ": GRANT_TYPE, "kid": signer.kid},
        {"alg": "HS256", "typ": GRANT_TYPE, "kid": signer.kid},
        {"alg": "EdDSA", "typ": "JWT", "kid": signer.kid},
    ]:
        head = b64(json.dumps(header).encode())
        refused(f"{head}.{body}.{sig}", "not a Cosigner grant")
        refused(f"{head}.{body}.", "not a Cosigner grant")


def test_only_ed25519_keys_in_the_jwks_are_used() -> None:
    signer = GrantSigner(SECRET)
    public_x = signer.jwks()["keys"][0]["x"]
    token = signer.sign(claims())
    # An `oct` key under our kid (whose secret is the public key) must not verify anything.
    oct_only = {"keys": [{"kty": "oct", "k": public_x, "kid": signer.kid, "alg": "HS256"}]}
    with pytest.raises(GrantRefused, match="unknown key id"):
        verify_grant(token, oct_only, tool_name="issue_refund", parameters=PARAMS, now=NOW)
    not_jwks: list[object] = [[], {"keys": "x"}, {}, None]
    for not_a_jwks in not_jwks:
        with pytest.raises(GrantRefused, match="not a JWKS"):
            verify_grant(token, not_a_jwks, tool_name="issue_refund", parameters=PARAMS, now=NOW)  # type: ignore[arg-type]


def test_claims_missing_or_of_the_wrong_type_are_refused() -> None:
    signer = GrantSigner(SECRET)
    for name in ["iss", "sub", "tenant", "toolCallId", "digest", "iat", "exp"]:
        partial = claims()
        del partial[name]
        refused(signer.sign(partial), "lacks", name)
    refused(signer.sign(claims(iss="someone-else")), "not issued by")
    refused(signer.sign(claims(exp=str(NOW + 300))), "'exp'", "whole seconds")
    refused(signer.sign(claims(tenant=["acme"])), "'tenant'", "string")


def test_another_jose_implementation_verifies_the_grant() -> None:
    signer = GrantSigner(SECRET)
    issued = int(time.time())
    token = signer.sign(claims(iat=issued, exp=issued + 300))
    # A plain PyJWT call with nothing from Cosigner but the JWKS.
    key = jwt.PyJWKSet.from_dict(signer.jwks())[jwt.get_unverified_header(token)["kid"]]
    assert jwt.decode(token, key, algorithms=["EdDSA"], issuer="cosigner") == claims(
        iat=issued, exp=issued + 300
    )
    # joserfc, written separately from PyJWT, agrees; it flags the EdDSA name as superseded
    # by RFC 9864's "Ed25519", which names the same algorithm.
    with pytest.warns(UserWarning, match="EdDSA"):
        decoded = jose_jwt.decode(token, key_set(signer.jwks()), algorithms=["EdDSA"])
    assert decoded.claims == claims(iat=issued, exp=issued + 300)
    assert decoded.header["kid"] == signer.kid
    impostor = GrantSigner("another-secret").jwks()
    impostor["keys"][0]["kid"] = signer.kid
    with pytest.warns(UserWarning, match="EdDSA"), pytest.raises(BadSignatureError):
        jose_jwt.decode(token, key_set(impostor), algorithms=["EdDSA"])


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
        b64(b"[1]") + "." + b64(b"{}") + ".AA",
        b64(b'"EdDSA"') + "." + b64(b"{}") + ".AA",
        b64(b"null") + ".e30.AA",
        "\u00e9.\u00e9.\u00e9",
    ],
)
def test_garbage_is_refused(garbage: str) -> None:
    refused(garbage)


@given(st.text(max_size=80))
def test_arbitrary_text_is_refused_not_crashing(text: str) -> None:
    with pytest.raises(GrantRefused):
        verify(text)

"""Check a grant, or a callback signature, without calling Cosigner.

A tool executor holding an approved decision runs::

    from contracts.grants import verify_grant
    claims = verify_grant(token, jwks, tool_name="issue_refund", parameters=params)

`jwks` is the JSON of `GET /v1/keys` (fetched once and cached). Any mismatch raises
`GrantRefused`; do not run the call then.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from contracts.digest import parameters_digest

GRANT_TYPE = "cosigner-grant+jwt"


class GrantRefused(Exception):
    """The grant does not allow this call; the message says which check failed."""


@dataclass(frozen=True)
class GrantClaims:
    """What a verified grant allows."""

    tenant: str
    approval_id: str
    execution_id: str
    tool_call_id: str
    tool_name: str
    digest: str
    issued_at: int
    expires_at: int


def b64url(data: bytes) -> str:
    """Unpadded base64url, as JWS uses."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Decode unpadded base64url."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _public_keys(jwks: Mapping[str, Any]) -> dict[str, Ed25519PublicKey]:
    keys = {}
    for jwk in jwks.get("keys", []):
        if jwk.get("kty") == "OKP" and jwk.get("crv") == "Ed25519":
            keys[str(jwk.get("kid"))] = Ed25519PublicKey.from_public_bytes(b64url_decode(jwk["x"]))
    return keys


def verify_grant(
    token: str,
    jwks: Mapping[str, Any],
    *,
    tool_name: str,
    parameters: Any,
    tool_call_id: str | None = None,
    tenant: str | None = None,
    now: float | None = None,
    leeway: int = 5,
) -> GrantClaims:
    """Verify signature, expiry, tool and the digest of the parameters about to be used."""
    try:
        head_b64, body_b64, sig_b64 = token.split(".")
        header = json.loads(b64url_decode(head_b64))
        claims = json.loads(b64url_decode(body_b64))
        signature = b64url_decode(sig_b64)
    except (ValueError, TypeError) as exc:
        raise GrantRefused("malformed grant: expected a compact JWS of three parts") from exc
    # Valid JSON is not enough: `[1]` or `null` must be refused, not crash on `.get`.
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise GrantRefused("malformed grant: header and claims must be JSON objects")
    if header.get("alg") != "EdDSA" or header.get("typ") != GRANT_TYPE:
        raise GrantRefused("not a Cosigner grant (alg must be EdDSA, typ cosigner-grant+jwt)")
    key = _public_keys(jwks).get(str(header.get("kid")))
    if key is None:
        raise GrantRefused(f"unknown key id {header.get('kid')!r}; refresh GET /v1/keys")
    try:
        key.verify(signature, f"{head_b64}.{body_b64}".encode("ascii"))
    except InvalidSignature as exc:
        raise GrantRefused("signature does not verify: the grant was altered or forged") from exc
    current = time.time() if now is None else now
    if current > int(claims["exp"]) + leeway:
        raise GrantRefused("grant expired; ask Cosigner for a fresh decision")
    if claims.get("toolName") != tool_name:
        raise GrantRefused(f"grant is for tool {claims.get('toolName')!r}, not {tool_name!r}")
    if tool_call_id is not None and claims.get("toolCallId") != tool_call_id:
        raise GrantRefused("grant is for another tool call")
    if tenant is not None and claims.get("tenant") != tenant:
        raise GrantRefused("grant is for another tenant")
    if claims.get("digest") != parameters_digest(parameters):
        raise GrantRefused("parameters differ from the ones the approver saw; do not run the call")
    return GrantClaims(
        tenant=claims["tenant"],
        approval_id=claims["sub"],
        execution_id=claims["executionId"],
        tool_call_id=claims["toolCallId"],
        tool_name=claims["toolName"],
        digest=claims["digest"],
        issued_at=int(claims["iat"]),
        expires_at=int(claims["exp"]),
    )


def sign_callback(secret: str, body: bytes, timestamp: int) -> str:
    """The `Cosigner-Signature` header value for a callback body."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify_callback(
    secret: str, header: str, body: bytes, *, tolerance: int = 300, now: float | None = None
) -> bool:
    """True if `Cosigner-Signature` matches the raw body and is fresh."""
    try:
        parts = dict(p.split("=", 1) for p in header.split(","))
        timestamp = int(parts["t"])
    except (ValueError, KeyError):
        return False
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        return False
    expected = sign_callback(secret, body, timestamp).split(",v1=", 1)[1]
    # Compare bytes: compare_digest raises on non-ASCII str, and a header is untrusted input.
    return hmac.compare_digest(expected.encode(), parts.get("v1", "").encode(errors="replace"))

"""Check a grant without calling Cosigner (callback signatures: `cosigner.webhooks`).

A grant is a compact JWS (RFC 7515) signed with Ed25519 (`alg: EdDSA`, RFC 8037) whose
payload is the JCS form of its claims. A tool executor holding an approved decision runs::

    from cosigner.grants import verify_grant
    claims = verify_grant(token, jwks, tool_name="issue_refund", parameters=params)

`jwks` is the JSON of `GET /v1/keys` (fetched once and cached). Any mismatch raises
`GrantRefused`; do not run the call then. Signatures are checked by PyJWT, so any other
JOSE library that speaks EdDSA checks the same token the same way.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jwt
from jwt.utils import base64url_encode

from cosigner.digest import CanonicalFormError, canonical_json, parameters_digest
from cosigner.operations import ExecuteCall, arguments_digest

GRANT_TYPE = "cosigner-grant+jwt"
ALGORITHM = "EdDSA"
ISSUER = "cosigner"
TEXT_CLAIMS = ("sub", "tenant", "executionId", "toolCallId", "toolName", "digest")
REQUIRED_CLAIMS = ("iss", "iat", "exp", *TEXT_CLAIMS)
CONTRACT_CLAIMS = ("argumentsDigest", "previewDigest")
"""An operation's grant also binds the contract: its arguments (with the preview) and preview."""


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
    arguments_digest: str | None = None  # an operation's grant: the contract it approves
    preview_digest: str | None = None  # an operation's grant: the preview the approver saw
    # A grant past a quorum above 1: every approver who made it, as (surface, id) pairs.
    approvers: tuple[tuple[str, str], ...] = ()
    # How the approvers authenticated (RFC 8176): ("webauthn",) when the policy asked for
    # step-up and each Approve was confirmed with a passkey.
    amr: tuple[str, ...] = ()


def jwk_thumbprint(jwk: Mapping[str, Any]) -> str:
    """The RFC 7638 SHA-256 thumbprint of an Ed25519 public JWK, base64url: its `kid`."""
    members = {"crv": jwk["crv"], "kty": jwk["kty"], "x": jwk["x"]}
    return base64url_encode(hashlib.sha256(canonical_json(members)).digest()).decode("ascii")


def public_keys(jwks: Mapping[str, Any]) -> dict[str, jwt.PyJWK]:
    """The Ed25519 verification keys of a JWKS by `kid`, parsed once for many grants
    (`verify_grant_with_keys`); raises GrantRefused if `jwks` is not a key set."""
    return _public_keys(jwks)


def _public_keys(jwks: Mapping[str, Any]) -> dict[str, jwt.PyJWK]:
    if not isinstance(jwks, Mapping) or not isinstance(jwks.get("keys"), list):
        raise GrantRefused('the key set is not a JWKS ({"keys": [...]}); pass the JSON of GET /v1/keys')
    keys = {}
    for jwk in jwks["keys"]:
        # Only Ed25519 verification keys count: an `oct` or RSA entry under the same kid
        # must not become a way to check the token with another algorithm.
        if not isinstance(jwk, Mapping) or (jwk.get("kty"), jwk.get("crv")) != ("OKP", "Ed25519"):
            continue
        if "d" in jwk or not isinstance(jwk.get("kid"), str):
            continue
        try:
            keys[jwk["kid"]] = jwt.PyJWK.from_dict(dict(jwk), algorithm=ALGORITHM)
        except jwt.PyJWTError:
            continue
    return keys


def _header(token: str) -> dict[str, Any]:
    # Only to pick the key: PyJWT then decodes the same header strictly, and the signature
    # covers it, so a header read differently here cannot verify.
    try:
        head, _payload, _signature = token.split(".")
        header = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, TypeError, AttributeError, binascii.Error) as exc:
        raise GrantRefused("malformed grant: expected a compact JWS of three base64url parts") from exc
    if not isinstance(header, dict):
        raise GrantRefused("malformed grant: expected a compact JWS of three base64url parts")
    return header


def _signed_claims(token: str, keys: Mapping[str, jwt.PyJWK]) -> dict[str, Any]:
    """The claims of `token` once its header, key and signature check out."""
    header = _header(token)
    if header.get("alg") != ALGORITHM or header.get("typ") != GRANT_TYPE:
        raise GrantRefused(f"not a Cosigner grant (alg must be {ALGORITHM}, typ {GRANT_TYPE})")
    key = keys.get(str(header.get("kid")))
    if key is None:
        raise GrantRefused(f"unknown key id {header.get('kid')!r}; refresh GET /v1/keys")
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=[ALGORITHM],
            issuer=ISSUER,
            # Times are checked below against the caller's clock, which tests can set.
            options={"verify_exp": False, "verify_iat": False, "verify_nbf": False, "require": []},
        )
    except jwt.InvalidSignatureError as exc:
        raise GrantRefused("signature does not verify: the grant was altered or forged") from exc
    except jwt.MissingRequiredClaimError as exc:
        raise GrantRefused(f"grant lacks the {exc.claim!r} claim") from exc
    except jwt.InvalidIssuerError as exc:
        raise GrantRefused(f"grant was not issued by {ISSUER!r}") from exc
    except (jwt.PyJWTError, ValueError, TypeError) as exc:
        raise GrantRefused(f"malformed grant: {exc}") from exc
    for name in REQUIRED_CLAIMS:
        if name not in claims:
            raise GrantRefused(f"grant lacks the {name!r} claim")
    for name in TEXT_CLAIMS:
        if not isinstance(claims[name], str):
            raise GrantRefused(f"grant claim {name!r} must be a string")
    for name in ("iat", "exp"):
        if not isinstance(claims[name], int) or isinstance(claims[name], bool):
            raise GrantRefused(f"grant claim {name!r} must be whole seconds")
    return claims


def verify_grant(
    token: str,
    jwks: Mapping[str, Any],
    *,
    tool_name: str,
    parameters: Any,
    tool_call_id: str | None = None,
    tenant: str | None = None,
    approval_id: str | None = None,
    now: float | None = None,
    leeway: int = 5,
) -> GrantClaims:
    """Verify signature, lifetime, tool (and call, tenant, approval if given) and the digest
    of the parameters about to be used."""
    return verify_grant_with_keys(
        token,
        _public_keys(jwks),
        tool_name=tool_name,
        parameters=parameters,
        tool_call_id=tool_call_id,
        tenant=tenant,
        approval_id=approval_id,
        now=now,
        leeway=leeway,
    )


def verify_grant_with_keys(
    token: str,
    keys: Mapping[str, jwt.PyJWK],
    *,
    tool_name: str,
    parameters: Any,
    tool_call_id: str | None = None,
    tenant: str | None = None,
    approval_id: str | None = None,
    now: float | None = None,
    leeway: int = 5,
) -> GrantClaims:
    """`verify_grant` with the key set already parsed by `public_keys`."""
    claims = _checked_claims(
        token,
        keys,
        tool_name=tool_name,
        tool_call_id=tool_call_id,
        tenant=tenant,
        approval_id=approval_id,
        now=now,
        leeway=leeway,
    )
    try:
        digest = parameters_digest(parameters)
    except CanonicalFormError as exc:
        raise GrantRefused(f"parameters have no canonical JSON form ({exc})") from exc
    if claims["digest"] != digest:
        raise GrantRefused("parameters differ from the ones the approver saw; do not run the call")
    return _claims(claims)


def verify_execute(
    call: ExecuteCall,
    jwks: Mapping[str, Any],
    *,
    now: float | None = None,
    leeway: int = 5,
) -> GrantClaims:
    """Check an operation's `execute` call against its grant before running it: the signature and
    lifetime, the operation, tenant and proposal, and that the RFC 8785 digests of the arguments
    and preview in the call are the ones the grant binds (`argumentsDigest`, `previewDigest`)."""
    if not call.grant:
        raise GrantRefused("the execute call carries no grant; do not run it")
    claims = _checked_claims(
        call.grant,
        _public_keys(jwks),
        tool_name=call.operation,
        tool_call_id=None,
        tenant=call.tenant,
        approval_id=call.proposalId,
        now=now,
        leeway=leeway,
    )
    for name in CONTRACT_CLAIMS:
        if not isinstance(claims.get(name), str):
            raise GrantRefused(f"grant lacks the {name!r} claim: it is not an operation's grant")
    try:
        contract = arguments_digest(call.operation, call.arguments, call.preview)
        preview = parameters_digest(call.preview.model_dump(mode="json"))
    except CanonicalFormError as exc:
        raise GrantRefused(f"arguments have no canonical JSON form ({exc})") from exc
    if claims["argumentsDigest"] != contract or call.argumentsDigest != contract:
        raise GrantRefused("arguments differ from the contract the approver approved; do not run it")
    if claims["previewDigest"] != preview:
        raise GrantRefused("preview differs from the one the approver saw; do not run it")
    return _claims(claims)


def _checked_claims(
    token: str,
    keys: Mapping[str, jwt.PyJWK],
    *,
    tool_name: str,
    tool_call_id: str | None,
    tenant: str | None,
    approval_id: str | None,
    now: float | None,
    leeway: int,
) -> dict[str, Any]:
    """The claims of a grant whose signature, lifetime, tool and (given) ids check out."""
    claims = _signed_claims(token, keys)
    current = time.time() if now is None else now
    if current >= claims["exp"] + leeway:
        raise GrantRefused("grant expired; ask Cosigner for a fresh decision")
    if claims["iat"] > current + leeway:
        raise GrantRefused("grant is issued in the future; check this machine's clock")
    if claims["toolName"] != tool_name:
        raise GrantRefused(f"grant is for tool {claims['toolName']!r}, not {tool_name!r}")
    if tool_call_id is not None and claims["toolCallId"] != tool_call_id:
        raise GrantRefused("grant is for another tool call")
    if tenant is not None and claims["tenant"] != tenant:
        raise GrantRefused("grant is for another tenant")
    if approval_id is not None and claims["sub"] != approval_id:
        raise GrantRefused("grant is for another approval")
    return claims


def _claims(claims: dict[str, Any]) -> GrantClaims:
    return GrantClaims(
        tenant=claims["tenant"],
        approval_id=claims["sub"],
        execution_id=claims["executionId"],
        tool_call_id=claims["toolCallId"],
        tool_name=claims["toolName"],
        digest=claims["digest"],
        issued_at=claims["iat"],
        expires_at=claims["exp"],
        arguments_digest=claims.get("argumentsDigest"),
        preview_digest=claims.get("previewDigest"),
        approvers=tuple((str(a["surface"]), str(a["by"])) for a in claims.get("approvers") or ()),
        amr=tuple(str(m) for m in claims.get("amr") or () if isinstance(m, str)),
    )

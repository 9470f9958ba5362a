"""Check a grant without calling Cosigner (callback signatures: `cosigner.webhooks`).

A grant is a compact JWS (RFC 7515) signed with Ed25519 (`alg: EdDSA`, RFC 8037) whose
payload is the JCS form of its claims. A tool executor holding an approved decision runs::

    from cosigner.grants import verify_grant
    claims = verify_grant(token, jwks, tool_name="issue_refund", parameters=params)

`jwks` is the JSON of `GET /v1/keys` (fetched once and cached). Any mismatch raises
`GrantRefused`; do not run the call then.

Besides Cosigner's own claims a grant carries the registered `jti` (one per approval and
call) and, where the policy names the executor, `aud`; and RFC 9396 `authorization_details`
(`[{"type": "cosigner_tool_call", "tool", "parameters_digest", "arguments_digest"?}]`).
Pass `audience=` (the executor's own name) to accept a grant that names one (a grant naming
an audience is refused without it, as RFC 7519 asks), and `seen=` (a set, or a callable
that records a `jti` and says whether it had it already) to refuse a second use. Signatures
are checked by PyJWT, so any other JOSE library that speaks EdDSA checks the same token the
same way.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import time
from collections.abc import Callable, Mapping, MutableSet
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
GRANT_DETAIL_TYPE = "cosigner_tool_call"
"""The RFC 9396 `authorization_details` type of a grant: one tool call, bound by its digests."""

Seen = MutableSet[str] | Callable[[str], bool]
"""Grant ids (`jti`) already used: a set this check adds to, or a callable that records one
and returns True when it had it already (a shared store for several executors)."""


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
    grant_id: str | None = None  # `jti` (grants from servers before it have none)
    audience: str | None = None  # `aud`: the executor it is for, where the policy names one


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
            # Times and the audience are checked below (the caller's clock; RFC 7519 on `aud`).
            options={
                "verify_exp": False,
                "verify_iat": False,
                "verify_nbf": False,
                "verify_aud": False,
                "require": [],
            },
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
    audience: str | None = None,
    seen: Seen | None = None,
) -> GrantClaims:
    """Verify signature, lifetime, tool (and call, tenant, approval if given), the digest of
    the parameters about to be used, the audience and `authorization_details`; with `seen`,
    refuse a grant whose `jti` was used already (and record this use)."""
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
        audience=audience,
        seen=seen,
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
    audience: str | None = None,
    seen: Seen | None = None,
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
        audience=audience,
    )
    try:
        digest = parameters_digest(parameters)
    except CanonicalFormError as exc:
        raise GrantRefused(f"parameters have no canonical JSON form ({exc})") from exc
    if claims["digest"] != digest:
        raise GrantRefused("parameters differ from the ones the approver saw; do not run the call")
    _check_details(claims)
    _first_use(claims, seen)
    return _claims(claims)


def verify_execute(
    call: ExecuteCall,
    jwks: Mapping[str, Any],
    *,
    now: float | None = None,
    leeway: int = 5,
    audience: str | None = None,
    seen: Seen | None = None,
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
        audience=audience,
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
    _check_details(claims)
    _first_use(claims, seen)
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
    audience: str | None = None,
) -> dict[str, Any]:
    """The claims of a grant whose signature, lifetime, tool, audience and (given) ids check out."""
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
    _check_audience(claims, audience)
    return claims


def _check_audience(claims: Mapping[str, Any], audience: str | None) -> None:
    """RFC 7519 4.1.3: a grant naming an audience is for that executor only."""
    if "aud" not in claims:
        if audience is not None:
            raise GrantRefused(f"grant names no audience, and this executor is {audience!r}")
        return
    named = claims["aud"]
    names = [named] if isinstance(named, str) else named
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise GrantRefused("grant claim 'aud' must be a string or a list of strings")
    if audience is None:
        raise GrantRefused(f"grant is for audience {names[0]!r}; pass audience= to check it")
    if audience not in names:
        raise GrantRefused(f"grant is for audience {names[0]!r}, not {audience!r}")


def _check_details(claims: Mapping[str, Any]) -> None:
    """RFC 9396 `authorization_details`, where present: exactly one `cosigner_tool_call`
    naming this grant's tool, digest and (an operation's) arguments digest."""
    if "authorization_details" not in claims:
        return  # a grant from a server before them
    details = claims["authorization_details"]
    if not isinstance(details, list) or not all(isinstance(d, dict) for d in details):
        raise GrantRefused("grant claim 'authorization_details' must be a list of objects")
    ours = [d for d in details if d.get("type") == GRANT_DETAIL_TYPE]
    if len(ours) != 1:
        raise GrantRefused(
            f"authorization_details must hold one {GRANT_DETAIL_TYPE!r} entry, not {len(ours)}"
        )
    (detail,) = ours
    if detail.get("tool") != claims["toolName"]:
        raise GrantRefused("authorization_details names another tool than the grant")
    if detail.get("parameters_digest") != claims["digest"]:
        raise GrantRefused("authorization_details names other parameters than the grant")
    if detail.get("arguments_digest") != claims.get("argumentsDigest"):
        raise GrantRefused("authorization_details names other arguments than the grant")


def _first_use(claims: Mapping[str, Any], seen: Seen | None) -> None:
    """Refuse a grant whose `jti` was used already; record this use. Called last, so a grant
    refused for any other reason is not recorded."""
    if seen is None:
        return
    jti = claims.get("jti")
    if not isinstance(jti, str) or not jti:
        raise GrantRefused(
            "grant has no 'jti', so its reuse cannot be checked; ask Cosigner for a fresh decision"
        )
    if callable(seen):
        if seen(jti):
            raise GrantRefused(f"grant {jti} was used already; a grant runs its call once")
        return
    if jti in seen:
        raise GrantRefused(f"grant {jti} was used already; a grant runs its call once")
    seen.add(jti)


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
        grant_id=claims.get("jti") if isinstance(claims.get("jti"), str) else None,
        audience=claims["aud"] if isinstance(claims.get("aud"), str) else None,
    )

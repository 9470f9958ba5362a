"""The grant-signing public keys of `GET /v1/keys`, cached, and offline grant checks against them."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import jwt

from cosigner.grants import GrantClaims, GrantRefused, Seen, public_keys, verify_grant_with_keys

__all__ = ["KeyCache", "key_id", "unverified_tool_name"]

KEYS_PATH = "/v1/keys"
MAX_AGE = 300.0  # seconds, as the server's Cache-Control says


def _part(token: str, index: int) -> dict[str, Any]:
    try:
        text = token.split(".")[index]
        value = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, IndexError, AttributeError) as exc:
        raise GrantRefused("malformed grant: expected a compact JWS of three parts") from exc
    if not isinstance(value, dict):
        raise GrantRefused("malformed grant: header and claims must be JSON objects")
    return value


def key_id(token: str) -> str:
    """The `kid` a grant says it was signed with (unverified: only to pick the key)."""
    return str(_part(token, 0).get("kid"))


def unverified_tool_name(token: str) -> str:
    """The tool a grant names, before any check: used only when the caller did not say."""
    return str(_part(token, 1).get("toolName"))


class KeyCache:
    """The JWKS, fetched on first use, refreshed when stale or when a grant names a new key."""

    def __init__(self) -> None:
        self.jwks: dict[str, Any] | None = None
        self.fetched_at = 0.0
        self._keys: tuple[dict[str, Any], dict[str, jwt.PyJWK]] | None = None
        self._kids: set[str] = set()

    def needs_fetch(self, token: str) -> bool:
        """True when the cache is empty or old, or lacks the grant's key (a rotated key)."""
        now = time.monotonic()
        if self.jwks is None or now - self.fetched_at > MAX_AGE:
            return True
        return key_id(token) not in self._kids

    def store(self, jwks: dict[str, Any]) -> None:
        """Keep a freshly fetched JWKS."""
        self.jwks = jwks
        self.fetched_at = time.monotonic()
        # The key ids, read once per key set; a set that is no JWKS is refused by `verify`.
        keys = jwks.get("keys") if isinstance(jwks, dict) else None
        self._kids = (
            {str(k.get("kid")) for k in keys if isinstance(k, dict)} if isinstance(keys, list) else set()
        )

    def verify(
        self,
        grant: str,
        parameters: Any,
        *,
        tool_name: str | None = None,
        tool_call_id: str | None = None,
        tenant: str | None = None,
        audience: str | None = None,
        seen: Seen | None = None,
    ) -> GrantClaims:
        """Check signature, expiry, tool, digest, audience and (with `seen`) first use offline;
        raise GrantRefused on any mismatch."""
        jwks = self.jwks
        if jwks is None:
            raise GrantRefused("no keys fetched yet from GET /v1/keys")
        # The keys parsed once per fetched key set, not once per grant.
        if self._keys is None or self._keys[0] is not jwks:
            self._keys = (jwks, public_keys(jwks))
        return verify_grant_with_keys(
            grant,
            self._keys[1],
            tool_name=tool_name if tool_name is not None else unverified_tool_name(grant),
            parameters=parameters,
            tool_call_id=tool_call_id,
            tenant=tenant,
            audience=audience,
            seen=seen,
        )

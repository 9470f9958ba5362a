"""Grant signing: an Ed25519 key derived from COSIGNER_SECRET, so every replica agrees."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from contracts.grants import GRANT_TYPE, b64url


class GrantSigner:
    """Signs grants and publishes the public key as a JWKS."""

    def __init__(self, secret: str) -> None:
        seed = hmac.new(secret.encode(), b"cosigner grant key v1", hashlib.sha256).digest()
        self._key = Ed25519PrivateKey.from_private_bytes(seed)
        public = self._key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.kid = "cg1-" + hashlib.sha256(public).hexdigest()[:16]
        self._jwk = {
            "kty": "OKP",
            "crv": "Ed25519",
            "x": b64url(public),
            "kid": self.kid,
            "use": "sig",
            "alg": "EdDSA",
        }
        self._recent: dict[str, str] = {}
        self._header = b64url(
            json.dumps({"alg": "EdDSA", "typ": GRANT_TYPE, "kid": self.kid}, separators=(",", ":")).encode()
        )

    def jwks(self) -> dict[str, Any]:
        """The `GET /v1/keys` body."""
        return {"keys": [dict(self._jwk)]}

    def sign(self, claims: dict[str, Any]) -> str:
        """A compact JWS over `claims`; Ed25519 is deterministic, so the same claims give
        the same token on every replica and every read (which is why caching is safe)."""
        body = b64url(json.dumps(claims, sort_keys=True, separators=(",", ":")).encode())
        token = self._recent.get(body)
        if token is None:
            signing_input = f"{self._header}.{body}".encode("ascii")
            token = f"{self._header}.{body}.{b64url(self._key.sign(signing_input))}"
            if len(self._recent) >= 4096:
                self._recent.clear()
            self._recent[body] = token
        return token


def callback_secret(secret: str, tenant: str) -> str:
    """The tenant's callback signing secret, derived so it need not be stored."""
    return "whsec_" + hmac.new(secret.encode(), f"callback:{tenant}".encode(), hashlib.sha256).hexdigest()

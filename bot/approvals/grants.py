"""Grant signing: an Ed25519 key derived from COSIGNER_SECRET, so every replica agrees."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from jwt.algorithms import OKPAlgorithm

from contracts.digest import canonical_json
from contracts.grants import ALGORITHM, GRANT_TYPE, jwk_thumbprint

# Changing this label changes the key (and its kid): every executor must refetch /v1/keys.
KEY_LABEL = b"cosigner grant signing key v2"


def grant_key(secret: str) -> Ed25519PrivateKey:
    """The Ed25519 signing key, derived from the secret with HKDF-SHA256 (RFC 5869)."""
    seed = HKDF(algorithm=SHA256(), length=32, salt=None, info=KEY_LABEL).derive(secret.encode())
    return Ed25519PrivateKey.from_private_bytes(seed)


class GrantSigner:
    """Signs grants and publishes the public key as a JWKS."""

    def __init__(self, secret: str) -> None:
        self._key = grant_key(secret)
        public = OKPAlgorithm.to_jwk(self._key.public_key(), as_dict=True)
        self.kid = jwk_thumbprint(public)
        self._jwk = {
            "kty": "OKP",
            "crv": "Ed25519",
            "x": public["x"],
            "kid": self.kid,
            "alg": ALGORITHM,
            "use": "sig",
        }
        self._headers = {"kid": self.kid, "typ": GRANT_TYPE}
        self._recent: dict[bytes, str] = {}

    def jwks(self) -> dict[str, Any]:
        """The `GET /v1/keys` body."""
        return {"keys": [dict(self._jwk)]}

    def sign(self, claims: dict[str, Any]) -> str:
        """A compact JWS over the JCS form of `claims`; Ed25519 is deterministic, so the same
        claims give the same token on every replica and every read (which is why caching is safe)."""
        payload = canonical_json(claims, "claims")
        token = self._recent.get(payload)
        if token is None:
            token = jwt.api_jws.encode(payload, self._key, algorithm=ALGORITHM, headers=self._headers)
            if len(self._recent) >= 4096:
                self._recent.clear()
            self._recent[payload] = token
        return token


def callback_secret(secret: str, tenant: str) -> str:
    """The tenant's callback signing secret, derived so it need not be stored: a Standard Webhooks
    secret, `whsec_` and 64 hex characters, whose key is what those characters decode to as base64."""
    return "whsec_" + hmac.new(secret.encode(), f"callback:{tenant}".encode(), hashlib.sha256).hexdigest()

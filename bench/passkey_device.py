"""A software passkey for the benchmarks: an ECDSA P-256 key that answers WebAuthn's
registration (attestation format "none") and assertions with user verification, in the
byte layouts of the WebAuthn specification, so a benchmark drives the server's real
`/inbox/passkeys` and step-up endpoints without a browser."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import struct
from typing import Any
from urllib.parse import urlsplit

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

UP, UV, AT = 0x01, 0x04, 0x40  # authenticator data flags: present, verified, credential data


def b64url(data: bytes) -> str:
    """Base64url without padding, as WebAuthn's JSON carries bytes."""
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def unb64url(text: str) -> bytes:
    """The bytes of a base64url string, padded or not."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Device:
    """One passkey on one relying party (the host of `origin`)."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.rp_hash = hashlib.sha256((urlsplit(origin).hostname or "").encode()).digest()
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.raw_id = secrets.token_bytes(32)
        self.count = 0

    def _cose(self) -> bytes:
        n = self.key.public_key().public_numbers()
        return cbor2.dumps({1: 2, 3: -7, -1: 1, -2: n.x.to_bytes(32, "big"), -3: n.y.to_bytes(32, "big")})

    def _client(self, kind: str, challenge: str) -> bytes:
        return json.dumps({"type": kind, "challenge": challenge, "origin": self.origin}).encode()

    def created(self, options: dict[str, Any]) -> dict[str, Any]:
        """The browser's answer to registration `options` (JSON as the server sent them)."""
        data = (
            self.rp_hash
            + bytes([UP | UV | AT])
            + struct.pack(">I", self.count)
            + bytes(16)  # AAGUID: none
            + struct.pack(">H", len(self.raw_id))
            + self.raw_id
            + self._cose()
        )
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": data})
        return {
            "id": b64url(self.raw_id),
            "rawId": b64url(self.raw_id),
            "type": "public-key",
            "clientExtensionResults": {},
            "response": {
                "clientDataJSON": b64url(self._client("webauthn.create", options["challenge"])),
                "attestationObject": b64url(attestation),
                "transports": ["internal"],
            },
        }

    def asserted(self, options: dict[str, Any]) -> dict[str, Any]:
        """The browser's answer to assertion `options`: signed, user verified, counter + 1."""
        self.count += 1
        data = self.rp_hash + bytes([UP | UV]) + struct.pack(">I", self.count)
        client = self._client("webauthn.get", options["challenge"])
        signature = self.key.sign(data + hashlib.sha256(client).digest(), ec.ECDSA(hashes.SHA256()))
        return {
            "id": b64url(self.raw_id),
            "rawId": b64url(self.raw_id),
            "type": "public-key",
            "clientExtensionResults": {},
            "response": {
                "clientDataJSON": b64url(client),
                "authenticatorData": b64url(data),
                "signature": b64url(signature),
                "userHandle": None,
            },
        }

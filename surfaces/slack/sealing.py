"""Slack tokens sealed at rest: AES-256-GCM under a key derived from COSIGNER_SECRET.

A sealed value reads `cosigner-seal:v1:<key id>:<base64url(nonce | ciphertext | tag)>`.
The key is HKDF-SHA256 of the secret; the key id is a fingerprint of the key, so a value
sealed under another COSIGNER_SECRET is recognised as such instead of failing obscurely.
The column name and the workspace (enterprise id, team id) are authenticated with the
value, so a sealed token copied into another row or column does not open.
"""

from __future__ import annotations

import base64
import hashlib
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

PREFIX = "cosigner-seal:"
VERSION = "v1"
NONCE_BYTES = 12
_INFO = b"cosigner slack token sealing v1"


class SealError(Exception):
    """A stored token that this COSIGNER_SECRET cannot open; the message names the fix."""


def is_sealed(value: str) -> bool:
    """True for a value written by `TokenSeal.seal` (under any key)."""
    return value.startswith(PREFIX)


class TokenSeal:
    """Seals and opens token strings with the key derived from one COSIGNER_SECRET."""

    def __init__(self, secret: str) -> None:
        if not secret:
            raise ValueError("COSIGNER_SECRET is required to seal Slack tokens")
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(secret.encode())
        self._aead = AESGCM(key)
        self.key_id = hashlib.sha256(b"key id:" + key).hexdigest()[:12]

    def seal(self, value: str, context: str) -> str:
        """`value` encrypted and bound to `context` (column and workspace)."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = nonce + self._aead.encrypt(nonce, value.encode(), self._aad(context))
        body = base64.urlsafe_b64encode(sealed).decode("ascii").rstrip("=")
        return f"{PREFIX}{VERSION}:{self.key_id}:{body}"

    def open(self, value: str, context: str) -> str:
        """The token inside a sealed value; a value that is not sealed is returned as is."""
        if not is_sealed(value):
            return value  # written before tokens were sealed; sealed in place at start
        try:
            version, key_id, body = value[len(PREFIX) :].split(":", 2)
        except ValueError:
            raise SealError(
                "a stored Slack token is malformed; reinstall the app in that workspace"
            ) from None
        if version != VERSION:
            raise SealError(f"a stored Slack token uses seal version {version}; upgrade Cosigner")
        if key_id != self.key_id:
            raise SealError(
                f"stored Slack tokens were sealed under key {key_id}, but COSIGNER_SECRET gives key "
                f"{self.key_id}: restore the previous COSIGNER_SECRET, or reinstall the app "
                "in each workspace (see docs/slack.md, rotating COSIGNER_SECRET)"
            )
        try:
            sealed = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            plain = self._aead.decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], self._aad(context))
        except (InvalidTag, ValueError):
            raise SealError(
                "a stored Slack token does not open under this COSIGNER_SECRET (altered, or moved "
                "to another row); reinstall the app in that workspace"
            ) from None
        return plain.decode()

    @staticmethod
    def _aad(context: str) -> bytes:
        return f"{PREFIX}{VERSION}|{context}".encode()

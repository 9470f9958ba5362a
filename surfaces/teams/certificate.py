"""The bot's client certificate: the signed assertion Microsoft Entra ID takes instead of a password.

The Agents SDK's MSAL connection takes a certificate as `AuthTypes.certificate` with
`CERT_PFX_FILE` (and `SEND_X5C` for subject-name/issuer authentication); Cosigner takes the
same: a PKCS#12 file (`.pfx`/`.p12`, with an optional password) or a PEM file holding the
RSA private key and its certificate. Each token request carries a fresh client assertion
(RFC 7523, as Entra ID documents it): a JWT signed RS256 whose header names the certificate
by its SHA-1 thumbprint (`x5t`), with the certificate itself (`x5c`) only when asked; `aud`
the token endpoint, `iss` = `sub` = the app id, a new `jti`, valid for ten minutes.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import pkcs12

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ASSERTION_SECONDS = 600


class CertificateError(ValueError):
    """The certificate file cannot be used; the message names the variable and the fix."""


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass(frozen=True)
class ClientCertificate:
    """An RSA key and its certificate (DER), as the app registration knows it."""

    key: rsa.RSAPrivateKey = field(repr=False)
    der: bytes = field(repr=False)
    send_x5c: bool = False

    @classmethod
    def load(
        cls, path: str | Path, password: str | None = None, *, send_x5c: bool = False
    ) -> ClientCertificate:
        """Read a PKCS#12 or PEM file; `CertificateError` says what is wrong with it."""
        where = f"MICROSOFT_APP_CERTIFICATE ({path})"
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise CertificateError(f"{where} cannot be read: {exc.strerror or exc}") from exc
        secret = password.encode() if password else None
        key: object
        cert: x509.Certificate | None
        try:
            if b"-----BEGIN" in data:
                key = serialization.load_pem_private_key(data, secret)
                cert = x509.load_pem_x509_certificate(data)
            else:
                key, cert, _ = pkcs12.load_key_and_certificates(data, secret)
        except (ValueError, TypeError) as exc:
            raise CertificateError(
                f"{where} is not a PKCS#12 (.pfx) file or a PEM file with a private key and its "
                "certificate, or MICROSOFT_APP_CERTIFICATE_PASSWORD does not open it"
            ) from exc
        if not isinstance(key, rsa.RSAPrivateKey) or cert is None:
            raise CertificateError(
                f"{where} must hold an RSA private key and its certificate (Entra ID signs RS256)"
            )
        public = cert.public_key()
        if (
            not isinstance(public, rsa.RSAPublicKey)
            or public.public_numbers() != key.public_key().public_numbers()
        ):
            raise CertificateError(f"{where}: the private key is not the certificate's")
        return cls(key, cert.public_bytes(serialization.Encoding.DER), send_x5c)

    @property
    def der_base64(self) -> str:
        """The certificate as `x5c` carries it (standard base64 of the DER)."""
        return base64.b64encode(self.der).decode()

    @property
    def thumbprint(self) -> str:
        """The SHA-1 thumbprint Entra ID lists for the certificate (hex, upper case)."""
        return hashlib.sha1(self.der, usedforsecurity=False).hexdigest().upper()

    def assertion(self, app_id: str, token_url: str, now: float) -> str:
        """A signed client assertion for one token request at `token_url`."""
        headers: dict[str, object] = {"x5t": _b64url(bytes.fromhex(self.thumbprint))}
        if self.send_x5c:
            headers["x5c"] = [self.der_base64]
        claims = {
            "aud": token_url,
            "iss": app_id,
            "sub": app_id,
            "jti": str(uuid.uuid4()),
            "nbf": int(now),
            "iat": int(now),
            "exp": int(now) + ASSERTION_SECONDS,
        }
        return jwt.encode(claims, self.key, algorithm="RS256", headers=headers)

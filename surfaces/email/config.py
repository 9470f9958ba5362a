"""The operator's SMTP server, read from `COSIGNER_SMTP_URL` and `COSIGNER_SMTP_FROM`.

`smtp://` is a submission server that must offer STARTTLS (port 587 unless given), `smtps://`
one spoken to over TLS from the first byte (port 465). A user and password in the URL are
sent with AUTH, only once the connection is encrypted. A server on the loopback interface
may be spoken to in clear when it offers no STARTTLS (a relay on the same host).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
TIMEOUT = 30.0  # seconds for each SMTP step; a server slower than this is retried later


class EmailConfigError(ValueError):
    """An SMTP setting that cannot work; the message names the variable to fix."""


@dataclass(frozen=True)
class EmailConfig:
    """Where and how mail is sent, and the inbox the messages link to."""

    host: str
    port: int
    implicit_tls: bool  # smtps://
    sender: str
    public_url: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout: float = TIMEOUT
    # The certificates the server's is checked against; None: the system's. Tests pass their own.
    tls: ssl.SSLContext | None = field(default=None, repr=False, compare=False)

    @property
    def clear_allowed(self) -> bool:
        """True when the server may be spoken to without TLS (loopback only)."""
        return not self.implicit_tls and self.host in LOOPBACK

    def link(self, approval_id: str) -> str:
        """The request's page in the inbox."""
        return f"{self.public_url.rstrip('/')}/inbox/approvals/{approval_id}"

    @classmethod
    def from_url(cls, url: str, sender: str, public_url: str) -> EmailConfig:
        """Read `COSIGNER_SMTP_URL`; `EmailConfigError` names what is wrong with it."""
        parts = urlsplit(url)
        if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
            raise EmailConfigError(
                "COSIGNER_SMTP_URL must be smtp://HOST[:PORT] (STARTTLS) or smtps://HOST[:PORT]"
            )
        try:
            port = parts.port or (465 if parts.scheme == "smtps" else 587)
        except ValueError:
            raise EmailConfigError(
                "COSIGNER_SMTP_URL has a port that is not a number from 1 to 65535"
            ) from None
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise EmailConfigError(
                "COSIGNER_SMTP_URL takes no path or query: write smtp://USER:PASSWORD@HOST:PORT"
            )
        if bool(parts.username) != bool(parts.password):
            raise EmailConfigError(
                "COSIGNER_SMTP_URL names a user without a password (or the reverse): give both"
            )
        return cls(
            host=parts.hostname,
            port=port,
            implicit_tls=parts.scheme == "smtps",
            sender=sender,
            public_url=public_url,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
        )

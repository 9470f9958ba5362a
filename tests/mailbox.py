"""A real SMTP server on loopback (aiosmtpd) that records every message it accepts, and can
be told to answer an SMTP error, to be slow, or to drop the connection, for the next tries.

Optionally with STARTTLS (a self-signed certificate made here, and the client context that
trusts it) and AUTH (one user and password).
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import socket
import ssl
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclass
class Received:
    """One message as the server accepted it: the envelope and the parsed message."""

    sender: str
    recipients: list[str]
    message: EmailMessage
    at: float = field(default_factory=time.time)  # when the server accepted it (bench/reach.py)

    def part(self, subtype: str) -> str:
        """The text of the `text/plain` or `text/html` part."""
        body = self.message.get_body(preferencelist=(subtype,))
        assert body is not None and body.get_content_subtype() == subtype, f"no text/{subtype} part"
        return str(body.get_content())


@dataclass
class Mailbox:
    """The handler: what was accepted, and how the next tries are answered."""

    received: list[Received] = field(default_factory=list)
    attempts: int = 0
    # Each try pops one behaviour: an SMTP reply such as "451 4.3.0 try later", "slow", "drop".
    script: list[str] = field(default_factory=list)
    refuse_rcpt: dict[str, str] = field(default_factory=dict)  # address -> SMTP reply
    slow_seconds: float = 1.0

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, rcpt_options: list[str]
    ) -> str:
        if address in self.refuse_rcpt:
            return self.refuse_rcpt[address]
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.attempts += 1
        what = self.script.pop(0) if self.script else "ok"
        if what == "slow":
            await asyncio.sleep(self.slow_seconds)
            return "451 4.4.2 too slow"
        if what == "drop":
            server.transport.close()
            return "421 4.4.2 closing"
        if what != "ok":
            return what
        parsed = message_from_bytes(envelope.content, policy=policy.default)
        assert isinstance(parsed, EmailMessage)
        self.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos), parsed))
        return "250 2.0.0 accepted"


def _certificate(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


@dataclass
class Running:
    """A started server: its port, its mailbox, and (with TLS) the context that trusts it."""

    port: int
    box: Mailbox
    client_tls: ssl.SSLContext | None = None


@contextmanager
def smtp_server(
    *, tls: bool = False, login: tuple[str, str] | None = None, login_in_clear: bool = False
) -> Iterator[Running]:
    """Serve a recording mailbox on 127.0.0.1 until the block ends (`login_in_clear`: AUTH
    without STARTTLS, as a loopback relay may take it)."""
    box = Mailbox()
    kwargs: dict[str, Any] = {}
    client_tls = None
    with tempfile.TemporaryDirectory() as tmp:
        if tls:
            cert, key = _certificate(Path(tmp))
            server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            server_tls.load_cert_chain(cert, key)
            kwargs.update(tls_context=server_tls, require_starttls=True)
            client_tls = ssl.create_default_context(cafile=str(cert))
        if login is not None:

            def authenticate(
                server: Any, session: Any, envelope: Any, mechanism: str, data: Any
            ) -> AuthResult:
                ok = (
                    isinstance(data, LoginPassword) and (data.login.decode(), data.password.decode()) == login
                )
                return AuthResult(success=ok, handled=False)

            # In clear, AUTH is offered and checked but not required (aiosmtpd warns against
            # requiring it without TLS); a client that sends a wrong password is refused still.
            kwargs.update(
                authenticator=authenticate,
                auth_required=not login_in_clear,
                auth_require_tls=not login_in_clear,
            )
        with socket.socket() as probe:  # a free port (aiosmtpd checks the port it was given)
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        controller = Controller(box, hostname="127.0.0.1", port=port, **kwargs)
        controller.start()
        try:
            yield Running(port, box, client_tls)
        finally:
            controller.stop()

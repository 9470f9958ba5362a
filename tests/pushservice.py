"""A Web Push service on loopback that does what a browser and its push service would: it
checks each message's VAPID JWT (RFC 8292) and decrypts the body with the subscription's
private key and auth secret (RFC 8291, http_ece), as the browser holding them would.

`browser_keys()` makes what a browser makes when it subscribes: a P-256 key pair and a
16-byte auth secret, with the `PushSubscription.toJSON()` shape the inbox receives.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import http_ece
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from surfaces.loopback import LoopbackServer


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass
class BrowserKeys:
    """One browser's subscription keys: the private key stays with the browser."""

    private: ec.EllipticCurvePrivateKey
    auth: bytes

    @property
    def p256dh(self) -> str:
        raw = self.private.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )
        return b64(raw)

    def subscription(self, endpoint: str) -> dict[str, Any]:
        """`PushSubscription.toJSON()`."""
        return {
            "endpoint": endpoint,
            "expirationTime": None,
            "keys": {"p256dh": self.p256dh, "auth": b64(self.auth)},
        }


def browser_keys() -> BrowserKeys:
    return BrowserKeys(ec.generate_private_key(ec.SECP256R1()), os.urandom(16))


@dataclass
class Delivered:
    """One message as the push service took it: its headers, the VAPID claims and the plaintext."""

    path: str
    headers: dict[str, str]
    claims: dict[str, Any]
    vapid_key: str
    plaintext: dict[str, Any]
    at: float = field(default_factory=time.time)  # when the service took it (bench/reach.py)


@dataclass
class PushService:
    """The service: browsers by endpoint path, what it took, and the answers it gives next."""

    port: int = 0
    browsers: dict[str, BrowserKeys] = field(default_factory=dict)
    delivered: list[Delivered] = field(default_factory=list)
    tried: int = 0
    script: list[int] = field(default_factory=list)  # statuses to answer, in order; then 201

    def endpoint(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/push/{name}"

    def subscribe(self, name: str) -> dict[str, Any]:
        """A browser named `name` subscribes: its keys, the toJSON() body."""
        keys = self.browsers[name] = browser_keys()
        return keys.subscription(self.endpoint(name))

    async def receive(self, request: Request) -> Response:
        self.tried += 1
        name = request.path_params["name"]
        status = self.script.pop(0) if self.script else 201
        if status != 201:
            return Response(status_code=status)
        auth = request.headers["authorization"]
        scheme, _, params = auth.partition(" ")
        fields = dict(p.split("=", 1) for p in params.split(","))
        assert scheme == "vapid", auth
        key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64(fields["k"]))
        # The JWT is signed by the key it names (ES256), for this service's origin.
        claims = jwt.decode(
            fields["t"],
            key,
            algorithms=["ES256"],
            audience=f"http://127.0.0.1:{self.port}",
            options={"require": ["aud", "exp", "sub"], "verify_exp": False},
        )
        browser = self.browsers[name]
        body = await request.body()
        plain = http_ece.decrypt(
            body, private_key=browser.private, auth_secret=browser.auth, version="aes128gcm"
        )
        self.delivered.append(Delivered(name, dict(request.headers), claims, fields["k"], json.loads(plain)))
        return Response(status_code=201)


@asynccontextmanager
async def push_service() -> AsyncIterator[PushService]:
    service = PushService()
    app = Starlette(routes=[Route("/push/{name}", service.receive, methods=["POST"])])
    server = LoopbackServer(app, "push service")
    service.port = await server.start()
    try:
        yield service
    finally:
        await server.stop()

"""A Bot Connector and Entra ID on loopback, for `cosigner dev` and the tests.

It plays Microsoft's side of Teams: issues app tokens (client credentials, proven by the
app's password or by a client assertion signed with a certificate it was given through
`trust_certificate`), publishes a
JWKS of its own RSA key (endorsed for `msteams`), accepts cards posted to and updated in
conversations (`/v3/conversations/{id}/activities`), records them, and clicks them: an
`adaptiveCard/action` invoke signed with its key, exactly as the Bot Connector signs one,
posted to the bot's `/teams/messages`. `fail_next` makes the next posts fail the way the
Bot Connector does; a message above 40 KB (UTF-16) is refused as Teams refuses it. Point
Cosigner at it with `TEAMS_API_URL`.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import itertools
import json
import secrets
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from surfaces.loopback import LoopbackServer
from surfaces.teams.auth import ISSUER
from surfaces.teams.certificate import ASSERTION_TYPE

KEY_ID = "cosigner-emulator"


@functools.cache
def shared_key() -> rsa.RSAPrivateKey:
    """The RSA key the emulators of this process sign with, made on first use."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


# The Bot Connector refuses a message above 40 KB, counted as UTF-16 (MessageSizeTooBig).
MESSAGE_LIMIT = 40 * 1024


def message_size(activity: Any) -> int:
    """A message's size as Teams counts it: its JSON payload, in bytes of UTF-16."""
    return len(json.dumps(activity, ensure_ascii=False).encode("utf-16-le"))


@dataclass
class Posted:
    """A card as the conversation holds it: its id, and every version (first the post)."""

    conversation_id: str
    activity_id: str
    versions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def activity(self) -> dict[str, Any]:
        """The activity as it reads now."""
        return self.versions[-1]

    @property
    def card(self) -> dict[str, Any]:
        """The Adaptive Card it shows now."""
        content: dict[str, Any] = self.activity["attachments"][0]["content"]
        return content

    @property
    def buttons(self) -> list[str]:
        """The verbs of its `Action.Execute` buttons (none once closed)."""
        return [a["verb"] for a in self.card.get("actions", []) if a.get("type") == "Action.Execute"]


class TeamsEmulator:
    """A fake Bot Connector with Microsoft's shapes and signatures, and a record of what it was sent."""

    def __init__(
        self,
        *,
        app_id: str,
        app_password: str,
        tenant_id: str,
        clock: Callable[[], float] = time.time,
        key: rsa.RSAPrivateKey | None = None,
    ) -> None:
        self.app_id, self.app_password, self.tenant_id = app_id, app_password, tenant_id
        self.clock = clock
        # One key per process unless given one: making an RSA key costs about 40 ms of CPU,
        # and emulators do not need keys of their own (a forger is given another).
        self._key = key or shared_key()
        self.posted: dict[str, Posted] = {}
        self.tokens: set[str] = set()
        self.token_requests = 0
        self.certificates: list[bytes] = []  # DER certificates the app may sign assertions with
        self.assertions: list[dict[str, Any]] = []  # the verified assertions' headers and claims
        self._jtis: set[str] = set()
        self.missing_conversations: set[str] = set()
        self._faults: list[int] = []
        self._seq = itertools.count(1)
        self._loopback: LoopbackServer | None = None
        self.port: int | None = None
        self.app = Starlette(
            routes=[
                Route("/v1/.well-known/openidconfiguration", self._openid, methods=["GET"]),
                Route("/v1/.well-known/keys", self._jwks, methods=["GET"]),
                Route("/{tenant}/oauth2/v2.0/token", self._token, methods=["POST"]),
                Route("/v3/conversations/{conversation}/activities", self._post, methods=["POST"]),
                Route("/v3/conversations/{conversation}/activities/{activity}", self._put, methods=["PUT"]),
            ]
        )

    # --- set-up --------------------------------------------------------------------------

    @property
    def api_url(self) -> str:
        """The base URL for `TEAMS_API_URL` (also the serviceUrl of its activities)."""
        if self.port is None:
            raise RuntimeError("TeamsEmulator is not running; use `async with TeamsEmulator.running(...)`")
        return f"http://127.0.0.1:{self.port}/"

    def fail_next(self, status: int = 503, times: int = 1) -> None:
        """Make the next `times` card posts and updates answer `status`."""
        self._faults.extend([status] * times)

    def cards(self, conversation_id: str | None = None) -> list[Posted]:
        """The cards posted, in order (in one conversation, if named)."""
        return [p for p in self.posted.values() if conversation_id in (None, p.conversation_id)]

    # --- signing -------------------------------------------------------------------------

    def jwks(self) -> dict[str, Any]:
        """The published key set: its one RSA key, endorsed for Teams."""
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self._key.public_key()))
        return {
            "keys": [{**public, "kid": KEY_ID, "use": "sig", "alg": "RS256", "endorsements": ["msteams"]}]
        }

    def token_for(self, service_url: str | None = None, **claims: Any) -> str:
        """A Bot Connector JWT as Microsoft signs it; `claims` override (iss, aud, exp…)."""
        now = self.clock()
        body: dict[str, Any] = {
            "iss": ISSUER,
            "aud": self.app_id,
            "exp": int(now) + 3600,
            "nbf": int(now) - 60,
            "serviceUrl": service_url or self.api_url,
        }
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        return jwt.encode(body, self._key, algorithm="RS256", headers={"kid": KEY_ID})

    def invoke(self, posted: Posted, verb: str, user: str, **fields: Any) -> dict[str, Any]:
        """The `adaptiveCard/action` invoke a press of `verb` on `posted` sends; `fields`
        override (tenant, conversation, reply_to, approval_id, comment, service_url), and
        `data` adds to the action's data what the pressed button carries (`page`)."""
        # The buttons of the card as first posted: a stale copy can still be pressed.
        first = posted.versions[0]["attachments"][0]["content"]
        data: dict[str, Any] = {"approvalId": fields.get("approval_id") or _approval_of(first)}
        if fields.get("comment") is not None:
            data["comment"] = fields["comment"]
        data.update(fields.get("data") or {})  # a button's own data (a page of the whole call)
        shown = posted.versions[0].get("conversation", {}).get("tenantId")
        tenant = fields.get("tenant", shown or self.tenant_id)
        return {
            "type": "invoke",
            "name": "adaptiveCard/action",
            "id": f"f:{secrets.token_hex(8)}",
            "channelId": "msteams",
            "serviceUrl": fields.get("service_url", self.api_url),
            "timestamp": "2026-01-01T00:00:00.000Z",
            "from": {"id": f"29:{user}", "aadObjectId": user},
            "recipient": {"id": f"28:{fields.get('app_id', self.app_id)}"},
            "conversation": {"id": fields.get("conversation", posted.conversation_id), "tenantId": tenant},
            "channelData": {"tenant": {"id": tenant}},
            "replyToId": fields.get("reply_to", posted.activity_id),
            "value": {"action": {"type": "Action.Execute", "verb": verb, "data": data}, "trigger": "manual"},
        }

    async def click(
        self,
        http: httpx.AsyncClient,
        posted: Posted,
        verb: str,
        user: str,
        *,
        path: str = "/teams/messages",
        token: str | None = None,
        **fields: Any,
    ) -> httpx.Response:
        """Press a button of a posted card: a really signed invoke POSTed to the bot."""
        body = self.invoke(posted, verb, user, **fields)
        token = token if token is not None else self.token_for(body["serviceUrl"])
        return await http.post(path, json=body, headers={"Authorization": f"Bearer {token}"})

    # --- handlers ------------------------------------------------------------------------

    async def _openid(self, request: Request) -> JSONResponse:
        body = {"issuer": ISSUER, "jwks_uri": self.api_url + "v1/.well-known/keys"}
        return JSONResponse({**body, "id_token_signing_alg_values_supported": ["RS256"]})

    async def _jwks(self, request: Request) -> JSONResponse:
        return JSONResponse(self.jwks())

    def trust_certificate(self, der: bytes) -> None:
        """Accept client assertions signed by this certificate's key (as uploaded to the app registration)."""
        self.certificates.append(der)

    async def _token(self, request: Request) -> JSONResponse:
        form = await request.form()
        self.token_requests += 1
        if request.path_params["tenant"] != self.tenant_id:
            return JSONResponse({"error": "invalid_tenant"}, 400)
        if form.get("client_id") != self.app_id:
            return JSONResponse({"error": "invalid_client"}, 401)
        assertion = form.get("client_assertion")
        if isinstance(assertion, str):
            if form.get("client_assertion_type") != ASSERTION_TYPE or "client_secret" in form:
                return JSONResponse({"error": "invalid_request"}, 400)
            if not self._assertion_ok(assertion, str(request.url)):
                return JSONResponse({"error": "invalid_client", "error_codes": [700027]}, 401)
        elif form.get("client_secret") != self.app_password:
            return JSONResponse({"error": "invalid_client"}, 401)
        if (
            form.get("grant_type") != "client_credentials"
            or form.get("scope") != "https://api.botframework.com/.default"
        ):
            return JSONResponse({"error": "invalid_request"}, 400)
        token = f"emu-{secrets.token_urlsafe(16)}"
        self.tokens.add(token)
        return JSONResponse({"token_type": "Bearer", "expires_in": 3599, "access_token": token})

    def _assertion_ok(self, assertion: str, token_url: str) -> bool:
        """As Entra ID checks a client assertion: the certificate named by `x5t` signed it
        (RS256), for this endpoint, by this app, unexpired, and its `jti` never seen before."""
        try:
            header = jwt.get_unverified_header(assertion)
        except jwt.PyJWTError:
            return False
        for der in self.certificates:
            thumbprint = base64.urlsafe_b64encode(hashlib.sha1(der, usedforsecurity=False).digest())
            if header.get("x5t") != thumbprint.rstrip(b"=").decode():
                continue
            key = x509.load_der_x509_certificate(der).public_key()
            try:
                claims = jwt.decode(
                    assertion,
                    key,  # type: ignore[arg-type]
                    algorithms=["RS256"],
                    audience=token_url,
                    issuer=self.app_id,
                    options={"require": ["exp", "nbf", "jti", "sub"]},
                    leeway=300,
                )
            except jwt.PyJWTError:
                return False
            if claims["sub"] != self.app_id or claims["jti"] in self._jtis:
                return False
            self._jtis.add(claims["jti"])
            self.assertions.append({"header": header, "claims": claims})
            return True
        return False

    def _refused(self, request: Request) -> JSONResponse | None:
        if request.headers.get("authorization", "").removeprefix("Bearer ") not in self.tokens:
            return JSONResponse({"error": {"code": "Unauthorized", "message": "token invalid"}}, 401)
        if self._faults:
            return JSONResponse(
                {"error": {"code": "ServiceError", "message": "unavailable"}}, self._faults.pop(0)
            )
        if request.path_params["conversation"] in self.missing_conversations:
            return JSONResponse({"error": {"code": "ConversationNotFound", "message": "not found"}}, 404)
        return None

    async def _post(self, request: Request) -> JSONResponse:
        refused = self._refused(request)
        if refused is not None:
            return refused
        conversation = request.path_params["conversation"]
        activity = await request.json()
        if message_size(activity) > MESSAGE_LIMIT:
            return _too_big()
        activity_id = f"1{next(self._seq):012d}"
        self.posted[activity_id] = Posted(conversation, activity_id, [activity])
        return JSONResponse({"id": activity_id}, 201)

    async def _put(self, request: Request) -> JSONResponse:
        refused = self._refused(request)
        if refused is not None:
            return refused
        found = self.posted.get(request.path_params["activity"])
        if found is None or found.conversation_id != request.path_params["conversation"]:
            return JSONResponse({"error": {"code": "ActivityNotFound", "message": "not found"}}, 404)
        activity = await request.json()
        if message_size(activity) > MESSAGE_LIMIT:
            return _too_big()
        found.versions.append(activity)
        return JSONResponse({"id": found.activity_id}, 200)

    # --- serving -------------------------------------------------------------------------

    @classmethod
    @contextlib.asynccontextmanager
    async def running(cls, **options: Any) -> AsyncIterator[TeamsEmulator]:
        """Serve an emulator on a free loopback port for the duration of the block."""
        emulator = cls(**options)
        await emulator.start()
        try:
            yield emulator
        finally:
            await emulator.stop()

    async def start(self) -> None:
        """Bind a free loopback port (port 0) and serve until `stop()`."""
        self._loopback = LoopbackServer(self.app, "Teams emulator")
        self.port = await self._loopback.start()

    async def stop(self) -> None:
        """Stop serving and release the port."""
        if self._loopback is not None:
            await self._loopback.stop()
        self._loopback = None


def _too_big() -> JSONResponse:
    return JSONResponse({"error": {"code": "MessageSizeTooBig", "message": "message too large"}}, 413)


def _approval_of(card: dict[str, Any]) -> str:
    for action in card.get("actions", []):
        approval = action.get("data", {}).get("approvalId")
        if approval:
            return str(approval)
    refresh = card.get("refresh", {}).get("action", {}).get("data", {}).get("approvalId")
    return str(refresh or "")

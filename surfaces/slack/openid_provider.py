"""Slack's OpenID Connect provider, emulated: "Sign in with Slack" for `cosigner dev` and the tests.

It serves what Slack serves (discovery, authorize, `openid.connect.token`,
`openid.connect.userInfo`, JWKS) with Slack's claims (`https://slack.com/user_id`,
`https://slack.com/team_id`), on the Slack emulator's port. The authorize page lets the
person pick one of the emulated users. `forge_next` makes the next ID token wrong in one
way, so a client can be shown to refuse it.

Beyond Slack, which has no phone claims, it offers the standard `phone` scope: a user given a
number has it returned by userinfo (`phone_number`, `phone_number_verified`) when the sign-in
asked for that scope, as OpenID Connect issuers do, so the sandbox phone can sign in too.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import secrets
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import urlencode

from joserfc import jwt
from joserfc.jwk import RSAKey
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

ID_TOKEN_SECONDS = 3600


class Forgery(StrEnum):
    """Ways the next ID token can be wrong."""

    SIGNATURE = "signature"  # signed by a key the JWKS does not hold, under its key id
    AUDIENCE = "audience"  # issued to another client
    NONCE = "nonce"  # carries another sign-in's nonce
    EXPIRED = "expired"  # expired an hour ago


@dataclass(frozen=True)
class Person:
    """An emulated Slack user who can sign in."""

    user_id: str
    name: str
    email: str
    team_id: str
    phone: str | None = None
    phone_verified: bool = True


@dataclass(frozen=True)
class _Grant:
    client_id: str
    redirect_uri: str
    person: Person
    nonce: str | None
    challenge: str | None
    scopes: frozenset[str] = frozenset()


@functools.cache
def signing_key() -> RSAKey:
    """The key the providers of this process sign ID tokens with, made on first use: making
    an RSA key costs about 40 ms of CPU, and most emulated Slacks never sign anyone in."""
    return RSAKey.generate_key(2048, parameters={"kid": "emu-1", "use": "sig"})


class OpenIdProvider:
    """The OpenID endpoints of the emulated Slack, with its users and registered clients."""

    def __init__(self, base_url: Any, team_id: str) -> None:
        self._base_url = base_url  # a callable: the emulator's URL is known once it listens
        self.team_id = team_id
        self.people: dict[str, Person] = {}
        self.clients: dict[str, str] = {}
        self.forge_next: Forgery | None = None
        self._codes: dict[str, _Grant] = {}
        self._tokens: dict[str, _Grant] = {}

    @property
    def issuer(self) -> str:
        """The issuer URL (the emulator's root), what `COSIGNER_OIDC_ISSUER` is set to."""
        return str(self._base_url()).rstrip("/")

    def register_client(self, client_id: str, client_secret: str) -> None:
        """Accept sign-ins for this client."""
        self.clients[client_id] = client_secret

    def add_person(
        self,
        user_id: str,
        name: str,
        email: str,
        team_id: str | None = None,
        *,
        phone: str | None = None,
        phone_verified: bool = True,
    ) -> Person:
        """An emulated user offered on the authorize page (with a phone number, if given)."""
        person = Person(user_id, name, email, team_id or self.team_id, phone, phone_verified)
        self.people[user_id] = person
        return person

    def routes(self) -> list[BaseRoute]:
        """Slack's OpenID paths."""
        return [
            Route("/.well-known/openid-configuration", self._discovery, methods=["GET"]),
            Route("/openid/connect/authorize", self._authorize, methods=["GET", "POST"]),
            Route("/openid/connect/keys", self._keys, methods=["GET"]),
            Route("/api/openid.connect.token", self._token, methods=["POST"]),
            Route("/api/openid.connect.userInfo", self._userinfo, methods=["GET", "POST"]),
        ]

    async def _discovery(self, request: Request) -> Response:
        iss = self.issuer
        return JSONResponse(
            {
                "issuer": iss,
                "authorization_endpoint": f"{iss}/openid/connect/authorize",
                "token_endpoint": f"{iss}/api/openid.connect.token",
                "userinfo_endpoint": f"{iss}/api/openid.connect.userInfo",
                "jwks_uri": f"{iss}/openid/connect/keys",
                "scopes_supported": ["openid", "profile", "email", "phone"],
                "response_types_supported": ["code"],
                "response_modes_supported": ["form_post"],
                "grant_types_supported": ["authorization_code"],
                "subject_types_supported": ["public"],
                "id_token_signing_alg_values_supported": ["RS256"],
                "claims_supported": ["sub", "auth_time", "iss"],
                "claims_parameter_supported": False,
                "request_parameter_supported": False,
                "request_uri_parameter_supported": True,
                "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic"],
                "code_challenge_methods_supported": ["S256"],
            }
        )

    async def _keys(self, request: Request) -> Response:
        return JSONResponse({"keys": [signing_key().as_dict(private=False)]})

    async def _authorize(self, request: Request) -> Response:
        args = dict(request.query_params)
        if request.method == "POST":
            args.update({k: str(v) for k, v in (await request.form()).items()})
        client_id, redirect_uri = args.get("client_id", ""), args.get("redirect_uri", "")
        if client_id not in self.clients or not redirect_uri:
            return JSONResponse({"ok": False, "error": "invalid_client_id"}, 400)
        if args.get("response_type") != "code" or "openid" not in args.get("scope", "").split():
            return JSONResponse({"ok": False, "error": "invalid_scope"}, 400)
        chosen = self.people.get(args.get("user", ""))
        if request.method == "GET" or chosen is None:
            return HTMLResponse(self._chooser(args))
        code = secrets.token_urlsafe(16)
        challenge = args.get("code_challenge") if args.get("code_challenge_method") == "S256" else None
        scopes = frozenset(args.get("scope", "").split())
        self._codes[code] = _Grant(client_id, redirect_uri, chosen, args.get("nonce"), challenge, scopes)
        query = {"code": code, **({"state": args["state"]} if "state" in args else {})}
        sep = "&" if "?" in redirect_uri else "?"
        return RedirectResponse(f"{redirect_uri}{sep}{urlencode(query)}", status_code=302)

    def _chooser(self, args: dict[str, str]) -> str:
        hidden = "".join(
            f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
            for k, v in args.items()
            if k != "user"
        )
        buttons = "".join(
            f'<li><button name="user" value="{html.escape(p.user_id)}">{html.escape(p.name)} '
            f"({html.escape(p.email)})</button></li>"
            for p in self.people.values()
        )
        return (
            "<!doctype html><meta charset=utf-8><title>Sign in with Slack (emulated)</title>"
            "<h1>Sign in with Slack (emulated)</h1><p>Choose who you are:</p>"
            f'<form method="post">{hidden}<ul>{buttons}</ul></form>'
        )

    async def _token(self, request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        auth = request.headers.get("authorization", "")
        if auth.startswith("Basic "):
            cid, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
            form.setdefault("client_id", cid)
            form.setdefault("client_secret", secret)
        cid = form.get("client_id", "")
        if cid not in self.clients or not secrets.compare_digest(
            self.clients[cid], form.get("client_secret", "")
        ):
            return JSONResponse({"ok": False, "error": "invalid_client"}, 401)
        grant = self._codes.pop(form.get("code", ""), None)
        if grant is None or grant.client_id != cid or grant.redirect_uri != form.get("redirect_uri"):
            return JSONResponse({"ok": False, "error": "invalid_code"}, 400)
        if grant.challenge is not None:
            verifier = form.get("code_verifier", "").encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=").decode()
            if not secrets.compare_digest(digest, grant.challenge):
                return JSONResponse({"ok": False, "error": "invalid_code_verifier"}, 400)
        access = f"xoxp-{secrets.token_hex(12)}"
        self._tokens[access] = grant
        return JSONResponse(
            {
                "ok": True,
                "access_token": access,
                "token_type": "Bearer",
                "id_token": self._id_token(grant, cid),
            }
        )

    def _id_token(self, grant: _Grant, client_id: str) -> str:
        now = int(time.time())
        forgery, self.forge_next = self.forge_next, None
        person = grant.person
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": person.user_id,
            "aud": "another-client" if forgery is Forgery.AUDIENCE else client_id,
            "exp": now - 3600 if forgery is Forgery.EXPIRED else now + ID_TOKEN_SECONDS,
            "iat": now - 7200 if forgery is Forgery.EXPIRED else now,
            "auth_time": now,
            "nonce": "nonce-of-another-sign-in" if forgery is Forgery.NONCE else grant.nonce,
            **self._profile(person),
        }
        if forgery is Forgery.AUDIENCE:
            claims["azp"] = client_id  # claims to be for this client, but its audience is another
        key = signing_key()
        if forgery is Forgery.SIGNATURE:
            key = RSAKey.generate_key(2048, parameters={"kid": "emu-1", "use": "sig"})
        return jwt.encode({"alg": "RS256", "kid": "emu-1", "typ": "JWT"}, claims, key)

    def _profile(self, person: Person) -> dict[str, Any]:
        return {
            "https://slack.com/user_id": person.user_id,
            "https://slack.com/team_id": person.team_id,
            "email": person.email,
            "email_verified": True,
            "name": person.name,
        }

    async def _userinfo(self, request: Request) -> Response:
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        grant = self._tokens.get(token)
        if grant is None:
            return JSONResponse({"ok": False, "error": "invalid_auth"}, 401)
        person = grant.person
        phone: dict[str, Any] = {}
        if "phone" in grant.scopes and person.phone:
            phone = {"phone_number": person.phone, "phone_number_verified": person.phone_verified}
        return JSONResponse({"ok": True, "sub": person.user_id, **self._profile(person), **phone})

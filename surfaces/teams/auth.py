"""Both directions of Bot Connector authentication: checking its JWT, and getting our token.

Inbound, every activity carries `Authorization: Bearer <JWT>` signed by the Bot Connector.
`ConnectorAuth.verify` checks it in full with PyJWT (the library the Agents SDK's own
`JwtTokenValidator` uses): RS256 against the published JWKS, found through the Bot
Connector's OpenID configuration (a key must be endorsed for the activity's channel when
the JWKS says which), `iss` = `https://api.botframework.com`,
`aud` = our app id, `exp`/`nbf` with five minutes' skew against the injected clock, and
the `serviceUrl` claim equal to the activity's. The SDK's validator picks its JWKS by
issuer from a fixed table, reads the wall clock and leaves `serviceUrl` unchecked, so it
is not used here.

Outbound, `ClientCredentials` gets an app token from Microsoft Entra ID (client
credentials, scope `https://api.botframework.com/.default`), proving the app by its
password or by a client assertion signed with its certificate (`certificate.py`), and
keeps it until five minutes before it expires. Both endpoints come from `TeamsConfig`, so the emulator can
stand in for them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import jwt

from contracts.errors import InvalidSignature, SurfaceUnavailable
from surfaces.teams.certificate import ASSERTION_TYPE, ClientCertificate

ISSUER = "https://api.botframework.com"
SCOPE = "https://api.botframework.com/.default"
SKEW = 300.0  # seconds of clock skew allowed on exp and nbf, as the Bot Connector asks
JWKS_REFRESH = 60.0  # an unknown key id refetches the JWKS at most this often
REQUIRED_CLAIMS = ("exp", "iss", "aud", "serviceUrl")


class ConnectorAuth:
    """Checks the Bot Connector's JWT on an inbound activity."""

    def __init__(
        self, app_id: str, openid_url: str, http: httpx.AsyncClient, clock: Callable[[], float]
    ) -> None:
        self.app_id = app_id
        self.openid_url = openid_url
        self.http = http
        self.clock = clock
        self._keys: dict[str, tuple[jwt.PyJWK, tuple[str, ...] | None]] = {}
        self._fetched_at: float | None = None
        self._lock = asyncio.Lock()

    async def verify(
        self, authorization: str | None, service_url: str | None, channel_id: str | None
    ) -> Mapping[str, Any]:
        """The token's claims, or `InvalidSignature` naming what failed (never the token)."""
        if not authorization or not authorization.startswith("Bearer "):
            raise InvalidSignature("no Bot Connector token: the Authorization header must be Bearer <JWT>")
        token = authorization.removeprefix("Bearer ").strip()
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise InvalidSignature("the Bot Connector token is not a JWT") from exc
        if header.get("alg") != "RS256":
            raise InvalidSignature("the Bot Connector token must be signed with RS256")
        key, endorsements = await self._key(str(header.get("kid") or ""))
        if endorsements is not None and (channel_id or "") not in endorsements:
            raise InvalidSignature(f"the signing key is not endorsed for channel {channel_id!r}")
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key,
                algorithms=["RS256"],
                audience=self.app_id,
                issuer=ISSUER,
                # Time is checked below against the injected clock.
                options={
                    "verify_exp": False,
                    "verify_nbf": False,
                    "verify_iat": False,
                    "require": list(REQUIRED_CLAIMS),
                },
            )
        except jwt.InvalidAudienceError as exc:
            raise InvalidSignature(
                "the Bot Connector token is for another app (aud is not MICROSOFT_APP_ID)"
            ) from exc
        except jwt.InvalidIssuerError as exc:
            raise InvalidSignature(f"the Bot Connector token was not issued by {ISSUER}") from exc
        except jwt.PyJWTError as exc:
            raise InvalidSignature(f"the Bot Connector token does not verify ({type(exc).__name__})") from exc
        now = self.clock()
        exp, nbf = claims.get("exp"), claims.get("nbf")
        if not isinstance(exp, int | float) or now > exp + SKEW:
            raise InvalidSignature("the Bot Connector token has expired")
        if nbf is not None and (not isinstance(nbf, int | float) or now < nbf - SKEW):
            raise InvalidSignature("the Bot Connector token is not valid yet")
        if not service_url or claims.get("serviceUrl") != service_url:
            raise InvalidSignature("the activity's serviceUrl is not the one the Bot Connector token names")
        return claims

    async def _key(self, kid: str) -> tuple[jwt.PyJWK, tuple[str, ...] | None]:
        found = self._keys.get(kid)
        if found is not None:
            return found
        async with self._lock:
            now = self.clock()
            if kid not in self._keys and (self._fetched_at is None or now - self._fetched_at >= JWKS_REFRESH):
                await self._fetch()
                self._fetched_at = now
        found = self._keys.get(kid)
        if found is None:
            raise InvalidSignature("the Bot Connector token is signed by a key not in the published JWKS")
        return found

    async def _fetch(self) -> None:
        # The keys' address is read from the OpenID configuration each time, as Microsoft
        # asks: it may move.
        try:
            response = await self.http.get(self.openid_url)
            response.raise_for_status()
            config = response.json()
            jwks_uri = config.get("jwks_uri") if isinstance(config, dict) else None
            if not isinstance(jwks_uri, str):
                raise InvalidSignature(f"the OpenID configuration at {self.openid_url} names no jwks_uri")
            response = await self.http.get(jwks_uri)
            response.raise_for_status()
            document = response.json()
        except (httpx.HTTPError, json.JSONDecodeError) as exc:
            raise InvalidSignature(f"could not read the Bot Connector's keys from {self.openid_url}") from exc
        keys: dict[str, tuple[jwt.PyJWK, tuple[str, ...] | None]] = {}
        for data in document.get("keys", []) if isinstance(document, dict) else []:
            try:
                key = jwt.PyJWK.from_dict(data)
            except jwt.PyJWTError:
                continue  # a key of a type we do not use
            endorsements = data.get("endorsements")
            keys[str(data.get("kid") or "")] = (
                key,
                tuple(str(e) for e in endorsements) if isinstance(endorsements, list) else None,
            )
        self._keys = keys


class ClientCredentials:
    """Our app's token for the Bot Connector, by the client-credentials grant, cached."""

    def __init__(
        self,
        token_url: str,
        app_id: str,
        password: str | None,
        http: httpx.AsyncClient,
        clock: Callable[[], float],
        certificate: ClientCertificate | None = None,
    ) -> None:
        self.token_url = token_url
        self.app_id = app_id
        self._password = password
        self._certificate = certificate
        self.http = http
        self.clock = clock
        self._token: tuple[str, float] | None = None
        self._lock = asyncio.Lock()

    async def token(self) -> str:
        """A token valid for at least five more minutes; `SurfaceUnavailable` if none is issued."""
        async with self._lock:
            if self._token is not None and self.clock() < self._token[1]:
                return self._token[0]
            form = {"grant_type": "client_credentials", "client_id": self.app_id, "scope": SCOPE}
            if self._certificate is not None:
                form["client_assertion_type"] = ASSERTION_TYPE
                form["client_assertion"] = self._certificate.assertion(
                    self.app_id, self.token_url, self.clock()
                )
            else:
                form["client_secret"] = self._password or ""
            try:
                response = await self.http.post(self.token_url, data=form)
            except httpx.HTTPError as exc:
                raise SurfaceUnavailable(
                    "could not reach Microsoft Entra ID for a bot token "
                    f"({type(exc).__name__}); check the network"
                ) from exc
            try:
                body = response.json()
            except json.JSONDecodeError:
                body = {}
            access = body.get("access_token") if isinstance(body, dict) else None
            if response.status_code != 200 or not isinstance(access, str):
                error = body.get("error") if isinstance(body, dict) else None
                raise SurfaceUnavailable(
                    "Microsoft Entra ID issued no bot token "
                    f"(HTTP {response.status_code}, {error or 'no error code'}); "
                    "check MICROSOFT_APP_ID, "
                    + ("MICROSOFT_APP_CERTIFICATE" if self._certificate else "MICROSOFT_APP_PASSWORD")
                    + " and MICROSOFT_APP_TENANT_ID"
                )
            lifetime = body.get("expires_in", 3600)
            seconds = (
                float(lifetime)
                if isinstance(lifetime, int | float | str) and str(lifetime).isdigit()
                else 3600.0
            )
            self._token = (access, self.clock() + max(seconds - SKEW, 0.0))
            return access

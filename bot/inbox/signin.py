"""OpenID Connect sign-in through authlib: authorization code with PKCE, state and nonce, the
ID token checked against the issuer's JWKS (signature, issuer, audience, nonce, expiry).

Where the issuer offers the `phone` scope it is asked for too: a verified `phone_number`
lists the requests texted to that number (read-only). Issuers return scope claims from
userinfo rather than in the ID token, so userinfo is read when the ID token has no number,
and its `sub` must be the ID token's.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

import httpx
from authlib.integrations.starlette_client import OAuth, OAuthError
from joserfc.errors import JoseError
from starlette.requests import Request
from starlette.responses import Response

from bot.inbox.people import PHONE, PHONE_VERIFIED, Person, SignInRefused, person_from_claims

log = logging.getLogger("cosigner.inbox")
SCOPES = "openid email profile"
PHONE_SCOPE = "phone"
# authlib talks to the issuer with httpx2 where it is installed, else httpx: either's errors.
try:
    import httpx2

    HTTP_ERRORS: tuple[type[Exception], ...] = (httpx.HTTPError, httpx2.HTTPError)
except ImportError:
    HTTP_ERRORS = (httpx.HTTPError,)
USERINFO_ERRORS: tuple[type[Exception], ...] = (*HTTP_ERRORS, ValueError)  # ValueError: not JSON


def unreachable(issuer: str) -> str:
    """What to check when the issuer does not answer."""
    return f"the issuer {issuer} could not be reached; check COSIGNER_OIDC_ISSUER and try again"


# Issuers people know by name, by host (a suffix for the tenant-specific hosts of Okta and Auth0).
KNOWN_ISSUERS = {
    "slack.com": "Slack",
    "accounts.google.com": "Google",
    "login.microsoftonline.com": "Microsoft Entra ID",
    "okta.com": "Okta",
    "oktapreview.com": "Okta",
    "auth0.com": "Auth0",
    "gitlab.com": "GitLab",
}


def display_name(issuer: str, configured: str | None = None) -> str:
    """What "Sign in with …" names: the configured name, an issuer people know by name, else
    the issuer's host (with its port when it has one)."""
    if configured and configured.strip():
        return configured.strip()
    parts = urlsplit(issuer)
    host = (parts.hostname or "").lower()
    for known, name in KNOWN_ISSUERS.items():
        if host == known or host.endswith(f".{known}"):
            return name
    return parts.netloc or issuer


class SignIn:
    """The configured issuer, as an authlib client."""

    def __init__(self, issuer: str, client_id: str, client_secret: str, name: str | None = None) -> None:
        self.issuer = issuer.rstrip("/")
        self.display_name = display_name(self.issuer, name)
        oauth = OAuth()
        oauth.register(
            "issuer",
            client_id=client_id,
            client_secret=client_secret,
            server_metadata_url=f"{self.issuer}/.well-known/openid-configuration",
            client_kwargs={"scope": SCOPES, "code_challenge_method": "S256"},
        )
        self.client: Any = oauth.create_client("issuer")
        # authlib checks only the issuer unless told; the audience must be this client.
        self.claims_options = {
            "iss": {"essential": True, "values": [self.issuer]},
            "aud": {"essential": True, "values": [client_id]},
        }

    async def redirect(self, request: Request, back_to: str) -> Response:
        """Send the browser to the issuer (state, nonce and PKCE verifier kept in the session)."""
        try:
            scope = f"{SCOPES} {PHONE_SCOPE}" if await self.offers_phone() else SCOPES
            response: Response = await self.client.authorize_redirect(request, back_to, scope=scope)
        except HTTP_ERRORS as exc:
            raise SignInRefused(unreachable(self.issuer)) from exc
        return response

    async def finish(self, request: Request) -> Person:
        """Exchange the code and verify the ID token; `SignInRefused` names what failed."""
        try:
            token = await self.client.authorize_access_token(request, claims_options=self.claims_options)
        except (OAuthError, JoseError) as exc:
            raise SignInRefused(f"the sign-in could not be verified ({type(exc).__name__}: {exc})") from exc
        except HTTP_ERRORS as exc:
            raise SignInRefused(unreachable(self.issuer)) from exc
        # authlib checks the ID token only when the session held a nonce: insist on both.
        claims = token.get("userinfo")
        if not claims or "id_token" not in token:
            raise SignInRefused("the issuer returned no verifiable ID token; sign in again")
        if str(claims.get("iss", "")).rstrip("/") != self.issuer:
            raise SignInRefused("the ID token comes from another issuer")
        claims = dict(claims)
        if PHONE not in claims and "access_token" in token and await self.offers_phone():
            claims.update(await self.phone_from_userinfo(token, str(claims.get("sub"))))
        return person_from_claims(self.issuer, claims)

    async def offers_phone(self) -> bool:
        """True if the issuer's discovery document lists the `phone` scope."""
        metadata = await self.client.load_server_metadata()
        return PHONE_SCOPE in (metadata.get("scopes_supported") or ()) and bool(
            metadata.get("userinfo_endpoint")
        )

    async def phone_from_userinfo(self, token: dict[str, Any], subject: str) -> dict[str, Any]:
        """The phone claims userinfo returns for the ID token's subject; none if it cannot say.

        A number only widens what the person may read, so an issuer that fails here signs the
        person in without one (and the log says why) rather than refusing the sign-in.
        """
        try:
            info = await self.client.userinfo(token=token)
        except USERINFO_ERRORS as exc:
            log.warning(
                "inbox userinfo unavailable; signed in without a phone number",
                extra={"code": type(exc).__name__},
            )
            return {}
        if str(info.get("sub")) != subject:
            log.warning("inbox userinfo names another subject; its phone number is ignored")
            return {}
        return {k: info[k] for k in (PHONE, PHONE_VERIFIED) if k in info}

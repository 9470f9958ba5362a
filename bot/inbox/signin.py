"""OpenID Connect sign-in through authlib: authorization code with PKCE, state and nonce, the
ID token checked against the issuer's JWKS (signature, issuer, audience, nonce, expiry)."""

from __future__ import annotations

from typing import Any

import httpx
from authlib.integrations.starlette_client import OAuth, OAuthError
from joserfc.errors import JoseError
from starlette.requests import Request
from starlette.responses import Response

from bot.inbox.people import Person, SignInRefused, person_from_claims

SCOPES = "openid email profile"
# authlib talks to the issuer with httpx2 where it is installed, else httpx: either's errors.
try:
    import httpx2

    HTTP_ERRORS: tuple[type[Exception], ...] = (httpx.HTTPError, httpx2.HTTPError)
except ImportError:
    HTTP_ERRORS = (httpx.HTTPError,)


def unreachable(issuer: str) -> str:
    """What to check when the issuer does not answer."""
    return f"the issuer {issuer} could not be reached; check COSIGNER_OIDC_ISSUER and try again"


class SignIn:
    """The configured issuer, as an authlib client."""

    def __init__(self, issuer: str, client_id: str, client_secret: str) -> None:
        self.issuer = issuer.rstrip("/")
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
            response: Response = await self.client.authorize_redirect(request, back_to)
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
        return person_from_claims(self.issuer, claims)

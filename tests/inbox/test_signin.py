"""Sign-in through the emulated "Sign in with Slack", with authlib as in production."""

from __future__ import annotations

import pytest

from surfaces.slack.openid_provider import Forgery
from tests.harness import cosigner_app
from tests.inbox.world import inbox_world


async def test_signing_in_through_the_issuer_opens_the_inbox_with_a_guarded_cookie() -> None:
    async with inbox_world() as w:
        done = await w.sign_in(w.h.client, "U0ADMIN")
        assert done.status_code == 303 and done.headers["location"] == "/inbox/"
        cookie = done.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=lax" in cookie and "path=/inbox" in cookie
        page = await w.h.client.get("/inbox/")
        assert page.status_code == 200 and "Ada Admin" in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
        # The authorize request used PKCE, state and a nonce.
        start = await w.browser().get("/inbox/login")
        query = start.headers["location"]
        for part in ("code_challenge=", "code_challenge_method=S256", "state=", "nonce=", "scope=openid"):
            assert part in query


WHY = {
    Forgery.SIGNATURE: "BadSignatureError",
    Forgery.AUDIENCE: "Invalid claim: &#39;aud&#39;",
    Forgery.NONCE: "Invalid claim: &#39;nonce&#39;",
    Forgery.EXPIRED: "ExpiredTokenError",
}


@pytest.mark.parametrize("forgery", list(Forgery))
async def test_a_forged_id_token_is_refused(forgery: Forgery) -> None:
    async with inbox_world() as w:
        w.emu.openid.forge_next = forgery
        done = await w.sign_in(w.h.client, "U0ADMIN")
        assert done.status_code == 401, done.text
        assert "Sign-in refused" in done.text and WHY[forgery] in done.text
        page = await w.h.client.get("/inbox/")
        assert 'id="sign-in"' in page.text  # still signed out


async def test_a_callback_without_its_sign_in_state_is_refused() -> None:
    async with inbox_world() as w:
        await w.h.client.get("/inbox/login")
        async with w.browser() as other:  # the code arrives in a browser that did not start it
            done = await other.get("/inbox/callback?code=x&state=y")
        assert done.status_code == 401


async def test_an_expired_session_is_sent_to_sign_in() -> None:
    async with inbox_world(inbox_session_seconds=3600) as w:
        await w.sign_in(w.h.client, "U0ADMIN")
        assert "Ada Admin" in (await w.h.client.get("/inbox/")).text
        w.h.advance(3601)
        page = await w.h.client.get("/inbox/")
        assert 'id="sign-in"' in page.text and "Ada Admin" not in page.text


async def test_without_sign_in_configured_the_inbox_says_how_to_configure_it() -> None:
    async with cosigner_app() as h:
        page = await h.client.get("/inbox/")
        assert page.status_code == 200
        assert "COSIGNER_OIDC_ISSUER" in page.text and "COSIGNER_OIDC_CLIENT_SECRET" in page.text
        assert (await h.client.get("/inbox/login")).status_code == 503
        assert "set-cookie" not in (await h.client.get("/healthz")).headers


async def test_an_unreachable_issuer_is_named_not_a_server_error() -> None:
    async with inbox_world() as w:
        await w.emu.stop()
        page = await w.h.client.get("/inbox/login")
        assert page.status_code == 502 and "could not be reached" in page.text

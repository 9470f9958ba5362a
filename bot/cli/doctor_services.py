"""The checks of `cosigner doctor` that ask a service whether it accepts Cosigner's
credentials, each with the client the server itself uses: slack_sdk's
`AsyncWebClient.auth_test`, twilio's client fetching the account, the Teams token through
`ClientCredentials`, authlib loading the issuer's discovery document and JWKS. They change
nothing and send no message. bot.cli.doctor_checks puts them in its table.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx

from bot.cli.doctor import FAIL, OK, SKIP, WARN, Context, Result
from bot.http.surface_config import (
    ConfigurationError,
    email_config,
    sms_config,
    teams_config,
    whatsapp_config,
)
from bot.inbox.signin import HTTP_ERRORS, SignIn, unreachable
from contracts.errors import SurfaceUnavailable
from surfaces.slack.web_client import build_client, translated
from surfaces.sms.account import account_status
from surfaces.teams.auth import ClientCredentials


async def slack(ctx: Context) -> Result:
    """SLACK_BOT_TOKEN is a live token of a workspace (`auth.test`)."""
    s = ctx.need("slack_bot_token", "slack_app_token", "slack_api_url")
    if not s.slack_enabled:
        return SKIP, "Slack is off (SLACK_SIGNING_SECRET or SLACK_APP_TOKEN, and SLACK_BOT_TOKEN, not set)"
    if not s.slack_bot_token:
        return SKIP, (
            "Slack installs into many workspaces (SLACK_CLIENT_ID): each workspace's token comes "
            "through /slack/install"
        )
    client = build_client(s.slack_bot_token, s.slack_api_url, None)
    try:
        async with translated("auth.test", "the workspace of SLACK_BOT_TOKEN"):
            answer = await client.auth_test()
    except SurfaceUnavailable as exc:
        return FAIL, str(exc)
    bot, team = answer.get("user_id"), answer.get("team_id")
    return OK, f"auth.test: SLACK_BOT_TOKEN is bot user {bot} of workspace {team}"


async def twilio(ctx: Context) -> Result:
    """Twilio accepts TWILIO_ACCOUNT_SID with TWILIO_AUTH_TOKEN, and the account is active."""
    s = ctx.need("twilio_api_url", "public_url")
    if not s.sms_enabled:
        return SKIP, "SMS is off (TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN not set)"
    try:
        config = sms_config(s)
        if s.whatsapp_enabled:
            whatsapp_config(s, config)
    except ConfigurationError as exc:
        return FAIL, str(exc)
    try:
        status = await account_status(config, request_seconds=ctx.timeout)
    except SurfaceUnavailable as exc:
        return FAIL, str(exc)
    if status != "active":
        return (
            FAIL,
            f"the Twilio account {config.account_sid} is {status}: it sends nothing; see the Twilio console",
        )
    return (
        OK,
        f"Twilio accepts TWILIO_ACCOUNT_SID {config.account_sid} with its auth token; the account is active",
    )


async def teams(ctx: Context) -> Result:
    """Microsoft Entra ID issues the bot a token for the Bot Connector, as the server gets it."""
    s = ctx.need("microsoft_app_send_x5c", "teams_api_url")
    if not s.teams_enabled:
        return SKIP, "Teams is off (MICROSOFT_APP_ID, its password or certificate, and tenant not set)"
    try:
        config = teams_config(s, ctx.clock)
    except ConfigurationError as exc:
        return FAIL, str(exc)
    async with httpx.AsyncClient(timeout=ctx.timeout) as http:
        credentials = ClientCredentials(
            config.token_url, config.app_id, config.app_password, http, ctx.clock, config.certificate
        )
        try:
            await credentials.token()
        except SurfaceUnavailable as exc:
            return FAIL, str(exc)
    return OK, f"Microsoft Entra ID issued a bot token to {config.app_id} (tenant {config.app_tenant_id})"


async def smtp(ctx: Context) -> Result:
    """The SMTP server of COSIGNER_SMTP_URL answers, speaks TLS and accepts the user and
    password, the way the email surface connects (aiosmtplib); no message is sent."""
    import aiosmtplib

    s = ctx.need("smtp_url", "smtp_from")
    if not s.smtp_url and not s.smtp_from:
        return SKIP, "email is off (COSIGNER_SMTP_URL and COSIGNER_SMTP_FROM not set)"
    if not s.email_enabled:
        missing = "COSIGNER_SMTP_FROM" if s.smtp_url else "COSIGNER_SMTP_URL"
        return WARN, f"email is off: {missing} is not set"
    try:
        c = email_config(s)
    except ConfigurationError as exc:
        return FAIL, str(exc)
    client = aiosmtplib.SMTP(
        hostname=c.host,
        port=c.port,
        username=c.username,
        password=c.password,
        use_tls=c.implicit_tls,
        start_tls=None if c.clear_allowed else (False if c.implicit_tls else True),
        tls_context=c.tls,
        timeout=ctx.timeout,
    )
    where = f"{c.host}:{c.port}"
    try:
        async with client:
            await client.noop()
            encrypted = client.is_connected and (
                c.implicit_tls or client.get_transport_info("sslcontext") is not None
            )
    except aiosmtplib.SMTPAuthenticationError as exc:
        return FAIL, f"{where} refused the user and password of COSIGNER_SMTP_URL ({exc.code} {exc.message})"
    except aiosmtplib.SMTPException as exc:
        return (
            FAIL,
            f"{where}: {type(exc).__name__}: {exc}; check COSIGNER_SMTP_URL (host, port, smtp:// or smtps://)",
        )
    except OSError as exc:
        return FAIL, f"{where} cannot be reached ({exc}); check COSIGNER_SMTP_URL"
    login = f" as {c.username}" if c.username else " (no AUTH)"
    tls = "over TLS" if encrypted else "in clear (a loopback relay offering no STARTTLS)"
    return OK, f"{where} answers {tls}{login}; mail is sent from {c.sender}"


async def oidc(ctx: Context) -> Result:
    """The inbox's OpenID issuer serves its discovery document and a JWKS with keys."""
    s = ctx.need("oidc_issuer")
    given = {
        "COSIGNER_OIDC_ISSUER": s.oidc_issuer,
        "COSIGNER_OIDC_CLIENT_ID": s.oidc_client_id,
        "COSIGNER_OIDC_CLIENT_SECRET": s.oidc_client_secret,
    }
    if not any(given.values()):
        return SKIP, "the inbox's sign-in is off (COSIGNER_OIDC_ISSUER and its client not set)"
    if not all(given.values()):
        return (
            WARN,
            f"the inbox's sign-in is off: {' and '.join(k for k, v in given.items() if not v)} not set",
        )
    signin = SignIn(s.oidc_issuer or "", s.oidc_client_id or "", s.oidc_client_secret or "")
    discovery = f"{signin.issuer}/.well-known/openid-configuration"
    metadata = await _fetched(signin.client.load_server_metadata, discovery, signin.issuer)
    if isinstance(metadata, str):
        return FAIL, metadata
    named = str(metadata.get("issuer", "")).rstrip("/")
    if named != signin.issuer:
        return FAIL, (
            f"{discovery} names the issuer {named or 'nobody'!r}, not COSIGNER_OIDC_ISSUER: every "
            "sign-in would be refused; set COSIGNER_OIDC_ISSUER to the issuer it names"
        )
    missing = [k for k in ("authorization_endpoint", "token_endpoint", "jwks_uri") if not metadata.get(k)]
    if missing:
        return FAIL, f"{discovery} has no {', '.join(missing)}: it is not an OpenID Connect issuer's"
    jwks = await _fetched(signin.client.fetch_jwk_set, str(metadata["jwks_uri"]), signin.issuer)
    if isinstance(jwks, str):
        return FAIL, jwks
    keys = jwks.get("keys")
    if not isinstance(keys, list) or not keys:
        return FAIL, f"the JWKS at {metadata['jwks_uri']} holds no keys: no sign-in could be verified"
    return OK, f"{signin.issuer}: discovery document and JWKS ({len(keys)} key(s)) reachable"


async def _fetched(
    fetch: Callable[[], Awaitable[dict[str, object]]], where: str, issuer: str
) -> dict[str, object] | str:
    """What authlib fetched from `where`, or the line saying why it could not."""
    try:
        document = await fetch()
    except HTTP_ERRORS as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        if status is not None:
            return f"{where} answered HTTP {status}: check COSIGNER_OIDC_ISSUER (the issuer's URL itself)"
        return f"{unreachable(issuer)} ({type(exc).__name__})"
    except ValueError:
        return f"{where} is not JSON: check COSIGNER_OIDC_ISSUER (the issuer's URL itself)"
    return document if isinstance(document, dict) else f"{where} is not a JSON object"

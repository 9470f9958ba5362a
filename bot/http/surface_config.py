"""Which surfaces the settings switch on, and each one's configuration built from them.

`default_surfaces` gives `build_app` a factory per configured surface; `sms_config`,
`whatsapp_config` and `teams_config` are also what `cosigner doctor` checks the credentials
with, so both read the settings the same way. A setting a surface cannot use is a
`ConfigurationError` naming the variable.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

import httpx

from bot.approvals import Desk
from bot.oncall import OnCall, provider_for
from bot.policy.email_approvers import SMTP_FIX, needs_smtp
from bot.policy.oncall_refs import OnCallProvider
from bot.policy.rules import Policy
from bot.policy.tool_rule import outcomes
from bot.settings import Settings
from contracts.ports import SurfaceAdapter
from contracts.reach import Channel
from storage.database import Database
from storage.slack_installs import SlackInstallStores

if TYPE_CHECKING:  # the surfaces' modules load only when their surface is on
    from surfaces.email import EmailConfig
    from surfaces.sms import SmsConfig
    from surfaces.teams import TeamsConfig
    from surfaces.whatsapp import WhatsAppConfig

SurfaceFactory = Callable[[Desk], SurfaceAdapter]
"""Builds one surface adapter for the app's desk (SMS and WhatsApp also take its `sms_store`)."""


class ConfigurationError(Exception):
    """Settings that cannot work together; the message names the variable to fix."""


def refuse_email_without_smtp(policy: Policy, enabled: Collection[str]) -> None:
    """A policy that asks `email` (approvers, an escalation, a headless route) needs the
    email surface: refuse to start without it, naming the rule and the variables."""
    if Channel.EMAIL in enabled:
        return
    rules = (o for t in ("", *policy.tenants) for r in policy.rules_of(t) for o in outcomes(r))
    path = needs_smtp(rules, policy.tenants.values())
    if path is not None:
        raise ConfigurationError(
            f'{path} names "email", and this server sends no mail: {SMTP_FIX} (see docs/email.md), '
            "or name other approvers there"
        )


def partial_configuration(settings: Settings) -> list[str]:
    """Warnings for a surface that is half configured and therefore off."""
    out = []
    slack = {
        "SLACK_SIGNING_SECRET or SLACK_APP_TOKEN": settings.slack_signing_secret or settings.slack_app_token,
        "SLACK_BOT_TOKEN or SLACK_CLIENT_ID/SLACK_CLIENT_SECRET": settings.slack_bot_token
        or (settings.slack_client_id and settings.slack_client_secret),
    }
    if any(slack.values()) and not all(slack.values()):
        missing = " and ".join(k for k, v in slack.items() if not v)
        out.append(f"Slack is off: {missing} is not set")
    twilio = {
        "TWILIO_ACCOUNT_SID": settings.twilio_account_sid,
        "TWILIO_AUTH_TOKEN": settings.twilio_auth_token,
    }
    if any(twilio.values()) and not all(twilio.values()):
        missing = " and ".join(k for k, v in twilio.items() if not v)
        out.append(f"SMS is off: {missing} is not set")
    whatsapp = {
        "TWILIO_WHATSAPP_FROM": settings.twilio_whatsapp_from,
        "TWILIO_WHATSAPP_CONTENT_SID": settings.twilio_whatsapp_content_sid,
        **twilio,
    }
    if (settings.twilio_whatsapp_from or settings.twilio_whatsapp_content_sid) and not all(whatsapp.values()):
        missing = " and ".join(k for k, v in whatsapp.items() if not v)
        out.append(f"WhatsApp is off: {missing} is not set")
    teams = {
        "MICROSOFT_APP_ID": settings.microsoft_app_id,
        "MICROSOFT_APP_PASSWORD or MICROSOFT_APP_CERTIFICATE": settings.microsoft_app_password
        or settings.microsoft_app_certificate,
        "MICROSOFT_APP_TENANT_ID": settings.microsoft_app_tenant_id,
    }
    if any(teams.values()) and not all(teams.values()):
        missing = " and ".join(k for k, v in teams.items() if not v)
        out.append(f"Teams is off: {missing} is not set")
    if bool(settings.smtp_url) != bool(settings.smtp_from):
        missing = "COSIGNER_SMTP_FROM" if settings.smtp_url else "COSIGNER_SMTP_URL"
        out.append(f"Email is off: {missing} is not set")
    return out


def slack_install_stores(settings: Settings, db: Database) -> SlackInstallStores | None:
    """The database stores for multi-workspace Slack installs, when OAuth is configured."""
    if not (settings.slack_enabled and settings.slack_client_id and settings.slack_client_secret):
        return None
    return SlackInstallStores.on(db, client_id=settings.slack_client_id, token_secret=settings.secret or "")


def default_surfaces(
    settings: Settings, installs: SlackInstallStores | None, clock: Callable[[], float] = time.time
) -> list[SurfaceFactory]:
    """Slack, SMS, Teams and email factories for whatever the settings configure."""
    factories: list[SurfaceFactory] = []
    if settings.slack_enabled:
        from surfaces.slack import SlackAdapter, SlackConfig

        config = SlackConfig(
            signing_secret=settings.slack_signing_secret or "",
            bot_token=settings.slack_bot_token,
            client_id=settings.slack_client_id,
            client_secret=settings.slack_client_secret,
            api_url=settings.slack_api_url,
            app_id=settings.slack_app_id,
            installations=installs.installations if installs else None,
            oauth_states=installs.states if installs else None,
            app_token=settings.slack_app_token,
            inbox_url=inbox_url(settings),
        )
        factories.append(lambda desk: SlackAdapter(config, desk))
    if settings.sms_enabled:
        from surfaces.sms import SmsAdapter

        sms = sms_config(settings)
        factories.append(lambda desk: SmsAdapter(sms, desk, desk.sms_store))
        if settings.whatsapp_enabled:
            from surfaces.whatsapp import WhatsAppAdapter

            whatsapp = whatsapp_config(settings, sms)
            factories.append(lambda desk: WhatsAppAdapter(whatsapp, desk, desk.sms_store))
    if settings.teams_enabled:
        from surfaces.teams import TeamsAdapter

        teams = teams_config(settings, clock)
        factories.append(lambda desk: TeamsAdapter(teams, desk))
    if settings.email_enabled:
        from surfaces.email import EmailAdapter

        mail = email_config(settings)
        factories.append(lambda desk: EmailAdapter(mail, desk, clock))
    return factories


def inbox_url(settings: Settings) -> str | None:
    """The inbox (`…/inbox/`) when sign-in is configured: texts name it for a call too long
    to text, and step-up requests link there instead of offering Approve."""
    return f"{settings.public_url.rstrip('/')}/inbox/" if settings.oidc_enabled else None


def email_config(settings: Settings) -> EmailConfig:
    """The email surface's configuration, or `ConfigurationError` naming the variable to fix."""
    from surfaces.email import EmailConfig, EmailConfigError

    try:
        return EmailConfig.from_url(settings.smtp_url or "", settings.smtp_from or "", settings.public_url)
    except EmailConfigError as exc:
        raise ConfigurationError(str(exc)) from None


def sms_config(settings: Settings) -> SmsConfig:
    """The SMS surface's configuration, or `ConfigurationError` naming the variable to fix."""
    from surfaces.sms import SmsConfig, SmsConfigError

    try:
        return SmsConfig(
            account_sid=settings.twilio_account_sid or "",
            auth_token=settings.twilio_auth_token or "",
            from_number=settings.twilio_from_number,
            messaging_service_sid=settings.twilio_messaging_service_sid,
            api_url=settings.twilio_api_url,
            public_url=settings.public_url,
            # A call too long to text whole is read there (it lists what was texted to a
            # signed-in person's verified number): the texts name it when it is on.
            inbox_url=inbox_url(settings),
        )
    except SmsConfigError as exc:
        raise ConfigurationError(str(exc)) from exc


def whatsapp_config(settings: Settings, sms: SmsConfig) -> WhatsAppConfig:
    """The WhatsApp surface's configuration, or `ConfigurationError` naming the variable to fix."""
    from surfaces.whatsapp import WhatsAppConfig, WhatsAppConfigError

    try:
        return WhatsAppConfig(
            sms, settings.twilio_whatsapp_from or "", settings.twilio_whatsapp_content_sid or ""
        )
    except WhatsAppConfigError as exc:
        raise ConfigurationError(str(exc)) from exc


def teams_config(settings: Settings, clock: Callable[[], float] = time.time) -> TeamsConfig:
    """The Teams surface's configuration (its certificate loaded), or `ConfigurationError`."""
    from surfaces.teams import CertificateError, ClientCertificate, TeamsConfig, TeamsConfigError

    try:
        certificate = None
        if settings.microsoft_app_certificate:
            certificate = ClientCertificate.load(
                settings.microsoft_app_certificate,
                settings.microsoft_app_certificate_password,
                send_x5c=settings.microsoft_app_send_x5c,
            )
        return TeamsConfig(
            app_id=settings.microsoft_app_id or "",
            app_password=settings.microsoft_app_password,
            app_tenant_id=settings.microsoft_app_tenant_id or "",
            api_url=settings.teams_api_url,
            clock=clock,
            certificate=certificate,
            inbox_url=inbox_url(settings),
        )
    except (TeamsConfigError, CertificateError) as exc:
        raise ConfigurationError(str(exc)) from exc


def oncall_lookups(
    settings: Settings, clock: Callable[[], float]
) -> tuple[OnCall | None, httpx.AsyncClient | None]:
    """Who-is-on-call for the providers whose token is set (None: none is), and the HTTP
    client it asks them with (the app closes it when it stops)."""
    tokens = {
        OnCallProvider.PAGERDUTY: (settings.pagerduty_token, settings.pagerduty_url),
        OnCallProvider.OPSGENIE: (settings.opsgenie_token, settings.opsgenie_url),
    }
    if not any(token for token, _ in tokens.values()):
        return None, None
    client = httpx.AsyncClient(follow_redirects=False)
    providers = {
        kind: provider_for(kind, client, token, url) for kind, (token, url) in tokens.items() if token
    }
    slack = None
    if settings.slack_enabled and settings.slack_bot_token:
        from surfaces.slack.directory import SlackDirectory

        slack = SlackDirectory(settings.slack_bot_token, settings.slack_api_url)
    return OnCall(providers, slack, clock=clock, ttl=float(settings.oncall_cache_seconds)), client

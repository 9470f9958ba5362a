"""Configuration from the environment (12-factor), with Slack's and Twilio's usual names.

Every value is checked when the settings are read: `load_settings()` turns the first
problems into one `SettingsError` line that names each variable and what it accepts, and
never quotes a secret.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from pydantic import AliasChoices, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.settings_rules import (
    CROSS_FIELDS,
    DEV_SECRET,
    MAKE_SECRET,
    MIN_SECRET_BYTES,
    RULES,
    SECRET_FIELDS,
    LogLevel,
)
from storage.sqlite_sync import SqliteSync
from storage.urls import database_backend, default_sqlite_url


class SettingsError(ValueError):
    """A setting has a value Cosigner cannot use; the message names the variable and the fix."""


def _env(name: str) -> AliasChoices:
    return AliasChoices(name, name.lower())


def _is_http_url(value: str) -> bool:
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


class Settings(BaseSettings):
    """Every setting Cosigner reads; unset Slack or Twilio variables turn that surface off."""

    # An empty variable counts as unset, the way `FOO=` in a shell or an env file is meant.
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, env_ignore_empty=True)

    database_url: str = Field(
        default_factory=default_sqlite_url, validation_alias=_env("COSIGNER_DATABASE_URL")
    )
    database_pool_size: int = Field(
        default=20, ge=1, le=500, validation_alias=_env("COSIGNER_DATABASE_POOL_SIZE")
    )
    # None: unset, which is NORMAL on SQLite (see `sqlite_sync`).
    sqlite_synchronous: SqliteSync | None = Field(
        default=None, validation_alias=_env("COSIGNER_SQLITE_SYNCHRONOUS")
    )
    policy: str | None = Field(default=None, validation_alias=_env("COSIGNER_POLICY"))
    # A second policy decided alongside, acting on nothing: its differences are logged,
    # counted and audited (bot.policy.decision.differences).
    policy_shadow: str | None = Field(default=None, validation_alias=_env("COSIGNER_POLICY_SHADOW"))
    public_url: str = Field(default="http://127.0.0.1:8000", validation_alias=_env("COSIGNER_PUBLIC_URL"))
    secret: str | None = Field(default=None, validation_alias=_env("COSIGNER_SECRET"))
    log_level: LogLevel = Field(default=LogLevel.INFO, validation_alias=_env("COSIGNER_LOG_LEVEL"))
    # Comma-separated CIDRs and host names callbacks may reach although not public (bot.egress.urls).
    callback_allow: str = Field(default="", validation_alias=_env("COSIGNER_CALLBACK_ALLOW"))
    # The audit sink (bot.workers.audit_sink): each audit event POSTed there as a CloudEvent;
    # past the backlog bound nothing is dropped, but doctor fails and /metrics says so.
    audit_sink_url: str | None = Field(default=None, validation_alias=_env("COSIGNER_AUDIT_SINK_URL"))
    audit_sink_max_backlog: int = Field(
        default=100_000, ge=1, validation_alias=_env("COSIGNER_AUDIT_SINK_MAX_BACKLOG")
    )
    # Tests only: the instant a stepped clock starts at (bot.testing.stepped_clock); unset in production.
    test_clock: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, validation_alias=_env("COSIGNER_TEST_CLOCK")
    )

    slack_signing_secret: str | None = Field(default=None, validation_alias=_env("SLACK_SIGNING_SECRET"))
    slack_bot_token: str | None = Field(default=None, validation_alias=_env("SLACK_BOT_TOKEN"))
    slack_client_id: str | None = Field(default=None, validation_alias=_env("SLACK_CLIENT_ID"))
    slack_client_secret: str | None = Field(default=None, validation_alias=_env("SLACK_CLIENT_SECRET"))
    slack_app_id: str | None = Field(default=None, validation_alias=_env("SLACK_APP_ID"))
    slack_api_url: str | None = Field(default=None, validation_alias=_env("SLACK_API_URL"))
    slack_app_token: str | None = Field(default=None, validation_alias=_env("SLACK_APP_TOKEN"))

    # Whoever is on call (bot.oncall): each provider's API token and base URL, and how long
    # an answer of theirs is kept.
    pagerduty_token: str | None = Field(default=None, validation_alias=_env("COSIGNER_PAGERDUTY_TOKEN"))
    pagerduty_url: str | None = Field(default=None, validation_alias=_env("COSIGNER_PAGERDUTY_URL"))
    opsgenie_token: str | None = Field(default=None, validation_alias=_env("COSIGNER_OPSGENIE_TOKEN"))
    opsgenie_url: str | None = Field(default=None, validation_alias=_env("COSIGNER_OPSGENIE_URL"))
    oncall_cache_seconds: int = Field(
        default=60, ge=0, le=3600, validation_alias=_env("COSIGNER_ONCALL_CACHE_SECONDS")
    )

    # The inbox's OpenID Connect sign-in (bot.inbox); all three or none.
    oidc_issuer: str | None = Field(default=None, validation_alias=_env("COSIGNER_OIDC_ISSUER"))
    oidc_client_id: str | None = Field(default=None, validation_alias=_env("COSIGNER_OIDC_CLIENT_ID"))
    oidc_client_secret: str | None = Field(default=None, validation_alias=_env("COSIGNER_OIDC_CLIENT_SECRET"))
    # What the sign-in button names ("Sign in with Okta"); unset: the issuer's known name, else its host.
    oidc_display_name: str | None = Field(
        default=None, max_length=60, validation_alias=_env("COSIGNER_OIDC_DISPLAY_NAME")
    )
    inbox_session_seconds: int = Field(
        default=8 * 3600, ge=60, le=30 * 86400, validation_alias=_env("COSIGNER_INBOX_SESSION_SECONDS")
    )

    # Email (surfaces.email): the operator's SMTP server and the From address; both or none.
    smtp_url: str | None = Field(default=None, validation_alias=_env("COSIGNER_SMTP_URL"))
    smtp_from: str | None = Field(default=None, validation_alias=_env("COSIGNER_SMTP_FROM"))

    twilio_account_sid: str | None = Field(default=None, validation_alias=_env("TWILIO_ACCOUNT_SID"))
    twilio_auth_token: str | None = Field(default=None, validation_alias=_env("TWILIO_AUTH_TOKEN"))
    twilio_from_number: str | None = Field(default=None, validation_alias=_env("TWILIO_FROM_NUMBER"))
    twilio_messaging_service_sid: str | None = Field(
        default=None, validation_alias=_env("TWILIO_MESSAGING_SERVICE_SID")
    )
    twilio_api_url: str | None = Field(default=None, validation_alias=_env("TWILIO_API_URL"))
    twilio_whatsapp_from: str | None = Field(default=None, validation_alias=_env("TWILIO_WHATSAPP_FROM"))
    twilio_whatsapp_content_sid: str | None = Field(
        default=None, validation_alias=_env("TWILIO_WHATSAPP_CONTENT_SID")
    )

    microsoft_app_id: str | None = Field(default=None, validation_alias=_env("MICROSOFT_APP_ID"))
    microsoft_app_password: str | None = Field(default=None, validation_alias=_env("MICROSOFT_APP_PASSWORD"))
    microsoft_app_tenant_id: str | None = Field(
        default=None, validation_alias=_env("MICROSOFT_APP_TENANT_ID")
    )
    # Instead of the password: the app's certificate, a .pfx/.p12 or PEM file (key and certificate).
    microsoft_app_certificate: str | None = Field(
        default=None, validation_alias=_env("MICROSOFT_APP_CERTIFICATE")
    )
    microsoft_app_certificate_password: str | None = Field(
        default=None, validation_alias=_env("MICROSOFT_APP_CERTIFICATE_PASSWORD")
    )
    microsoft_app_send_x5c: bool = Field(default=False, validation_alias=_env("MICROSOFT_APP_SEND_X5C"))
    # The Teams emulator's base URL (Bot Connector, token and JWKS endpoints); dev and tests only.
    teams_api_url: str | None = Field(default=None, validation_alias=_env("TEAMS_API_URL"))

    # OpenTelemetry's own variables (bot.observability.telemetry); the SDK reads the others it knows itself.
    otel_exporter_otlp_endpoint: str | None = Field(
        default=None, validation_alias=_env("OTEL_EXPORTER_OTLP_ENDPOINT")
    )
    otel_exporter_otlp_traces_endpoint: str | None = Field(
        default=None, validation_alias=_env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )
    otel_exporter_otlp_protocol: str | None = Field(
        default=None, validation_alias=_env("OTEL_EXPORTER_OTLP_PROTOCOL")
    )
    otel_exporter_otlp_traces_protocol: str | None = Field(
        default=None, validation_alias=_env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
    )
    otel_traces_exporter: str | None = Field(default=None, validation_alias=_env("OTEL_TRACES_EXPORTER"))
    otel_sdk_disabled: str | None = Field(default=None, validation_alias=_env("OTEL_SDK_DISABLED"))

    @field_validator("log_level", "sqlite_synchronous", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("secret")
    @classmethod
    def _long_secret(cls, value: str | None) -> str | None:
        if value is not None and len(value.encode()) < MIN_SECRET_BYTES:
            raise ValueError(RULES["secret"])
        return value

    @field_validator("slack_bot_token")
    @classmethod
    def _bot_token(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("xoxb-"):
            raise ValueError(RULES["slack_bot_token"])
        return value

    @field_validator("slack_app_token")
    @classmethod
    def _app_token(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("xapp-"):
            raise ValueError(RULES["slack_app_token"])
        return value

    @field_validator("smtp_url")
    @classmethod
    def _smtp_url(cls, value: str | None) -> str | None:
        parts = urlsplit(value) if value is not None else None
        if parts is not None and (parts.scheme not in ("smtp", "smtps") or not parts.hostname):
            raise ValueError(RULES["smtp_url"])
        return value

    @field_validator("smtp_from")
    @classmethod
    def _smtp_from(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[^@\s<>,;]+@[^@\s<>,;]+\.[^@\s<>,;]+", value):
            raise ValueError(RULES["smtp_from"])
        return value

    @field_validator(
        "slack_api_url",
        "twilio_api_url",
        "teams_api_url",
        "oidc_issuer",
        "pagerduty_url",
        "opsgenie_url",
        "audit_sink_url",
    )
    @classmethod
    def _api_url(cls, value: str | None) -> str | None:
        if value is not None and not _is_http_url(value):
            raise ValueError("must be an absolute http:// or https:// URL")
        return value

    @field_validator("otel_exporter_otlp_endpoint", "otel_exporter_otlp_traces_endpoint")
    @classmethod
    def _otlp_url(cls, value: str | None) -> str | None:
        if value is not None and not _is_http_url(value.strip()):
            raise ValueError("must be an absolute http:// or https:// URL")
        return value.strip() if value is not None else None

    @field_validator("otel_exporter_otlp_protocol", "otel_exporter_otlp_traces_protocol")
    @classmethod
    def _otlp_protocol(cls, value: str | None) -> str | None:
        if value is not None and value.strip() != "http/protobuf":
            raise ValueError("must be http/protobuf")
        return value

    @field_validator("otel_traces_exporter")
    @classmethod
    def _traces_exporter(cls, value: str | None) -> str | None:
        if value is not None and value.strip().lower() not in ("otlp", "none"):
            raise ValueError("must be otlp or none")
        return value.strip().lower() if value is not None else None

    @model_validator(mode="after")
    def _sqlite_only(self) -> Settings:
        # A setting that can never take effect is refused rather than silently ignored.
        backend = database_backend(self.database_url)
        if self.sqlite_synchronous is not None and backend not in (None, "sqlite"):
            raise ValueError(
                "COSIGNER_SQLITE_SYNCHRONOUS applies to SQLite only; unset it for "
                "PostgreSQL, which syncs every commit itself (its synchronous_commit setting)"
            )
        return self

    @property
    def sqlite_sync(self) -> SqliteSync:
        """How SQLite syncs commits: COSIGNER_SQLITE_SYNCHRONOUS, NORMAL when unset."""
        return self.sqlite_synchronous or SqliteSync.NORMAL

    @model_validator(mode="after")
    def _public_url(self) -> Settings:
        # Slack and Twilio call this URL, and Twilio signs it: with either on it must be real.
        # Slack over Socket Mode alone (no signing secret, no OAuth installs) calls nothing.
        slack_calls = self.slack_enabled and bool(self.slack_signing_secret or self.slack_client_id)
        if (slack_calls or self.sms_enabled) and not _is_http_url(self.public_url):
            raise ValueError(
                f"COSIGNER_PUBLIC_URL {RULES['public_url']} (it is {self.public_url!r}), "
                "because Slack or SMS is on and calls it"
            )
        return self

    @property
    def email_enabled(self) -> bool:
        """Email is on when the SMTP server and the From address are both set."""
        return bool(self.smtp_url and self.smtp_from)

    @property
    def oidc_enabled(self) -> bool:
        """The inbox's sign-in is on when the issuer, client id and client secret are all set."""
        return bool(self.oidc_issuer and self.oidc_client_id and self.oidc_client_secret)

    @property
    def slack_enabled(self) -> bool:
        """Slack is on when a signing secret (or a Socket Mode app token) and a token or
        OAuth client are set."""
        return bool(
            (self.slack_signing_secret or self.slack_app_token)
            and (self.slack_bot_token or (self.slack_client_id and self.slack_client_secret))
        )

    @property
    def otlp_traces_endpoint(self) -> str | None:
        """Where spans are exported (OTLP/HTTP), or None: tracing off."""
        if (self.otel_sdk_disabled or "").strip().lower() == "true" or self.otel_traces_exporter == "none":
            return None
        if self.otel_exporter_otlp_traces_endpoint:
            return self.otel_exporter_otlp_traces_endpoint
        if self.otel_exporter_otlp_endpoint:
            # The signal's path is appended to the base endpoint, as the specification says.
            return self.otel_exporter_otlp_endpoint.rstrip("/") + "/v1/traces"
        return None

    @property
    def teams_enabled(self) -> bool:
        """Teams is on when the bot's app id, its password or certificate and its home tenant are set."""
        credential = self.microsoft_app_password or self.microsoft_app_certificate
        return bool(self.microsoft_app_id and credential and self.microsoft_app_tenant_id)

    @property
    def sms_enabled(self) -> bool:
        """SMS is on when Twilio credentials and a sender are set."""
        return bool(self.twilio_account_sid and self.twilio_auth_token)

    @property
    def whatsapp_enabled(self) -> bool:
        """WhatsApp is on when Twilio credentials, a WhatsApp sender and its template are set."""
        return bool(self.sms_enabled and self.twilio_whatsapp_from and self.twilio_whatsapp_content_sid)


def env_name(field: str) -> str:
    """The environment variable a settings field is read from."""
    alias = Settings.model_fields[field].validation_alias
    return str(alias.choices[0]) if isinstance(alias, AliasChoices) else field.upper()


def _field_of(name: str) -> str:
    for field, info in Settings.model_fields.items():
        alias = info.validation_alias
        if name == field or (isinstance(alias, AliasChoices) and name in alias.choices):
            return field
    return name


def describe(exc: ValidationError) -> str:
    """One line naming every bad variable and what it accepts, quoting no secret."""
    problems = []
    for error in exc.errors(include_url=False):
        loc = error["loc"]
        if not loc:  # a rule across variables: its message names them
            problems.append(str(error["msg"]).removeprefix("Value error, "))
            continue
        field = _field_of(str(loc[0]))
        rule = RULES.get(field) or str(error["msg"]).removeprefix("Value error, ")
        shown = "" if field in SECRET_FIELDS else f" (it is {error.get('input')!r})"
        problems.append(f"{env_name(field)} {rule}{shown}")
    return "; ".join(problems)


@dataclass(frozen=True)
class Reading:
    """The settings read as far as they go: what `cosigner doctor` checks the rest with."""

    settings: Settings | None  # the refused fields at their defaults; None if even that fails
    refused: frozenset[str]  # the fields whose variables break their rule
    problem: str | None  # `describe`'s line for them, None when every variable is good


def _refused_fields(exc: ValidationError) -> set[str]:
    fields = {_field_of(str(error["loc"][0])) for error in exc.errors(include_url=False) if error["loc"]}
    if any(not error["loc"] for error in exc.errors(include_url=False)):
        fields.update(CROSS_FIELDS)
    return fields


def read_settings() -> Reading:
    """The settings from the environment, going on past the variables that break their rule:
    those are named in `problem` and stand at their defaults, so the others can still be used."""
    refused: set[str] = set()
    problems: list[str] = []
    # The rules across variables run only once every variable passes its own, so setting the
    # refused ones aside may bring a cross-variable problem to light: at most once more.
    for _ in range(3):
        defaults = {f: Settings.model_fields[f].get_default(call_default_factory=True) for f in refused}
        try:
            settings = Settings(**defaults)
        except ValidationError as exc:
            problems.append(describe(exc))
            more = _refused_fields(exc) - refused
            if not more:
                break
            refused |= more
            continue
        return Reading(settings, frozenset(refused), "; ".join(problems) or None)
    return Reading(None, frozenset(refused), "; ".join(problems))


def secret_values(environ: Mapping[str, str]) -> list[str]:
    """The values of the secret variables set in `environ` (of the database URL, its password
    only): what no output may show, even quoted inside a library's error."""
    values = []
    for field in SECRET_FIELDS:
        alias = Settings.model_fields[field].validation_alias
        names = alias.choices if isinstance(alias, AliasChoices) else [field.upper()]
        for value in (environ[str(n)] for n in names if environ.get(str(n))):
            if field not in ("database_url", "smtp_url"):
                values.append(value)
                continue
            with contextlib.suppress(ValueError):
                values.append(unquote(urlsplit(value).password or ""))
    return [v for v in values if len(v) >= 4]  # shorter ones would mask ordinary words


def load_settings() -> Settings:
    """The settings from the environment, or `SettingsError` saying which variable to fix."""
    try:
        return Settings()
    except ValidationError as exc:
        raise SettingsError(describe(exc)) from None


__all__ = [
    "CROSS_FIELDS",
    "DEV_SECRET",
    "MAKE_SECRET",
    "MIN_SECRET_BYTES",
    "RULES",
    "SECRET_FIELDS",
    "LogLevel",
    "Reading",
    "Settings",
    "SettingsError",
    "describe",
    "env_name",
    "load_settings",
    "read_settings",
    "secret_values",
]

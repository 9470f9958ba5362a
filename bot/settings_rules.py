"""What each setting accepts, as an error says it (and the README's table), and which
settings are secrets, never quoted: the rules `bot.settings` reads the environment by.
"""

from __future__ import annotations

from enum import StrEnum

from storage.sqlite_sync import SqliteSync

DEV_SECRET = "cosigner-dev-secret-do-not-use-in-production"
MIN_SECRET_BYTES = 32
MAKE_SECRET = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"


class LogLevel(StrEnum):
    """The levels COSIGNER_LOG_LEVEL accepts (any case)."""

    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"
    CRITICAL = "CRITICAL"


# What each checked variable accepts, as shown in errors (and in the README's table).
RULES = {
    "database_pool_size": "must be a whole number from 1 to 500",
    "log_level": f"must be one of {', '.join(LogLevel)}",
    "sqlite_synchronous": f"must be one of {', '.join(SqliteSync)}",
    "secret": f"must be at least {MIN_SECRET_BYTES} bytes; make one with {MAKE_SECRET}",
    "slack_bot_token": "must be a bot token, starting with xoxb-",
    "slack_app_token": "must be an app-level token, starting with xapp- (Socket Mode)",
    "public_url": "must be an absolute http:// or https:// URL, e.g. https://cosigner.example.com",
    "slack_api_url": "must be an absolute http:// or https:// URL",
    "pagerduty_url": "must be an absolute http:// or https:// URL, e.g. https://api.pagerduty.com",
    "opsgenie_url": "must be an absolute http:// or https:// URL, e.g. https://api.eu.opsgenie.com",
    "oncall_cache_seconds": "must be a whole number of seconds from 0 to 3600",
    "twilio_api_url": "must be an absolute http:// or https:// URL",
    "teams_api_url": "must be an absolute http:// or https:// URL (the bundled emulator; tests and dev only)",
    "microsoft_app_send_x5c": "must be true or false",
    "otel_exporter_otlp_endpoint": "must be an absolute http:// or https:// URL, e.g. http://127.0.0.1:4318",
    "otel_exporter_otlp_traces_endpoint": "must be an absolute http:// or https:// URL, "
    "e.g. http://127.0.0.1:4318/v1/traces",
    "otel_exporter_otlp_protocol": "must be http/protobuf (Cosigner exports OTLP over HTTP)",
    "otel_exporter_otlp_traces_protocol": "must be http/protobuf (Cosigner exports OTLP over HTTP)",
    "otel_traces_exporter": "must be otlp or none",
    "oidc_display_name": "must be at most 60 characters, e.g. Okta (the button reads Sign in with Okta)",
    "test_clock": "must be a UNIX time in seconds (tests only; leave it unset)",
    "smtp_url": "must be smtp://HOST[:PORT] (STARTTLS) or smtps://HOST[:PORT] (TLS), with USER:PASSWORD@ "
    "if the server asks for them, e.g. smtp://cosigner:pw@mail.example.com:587",
    "smtp_from": "must be one email address, e.g. cosigner@example.com",
    "audit_sink_url": "must be an absolute http:// or https:// URL, e.g. https://siem.example.com/cloudevents",
    "audit_sink_max_backlog": "must be a whole number of events, at least 1, e.g. 100000",
}
# Values never quoted in an error.
SECRET_FIELDS = {
    "secret",
    "database_url",
    "slack_signing_secret",
    "slack_bot_token",
    "slack_client_secret",
    "slack_app_token",
    "twilio_auth_token",
    "microsoft_app_password",
    "microsoft_app_certificate_password",
    "oidc_client_secret",
    "smtp_url",
}
# The fields the rules across variables (the model validators below) refuse: a reading that
# must go on past them (`read_settings`) sets them aside as well.
CROSS_FIELDS = ("public_url", "sqlite_synchronous")

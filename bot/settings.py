"""Configuration from the environment (12-factor), with Slack's and Twilio's usual names."""

from __future__ import annotations

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from storage.database import default_sqlite_url

DEV_SECRET = "cosigner-dev-secret-do-not-use-in-production"


def _env(name: str) -> AliasChoices:
    return AliasChoices(name, name.lower())


class Settings(BaseSettings):
    """Every setting Cosigner reads; unset Slack or Twilio variables turn that surface off."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    database_url: str = Field(
        default_factory=default_sqlite_url, validation_alias=_env("COSIGNER_DATABASE_URL")
    )
    database_pool_size: int = Field(
        default=20, ge=1, le=500, validation_alias=_env("COSIGNER_DATABASE_POOL_SIZE")
    )
    policy: str | None = Field(default=None, validation_alias=_env("COSIGNER_POLICY"))
    public_url: str = Field(default="http://127.0.0.1:8000", validation_alias=_env("COSIGNER_PUBLIC_URL"))
    secret: str | None = Field(default=None, validation_alias=_env("COSIGNER_SECRET"))
    log_level: str = Field(default="INFO", validation_alias=_env("COSIGNER_LOG_LEVEL"))
    # Comma-separated CIDRs and host names callbacks may reach although not public (bot.egress).
    callback_allow: str = Field(default="", validation_alias=_env("COSIGNER_CALLBACK_ALLOW"))

    slack_signing_secret: str | None = Field(default=None, validation_alias=_env("SLACK_SIGNING_SECRET"))
    slack_bot_token: str | None = Field(default=None, validation_alias=_env("SLACK_BOT_TOKEN"))
    slack_client_id: str | None = Field(default=None, validation_alias=_env("SLACK_CLIENT_ID"))
    slack_client_secret: str | None = Field(default=None, validation_alias=_env("SLACK_CLIENT_SECRET"))
    slack_app_id: str | None = Field(default=None, validation_alias=_env("SLACK_APP_ID"))
    slack_api_url: str | None = Field(default=None, validation_alias=_env("SLACK_API_URL"))

    twilio_account_sid: str | None = Field(default=None, validation_alias=_env("TWILIO_ACCOUNT_SID"))
    twilio_auth_token: str | None = Field(default=None, validation_alias=_env("TWILIO_AUTH_TOKEN"))
    twilio_from_number: str | None = Field(default=None, validation_alias=_env("TWILIO_FROM_NUMBER"))
    twilio_messaging_service_sid: str | None = Field(
        default=None, validation_alias=_env("TWILIO_MESSAGING_SERVICE_SID")
    )
    twilio_api_url: str | None = Field(default=None, validation_alias=_env("TWILIO_API_URL"))

    @property
    def slack_enabled(self) -> bool:
        """Slack is on when a signing secret and a token or OAuth client are set."""
        return bool(
            self.slack_signing_secret
            and (self.slack_bot_token or (self.slack_client_id and self.slack_client_secret))
        )

    @property
    def sms_enabled(self) -> bool:
        """SMS is on when Twilio credentials and a sender are set."""
        return bool(self.twilio_account_sid and self.twilio_auth_token)

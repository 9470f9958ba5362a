"""The Slack Web API client Cosigner uses, with retries, and the translation of its errors.

Retries: 429 honouring `Retry-After` (slack_sdk only does this when the handler is added),
500/503 with backoff, and dropped connections. Timeouts are not retried: a post that timed
out may have landed, and a second card would only confuse the approver. Whatever still
fails leaves here as `SurfaceUnavailable`, never as a slack_sdk or aiohttp error.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.http_retry.builtin_interval_calculators import BackoffRetryIntervalCalculator
from slack_sdk.web.async_client import AsyncWebClient

from contracts.errors import SurfaceUnavailable

SLACK_API_URL = "https://slack.com/api/"
TIMEOUT_SECONDS = 10

# Every Web API method this surface calls, and the bot scope it needs (None: no scope).
# manifest.yml lists exactly the union of these; tests/surfaces/slack checks it.
SCOPES: dict[str, str | None] = {
    "auth.test": None,
    "chat.postMessage": "chat:write",
    "chat.update": "chat:write",
    "chat.postEphemeral": "chat:write",
    "conversations.open": "im:write",
    "users.lookupByEmail": "users:read.email",  # on-call people, found by email
    "views.open": None,
    "views.update": None,
    "oauth.v2.access": None,
    "views.publish": None,
    "chat.getPermalink": None,
    # Called with the app-level token (SLACK_APP_TOKEN), whose scope is connections:write.
    "apps.connections.open": None,
}

# Scopes for features rather than Web API methods: `commands` lets the app receive `/cosigner`.
FEATURE_SCOPES: dict[str, str] = {"/cosigner": "commands"}

_FIXES = {
    "not_in_channel": "invite the Cosigner app to the channel (`/invite @Cosigner`)",
    "channel_not_found": "check the channel id, and invite the app if the channel is private",
    "is_archived": "unarchive the channel or route approvals elsewhere",
    "invalid_auth": "check SLACK_BOT_TOKEN, or reinstall the app via /slack/install",
    "not_authed": "set SLACK_BOT_TOKEN, or install the app via /slack/install",
    "token_revoked": "reinstall the app via /slack/install",
    "account_inactive": "reinstall the app via /slack/install",
    "missing_scope": "add the scopes in manifest.yml to the app and reinstall it",
    "ratelimited": "Slack kept rate-limiting after retries; try again later",
    "not_allowed_token_type": "SLACK_APP_TOKEN must be an app-level token (xapp-…, scope connections:write)",
    "message_not_found": "the card was deleted in Slack; nothing to update",
}


def bot_scopes() -> tuple[str, ...]:
    """The bot scopes the code calls for, sorted."""
    return tuple(sorted({s for s in SCOPES.values() if s is not None} | set(FEATURE_SCOPES.values())))


def retry_handlers() -> list[AsyncRetryHandler]:
    """Fresh retry handlers: they hold per-request state, so each client gets its own."""
    backoff = BackoffRetryIntervalCalculator(backoff_factor=0.25)
    return [
        AsyncRateLimitErrorRetryHandler(max_retry_count=2),
        AsyncServerErrorRetryHandler(max_retry_count=2, interval_calculator=backoff),
        AsyncConnectionErrorRetryHandler(max_retry_count=2, interval_calculator=backoff),
    ]


def build_client(
    token: str | None, api_url: str | None, session: aiohttp.ClientSession | None
) -> AsyncWebClient:
    """An `AsyncWebClient` on the configured base URL with Cosigner's retries."""
    logger = logging.getLogger("cosigner.slack.web")
    # slack_sdk logs request bodies at DEBUG; cards hold (redacted) parameters, keep them out.
    logger.setLevel(max(logger.level, logging.INFO))
    return AsyncWebClient(
        token=token,
        base_url=api_url or SLACK_API_URL,
        timeout=TIMEOUT_SECONDS,
        session=session,
        logger=logger,
        retry_handlers=retry_handlers(),
    )


@contextlib.asynccontextmanager
async def translated(method: str, where: str) -> AsyncIterator[None]:
    """Turn Slack client failures of `method` (posting to `where`) into `SurfaceUnavailable`."""
    try:
        yield
    except SlackApiError as exc:
        error = _error_code(exc)
        fix = _FIXES.get(error, "see https://api.slack.com/methods/" + method)
        raise SurfaceUnavailable(
            f"Slack refused {method} in {where}: {error}; {fix}", method=method, slackError=error
        ) from exc
    except (TimeoutError, SlackClientError, aiohttp.ClientError) as exc:
        raise SurfaceUnavailable(
            f"Slack could not be reached for {method} ({type(exc).__name__}); "
            "check connectivity to slack.com or SLACK_API_URL",
            method=method,
        ) from exc


def _error_code(exc: SlackApiError) -> str:
    response = exc.response
    data = getattr(response, "data", None)
    if isinstance(data, dict) and isinstance(data.get("error"), str):
        return str(data["error"])
    return f"http_{getattr(response, 'status_code', 'error')}"

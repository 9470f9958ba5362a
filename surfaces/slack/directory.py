"""Slack users by email (`users.lookupByEmail`, scope `users:read.email`): how an on-call
person named by their email is found in the workspace to be asked there."""

from __future__ import annotations

from slack_sdk.errors import SlackApiError

from surfaces.slack.web_client import build_client, translated


class SlackDirectory:
    """Looks people up in the workspace of the bot token (`SLACK_BOT_TOKEN`)."""

    def __init__(self, token: str, api_url: str | None = None) -> None:
        self.client = build_client(token, api_url, None)

    async def user_by_email(self, email: str) -> str | None:
        """The Slack user id of `email`, or None when the workspace has no such user.
        `SurfaceUnavailable` when Slack cannot say (down, token refused, scope missing)."""
        async with translated("users.lookupByEmail", "the workspace"):
            try:
                response = await self.client.users_lookupByEmail(email=email)
            except SlackApiError as exc:
                data = getattr(exc.response, "data", None)
                if isinstance(data, dict) and data.get("error") == "users_not_found":
                    return None
                raise
        user = response.get("user")
        if not isinstance(user, dict) or user.get("deleted") or user.get("is_bot"):
            return None
        ident = user.get("id")
        return ident if isinstance(ident, str) else None

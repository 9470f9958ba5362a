"""The Slack methods behind the Home tab and card links, emulated: `views.publish`, `chat.getPermalink`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from surfaces.slack.emulator import SlackEmulator


def publish_view(emu: SlackEmulator, args: dict[str, Any], token: str | None) -> dict[str, Any]:
    """`views.publish`: a person's Home tab, kept as the latest view per user."""
    from surfaces.slack.emulated_methods import SlackError, _authed, _json_arg

    _authed(emu, token)
    user, view = args.get("user_id"), _json_arg(args, "view")
    if not isinstance(user, str) or not user:
        raise SlackError("invalid_arguments")
    if not isinstance(view, dict) or view.get("type") != "home":
        raise SlackError("invalid_arguments")
    emu.home_tabs[user] = view
    return {"view": {"id": f"V{len(emu.home_tabs):08d}", **view}}


def permalink(emu: SlackEmulator, args: dict[str, Any], token: str | None) -> dict[str, Any]:
    """`chat.getPermalink`: a link to a posted message."""
    from surfaces.slack.emulated_methods import SlackError, _authed

    ws = _authed(emu, token)
    channel, ts = args.get("channel"), args.get("message_ts")
    if emu.latest(str(channel), str(ts)) is None:
        raise SlackError("message_not_found")
    stamp = str(ts).replace(".", "")
    return {
        "channel": channel,
        "permalink": f"https://emulated.slack.com/archives/{channel}/p{stamp}?team={ws.team_id}",
    }

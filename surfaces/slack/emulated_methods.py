"""The Web API methods the Slack emulator answers, and the records they leave.

Each handler takes the call's arguments and token and returns Slack's JSON: `ok: true` with
the usual fields, or `ok: false` with Slack's error string for the same mistake.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from surfaces.slack import emulated_home

if TYPE_CHECKING:
    from surfaces.slack.emulator import SlackEmulator

Handler = Callable[[dict[str, Any], "str | None"], dict[str, Any]]
SCOPES = "chat:write,im:write,users:read,users:read.email"


@dataclass
class Recorded:
    """A message as the emulator saw it posted, updated or shown ephemerally."""

    method: str
    channel: str
    ts: str
    text: str | None
    blocks: list[dict[str, Any]]
    thread_ts: str | None = None
    user: str | None = None
    team_id: str | None = None


@dataclass
class OpenedView:
    """A modal opened with `views.open`; `views.update` replaces `view` and counts `updates`."""

    id: str
    trigger_id: str
    view: dict[str, Any]
    team_id: str | None
    updates: int = 0


@dataclass
class Workspace:
    """What a bot token belongs to."""

    team_id: str | None
    enterprise_id: str | None = None
    is_enterprise_install: bool = False


class SlackError(Exception):
    """Slack's `{"ok": false, "error": code}` for a call the emulator refuses."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


def table(emu: SlackEmulator) -> dict[str, Handler]:
    """Every emulated method by its Web API name, bound to one emulator."""
    methods: dict[str, Callable[[SlackEmulator, dict[str, Any], str | None], dict[str, Any]]] = {
        "auth.test": auth_test,
        "chat.postMessage": post_message,
        "chat.update": update_message,
        "chat.postEphemeral": post_ephemeral,
        "conversations.open": open_conversation,
        "users.info": user_info,
        "users.lookupByEmail": lookup_by_email,
        "views.open": open_view,
        "views.update": update_view,
        "oauth.v2.access": oauth_access,
        "views.publish": emulated_home.publish_view,
        "chat.getPermalink": emulated_home.permalink,
        "apps.connections.open": open_connection,
    }

    def bind(fn: Callable[[SlackEmulator, dict[str, Any], str | None], dict[str, Any]]) -> Handler:
        def call(args: dict[str, Any], token: str | None) -> dict[str, Any]:
            try:
                return {"ok": True, **fn(emu, args, token)}
            except SlackError as err:
                return {"ok": False, "error": err.error}

        return call

    return {name: bind(fn) for name, fn in methods.items()}


def auth_test(emu: SlackEmulator, args: dict[str, Any], token: str | None) -> dict[str, Any]:
    """`auth.test`: who this token is."""
    ws = _authed(emu, token)
    answer: dict[str, Any] = {
        "url": "https://emulated.slack.com/",
        "team": "Emulated workspace",
        "user": "cosigner",
        "team_id": ws.team_id,
        "user_id": emu.bot_user_id,
        "bot_id": "B0EMU",
        "is_enterprise_install": ws.is_enterprise_install,
    }
    if ws.enterprise_id:
        answer["enterprise_id"] = ws.enterprise_id
    return answer


def post_message(emu: SlackEmulator, args: dict[str, Any], token: str | None) -> dict[str, Any]:
    """`chat.postMessage`: a user id as channel posts into the app's DM with that user."""
    ws = _authed(emu, token)
    channel = _channel(emu, args)
    if channel[0] in "UW":
        channel = emu.dm_channel(channel)
    text, blocks = _content(args)
    message = Recorded(
        "chat.postMessage",
        channel,
        emu.next_ts(),
        text,
        blocks,
        args.get("thread_ts"),
        team_id=ws.team_id,
    )
    emu.record(message)
    return {"channel": channel, "ts": message.ts, "message": _shown(emu, message)}


def update_message(emu: SlackEmulator, args: dict[str, Any], token: str | None) -> dict[str, Any]:
    """`chat.update`: only a message this emulator holds; ephemerals cannot be updated."""
    ws = _authed(emu, token)
    channel = _channel(emu, args)
    before = emu.latest(channel, str(args.get("ts", "")))
    if before is None:
        raise SlackError("message_not_found")
    text, blocks = _content(args)
    message = Recorded("chat.update", channel, before.ts, text, blocks, before.thread_ts, team_id=ws.team_id)
    emu.record(message)
    return {"channel": channel, "ts": message.ts, "text": text, "message": _shown(emu, message)}


def post_ephemeral(emu: SlackEmulator, args: dict[str, Any], token: str | None) -> dict[str, Any]:
    """`chat.postEphemeral`: visible to one user; answers `message_ts`."""
    ws = _authed(emu, token)
    channel = _channel(emu, args)
    user = args.get("user")
    if not user:
        raise SlackError("user_not_in_channel")
    text, blocks = _content(args)
    message = Recorded(
        "chat.postEphemeral",
        channel,
        emu.next_ts(),
        text,
        blocks,
        args.get("thread_ts"),
        user=user,
        team_id=ws.team_id,
    )
    emu.record(message)
    return {"message_ts": message.ts}


def open_conversation(emu: SlackEmulator, args: dict[str, Any], token: str | None) -> dict[str, Any]:
    """`conversations.open`: the `D…` channel of a DM with one user."""
    _authed(emu, token)
    users = [u for u in str(args.get("users", "")).split(",") if u]
    if len(users) != 1:
        raise SlackError("users_list_not_supplied" if not users else "not_supported")
    return {"channel": {"id": emu.dm_channel(users[0]), "is_im": True, "user": users[0]}}


def user_info(emu: SlackEmulator, args: dict[str, Any], token: str | None) -> dict[str, Any]:
    """`users.info`: a made-up profile unless the emulator was given one."""
    ws = _authed(emu, token)
    user_id = str(args.get("user", ""))
    if not user_id or user_id[0] not in "UW":
        raise SlackError("user_not_found")
    user = {
        "id": user_id,
        "team_id": ws.team_id,
        "name": user_id.lower(),
        "real_name": f"User {user_id}",
        "deleted": False,
        "is_bot": False,
        "tz": "UTC",
    }
    return {"user": {**user, **emu.users.get(user_id, {})}}


def lookup_by_email(emu: SlackEmulator, args: dict[str, Any], token: str | None) -> dict[str, Any]:
    """`users.lookupByEmail`: the user the emulator was given with `profile.email`."""
    ws = _authed(emu, token)
    email = str(args.get("email", "")).casefold()
    if not email:
        raise SlackError("invalid_arguments")
    for user_id, user in emu.users.items():
        profile = user.get("profile")
        if isinstance(profile, dict) and str(profile.get("email", "")).casefold() == email:
            return {"user": {"id": user_id, "team_id": ws.team_id, "deleted": False, "is_bot": False, **user}}
    raise SlackError("users_not_found")


def open_view(emu: SlackEmulator, args: dict[str, Any], token: str | None) -> dict[str, Any]:
    """`views.open`: needs a trigger id from a recent interaction."""
    ws = _authed(emu, token)
    trigger = args.get("trigger_id")
    if not trigger or (emu.strict_triggers and trigger not in emu.triggers):
        raise SlackError("invalid_trigger_id")
    emu.triggers.discard(trigger)
    view = _json_arg(args, "view")
    if not isinstance(view, dict) or view.get("type") != "modal":
        raise SlackError("invalid_arguments")
    _check_blocks(view.get("blocks") or [], limit=100)
    opened = OpenedView(f"V{len(emu.views) + 1:08d}", trigger, view, ws.team_id)
    emu.views.append(opened)
    return {"view": {**view, "id": opened.id, "team_id": ws.team_id, "app_id": emu.app_id}}


def update_view(emu: SlackEmulator, args: dict[str, Any], token: str | None) -> dict[str, Any]:
    """`views.update`: replace an open modal (by `view_id`) in place; its id stays."""
    ws = _authed(emu, token)
    view_id = args.get("view_id")
    opened = next((v for v in emu.views if v.id == view_id), None) if view_id else None
    if opened is None:
        raise SlackError("not_found")
    view = _json_arg(args, "view")
    if not isinstance(view, dict) or view.get("type") != "modal":
        raise SlackError("invalid_arguments")
    _check_blocks(view.get("blocks") or [], limit=100)
    opened.view = view
    opened.updates += 1
    return {"view": {**view, "id": opened.id, "team_id": ws.team_id, "app_id": emu.app_id}}


def oauth_access(emu: SlackEmulator, args: dict[str, Any], token: str | None) -> dict[str, Any]:
    """`oauth.v2.access`: exchange a code from `issue_oauth_code` for a bot token."""
    if emu.client_id is not None and args.get("client_id") != emu.client_id:
        raise SlackError("invalid_client_id")
    if emu.client_secret is not None and args.get("client_secret") != emu.client_secret:
        raise SlackError("bad_client_secret")
    ws = emu.take_code(str(args.get("code", "")))
    if ws is None:
        raise SlackError("invalid_code")
    bot_token = f"xoxb-emu-{ws.team_id or ws.enterprise_id}-{emu.next_ts()}"
    emu.workspaces[bot_token] = ws
    team = None if ws.is_enterprise_install else {"id": ws.team_id, "name": "Emulated"}
    enterprise = {"id": ws.enterprise_id, "name": "Emulated org"} if ws.enterprise_id else None
    return {
        "app_id": emu.app_id,
        "authed_user": {"id": "U0INSTALLER"},
        "scope": SCOPES,
        "token_type": "bot",
        "access_token": bot_token,
        "bot_user_id": emu.bot_user_id,
        "team": team,
        "enterprise": enterprise,
        "is_enterprise_install": ws.is_enterprise_install,
    }


def _authed(emu: SlackEmulator, token: str | None) -> Workspace:
    if token is None:
        raise SlackError("not_authed")
    ws = emu.workspace_for(token)
    if ws is None:
        raise SlackError("invalid_auth")
    return ws


def _channel(emu: SlackEmulator, args: dict[str, Any]) -> str:
    channel = args.get("channel")
    if not channel:
        raise SlackError("channel_not_found")
    if channel in emu.missing_channels:
        raise SlackError("channel_not_found")
    return str(channel)


def _content(args: dict[str, Any]) -> tuple[str | None, list[dict[str, Any]]]:
    blocks = _json_arg(args, "blocks") or []
    if not isinstance(blocks, list):
        raise SlackError("invalid_blocks_format")
    _check_blocks(blocks)
    text = args.get("text")
    if not text and not blocks:
        raise SlackError("no_text")
    return text, blocks


def _check_blocks(blocks: list[Any], limit: int = 50) -> None:
    # Slack refuses the whole message (50 blocks) or modal (100) over these limits; catching
    # them here keeps tests honest.
    if len(blocks) > limit:
        raise SlackError("invalid_blocks")
    for block in blocks:
        if not isinstance(block, dict) or "type" not in block:
            raise SlackError("invalid_blocks")
        text = (block.get("text") or {}).get("text", "")
        limit = 150 if block["type"] == "header" else 3000
        if len(text) > limit:
            raise SlackError("invalid_blocks")


def _json_arg(args: dict[str, Any], name: str) -> Any:
    value = args.get(name)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise SlackError(f"invalid_{name}_format") from exc
    return value


def _shown(emu: SlackEmulator, message: Recorded) -> dict[str, Any]:
    return {
        "type": "message",
        "user": emu.bot_user_id,
        "bot_id": "B0EMU",
        "ts": message.ts,
        "text": message.text or "",
        "blocks": message.blocks,
        "team": message.team_id,
    }


def open_connection(emu: SlackEmulator, args: dict[str, Any], token: str | None) -> dict[str, Any]:
    """`apps.connections.open`: a one-time Socket Mode WebSocket URL for an app-level token."""
    if token is None or not token.startswith("xapp-"):
        # Slack answers a bot or user token here with `not_allowed_token_type`.
        raise SlackError("not_allowed_token_type" if token else "not_authed")
    if token not in emu.app_tokens:
        raise SlackError("invalid_auth")
    return {"url": emu.socket_url()}

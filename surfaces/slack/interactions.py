"""Really signed interaction requests, shaped exactly as Slack sends them.

The emulator uses these to click buttons on the messages it recorded and to submit the
modals it opened; tests override any field (user, team, enterprise, channel, ts, app id,
timestamp, secret) to forge the cases Cosigner must refuse.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import httpx
from slack_sdk.signature import SignatureVerifier

if TYPE_CHECKING:
    from surfaces.slack.emulator import SlackEmulator


def block_actions_payload(
    *,
    action: dict[str, Any],
    blocks: list[dict[str, Any]],
    channel: str,
    ts: str,
    user: str = "U1",
    user_team: str | None = None,
    team: str | None = "T1",
    enterprise: str | None = None,
    app_id: str = "A0EMU",
    trigger_id: str = "1.2.abc",
    is_ephemeral: bool = False,
    response_url: str | None = None,
) -> dict[str, Any]:
    """A `block_actions` payload for one button on a message."""
    return {
        "type": "block_actions",
        "token": "deprecated-verification-token",
        "user": {
            "id": user,
            "username": user.lower(),
            "name": user.lower(),
            "team_id": user_team or team or enterprise,
        },
        "api_app_id": app_id,
        "container": {
            "type": "message",
            "message_ts": ts,
            "channel_id": channel,
            "is_ephemeral": is_ephemeral,
        },
        "trigger_id": trigger_id,
        "team": {
            "id": team,
            "domain": "emulated",
            **_grid(enterprise),
        }
        if team
        else None,
        "enterprise": {"id": enterprise, "name": "Emulated org"} if enterprise else None,
        "is_enterprise_install": team is None,
        "channel": {"id": channel, "name": "emulated"},
        "message": {"type": "message", "ts": ts, "blocks": blocks, "text": ""},
        "state": {"values": {}},
        "response_url": response_url or f"https://hooks.slack.com/actions/{team or enterprise}/1/emulated",
        "actions": [{**action, "action_ts": f"{time.time():.6f}"}],
    }


def view_submission_payload(
    *,
    view: dict[str, Any],
    values: dict[str, dict[str, Any]],
    user: str = "U1",
    user_team: str | None = None,
    team: str | None = "T1",
    enterprise: str | None = None,
    app_id: str = "A0EMU",
    view_id: str = "V00000001",
) -> dict[str, Any]:
    """A `view_submission` payload for a modal with the given input `values`."""
    return {
        "type": "view_submission",
        "token": "deprecated-verification-token",
        "team": {"id": team, "domain": "emulated", **_grid(enterprise)} if team else None,
        "enterprise": {"id": enterprise, "name": "Emulated org"} if enterprise else None,
        "is_enterprise_install": team is None,
        "user": {
            "id": user,
            "username": user.lower(),
            "name": user.lower(),
            "team_id": user_team or team or enterprise,
        },
        "api_app_id": app_id,
        "trigger_id": "2.3.def",
        "view": {
            **view,
            "id": view_id,
            "team_id": team,
            "app_id": app_id,
            "state": {"values": values},
            "hash": "1.abc",
        },
        "response_urls": [],
    }


def signed_headers(body: bytes, secret: str, timestamp: str | None = None) -> dict[str, str]:
    """The headers Slack adds: a timestamp and `v0=` HMAC-SHA256 over `v0:{ts}:{body}`."""
    ts = timestamp if timestamp is not None else str(int(time.time()))
    try:
        signature = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body) or ""
    except ValueError:
        signature = "v0=" + "0" * 64
    return {
        "Content-Type": "application/x-www-form-urlencoded",
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature,
    }


async def send_signed(
    http: httpx.AsyncClient,
    url: str,
    payload: dict[str, Any],
    *,
    secret: str,
    timestamp: str | None = None,
    signature: str | None = None,
) -> httpx.Response:
    """POST `payload=<json>` form-encoded and signed, as Slack posts interactions."""
    body = urlencode({"payload": json.dumps(payload)}).encode()
    headers = signed_headers(body, secret, timestamp)
    if signature is not None:
        headers["X-Slack-Signature"] = signature
    return await http.post(url, content=body, headers=headers)


async def click(
    emu: SlackEmulator,
    http: httpx.AsyncClient,
    *,
    channel: str,
    ts: str,
    action_id: str,
    secret: str,
    url: str = "/slack/events",
    timestamp: str | None = None,
    signature: str | None = None,
    **fields: Any,
) -> httpx.Response:
    """Click the button `action_id` on the message the emulator holds at (channel, ts)."""
    payload = click_payload(emu, channel=channel, ts=ts, action_id=action_id, **fields)
    return await send_signed(http, url, payload, secret=secret, timestamp=timestamp, signature=signature)


def click_payload(
    emu: SlackEmulator, *, channel: str, ts: str, action_id: str, **fields: Any
) -> dict[str, Any]:
    """The `block_actions` payload of a click on a recorded message (HTTP or Socket Mode)."""
    message = emu.latest(channel, ts)
    if message is None:
        raise LookupError(f"the emulator holds no message at {channel}/{ts}")
    button = _find_button(message.blocks, action_id)
    trigger = f"{int(time.time())}.{len(emu.triggers) + 1}.emulated"
    emu.triggers.add(trigger)
    fields.setdefault("team", emu.team_id)
    fields.setdefault("app_id", emu.app_id)
    fields.setdefault("channel", channel)
    fields.setdefault("ts", ts)
    fields.setdefault("response_url", emu.response_url)
    return block_actions_payload(action=button, blocks=message.blocks, trigger_id=trigger, **fields)


async def click_in_view(
    emu: SlackEmulator,
    http: httpx.AsyncClient,
    *,
    action_id: str,
    secret: str,
    index: int = -1,
    url: str = "/slack/events",
    user: str = "U1",
    user_team: str | None = None,
    **fields: Any,
) -> httpx.Response:
    """Press the button `action_id` inside the modal the emulator opened (the latest by default)."""
    send = {k: fields.pop(k) for k in ("timestamp", "signature") if k in fields}
    payload = view_click_payload(
        emu, action_id=action_id, index=index, user=user, user_team=user_team, **fields
    )
    return await send_signed(http, url, payload, secret=secret, **send)


def view_click_payload(
    emu: SlackEmulator,
    *,
    action_id: str,
    index: int = -1,
    user: str = "U1",
    user_team: str | None = None,
    team: str | None = None,
    app_id: str | None = None,
) -> dict[str, Any]:
    """The `block_actions` payload of a press inside an opened modal (HTTP or Socket Mode)."""
    opened = emu.views[index]
    button = _find_button(opened.view.get("blocks") or [], action_id)
    trigger = f"{int(time.time())}.{len(emu.triggers) + 1}.emulated"
    emu.triggers.add(trigger)
    team = team or emu.team_id
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": user_team or team},
        "api_app_id": app_id or emu.app_id,
        "container": {"type": "view", "view_id": opened.id},
        "trigger_id": trigger,
        "team": {"id": team, "domain": "emulated"},
        "enterprise": None,
        "is_enterprise_install": False,
        "view": {**opened.view, "id": opened.id, "team_id": team, "app_id": emu.app_id, "hash": "1.abc"},
        "actions": [{**button, "action_ts": f"{time.time():.6f}"}],
    }


async def submit_view(
    emu: SlackEmulator,
    http: httpx.AsyncClient,
    *,
    secret: str,
    values: dict[str, dict[str, Any]],
    index: int = -1,
    url: str = "/slack/events",
    timestamp: str | None = None,
    signature: str | None = None,
    **fields: Any,
) -> httpx.Response:
    """Submit the modal the emulator opened (the latest by default) with input `values`."""
    payload = submission_payload(emu, values=values, index=index, **fields)
    response = await send_signed(http, url, payload, secret=secret, timestamp=timestamp, signature=signature)
    # As Slack does: an answer `{"response_action": "update", "view": …}` replaces the modal.
    if response.status_code == 200 and response.content.startswith(b"{"):
        answer = response.json()
        if answer.get("response_action") == "update" and isinstance(answer.get("view"), dict):
            opened = emu.views[index]
            opened.view = answer["view"]
            opened.updates += 1
    return response


def submission_payload(
    emu: SlackEmulator, *, values: dict[str, dict[str, Any]], index: int = -1, **fields: Any
) -> dict[str, Any]:
    """The `view_submission` payload of an opened modal (HTTP or Socket Mode)."""
    opened = emu.views[index]
    fields.setdefault("team", emu.team_id)
    fields.setdefault("app_id", emu.app_id)
    return view_submission_payload(view=opened.view, values=values, view_id=opened.id, **fields)


async def send_signed_event(
    http: httpx.AsyncClient,
    url: str,
    payload: dict[str, Any],
    *,
    secret: str,
    timestamp: str | None = None,
    retry: int | None = None,
) -> httpx.Response:
    """POST an Events API body (JSON), signed as Slack signs it; `retry` adds Slack's retry headers."""
    body = json.dumps(payload).encode()
    headers = {**signed_headers(body, secret, timestamp), "Content-Type": "application/json"}
    if retry is not None:
        headers |= {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_error"}
    return await http.post(url, content=body, headers=headers)


async def open_home(
    emu: SlackEmulator,
    http: httpx.AsyncClient,
    *,
    user: str,
    team: str,
    secret: str,
    url: str = "/slack/events",
) -> httpx.Response:
    """Open the app's Home tab as `user`: the signed `app_home_opened` event Slack sends."""
    return await send_signed_event(http, url, home_payload(emu, user=user, team=team), secret=secret)


def home_payload(emu: SlackEmulator, *, user: str, team: str) -> dict[str, Any]:
    """The `app_home_opened` event of `user` opening the app's Home tab (HTTP or Socket Mode)."""
    emu.home_opens += 1
    return {
        "type": "event_callback",
        "team_id": team,
        "api_app_id": emu.app_id,
        "event_id": f"EvHOME{emu.home_opens:06d}",
        "event_time": int(time.time()),
        "event": {"type": "app_home_opened", "user": user, "channel": emu.dm_channel(user), "tab": "home"},
    }


def _grid(enterprise: str | None) -> dict[str, str]:
    # A workspace of an Enterprise Grid org names its org inside `team`.
    return {"enterprise_id": enterprise, "enterprise_name": "Emulated org"} if enterprise else {}


def _find_button(blocks: list[dict[str, Any]], action_id: str) -> dict[str, Any]:
    for block in blocks:
        for element in block.get("elements", []) if block.get("type") == "actions" else []:
            if element.get("action_id") == action_id:
                return {
                    "type": "button",
                    "block_id": block.get("block_id"),
                    "action_id": action_id,
                    "value": element.get("value"),
                    "text": element.get("text"),
                }
    raise LookupError(f"no button {action_id!r} on that message (were its buttons removed?)")

"""SlackAdapter.deliver / show_outcome against the emulator, and its failure modes."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta
from typing import Any

import pytest

from contracts.enums import ApprovalStatus, SurfaceType
from contracts.errors import SurfaceUnavailable
from contracts.ports import DashboardRoute, Delivered, Ending
from surfaces.slack import SlackAdapter, SlackConfig
from surfaces.slack.adapter import SlackConfigError
from surfaces.slack.emulator import SlackEmulator


async def test_deliver_posts_the_card_and_returns_the_receipt(
    adapter: SlackAdapter, emu: SlackEmulator, make_card: Any, make_route: Any
) -> None:
    delivered = await adapter.deliver(make_card(), make_route(thread_ts="1700000000.000001"))
    assert delivered.surface == "slack" and delivered.conversation == "C1"
    assert delivered.app_id == "A1" and len(delivered.message_refs) == 1
    (posted,) = emu.messages
    assert posted.ts == delivered.message_refs[0]
    assert posted.thread_ts == "1700000000.000001"
    assert posted.text == "Approval needed: issue_refund (K7Q), expires 2026-11-29 12:05 UTC"
    assert any(b["type"] == "actions" for b in posted.blocks)
    sent = dict(emu.calls)["chat.postMessage"]
    assert sent["unfurl_links"] is False


async def test_deliver_to_a_user_opens_the_dm_and_records_its_d_id(
    adapter: SlackAdapter, emu: SlackEmulator, make_card: Any, make_route: Any
) -> None:
    delivered = await adapter.deliver(make_card(), make_route(channel_id="U0ADMIN"))
    assert delivered.conversation.startswith("D")
    assert [m for m, _ in emu.calls if m != "auth.test"] == [
        "conversations.open",
        "chat.postMessage",
    ]


async def test_show_outcome_updates_in_place_without_buttons(
    adapter: SlackAdapter, emu: SlackEmulator, make_card: Any, make_route: Any, t0: Any
) -> None:
    route = make_route()
    delivered = await adapter.deliver(make_card(), route)
    outcome = Ending(ApprovalStatus.APPROVED, t0 + timedelta(seconds=30), "person", "U1", "slack")
    await adapter.show_outcome(make_card(status=ApprovalStatus.APPROVED, outcome=outcome), route, delivered)
    latest = emu.latest(delivered.conversation, delivered.message_refs[0])
    assert latest is not None and latest.method == "chat.update"
    assert not [b for b in latest.blocks if b["type"] == "actions"]
    assert "*Approved* by <@U1>" in json.dumps(latest.blocks)
    assert latest.text is not None and latest.text.startswith("Approved: issue_refund")


async def test_show_outcome_of_a_deleted_card_is_surface_unavailable(
    adapter: SlackAdapter, make_card: Any, make_route: Any
) -> None:
    gone = Delivered(surface=SurfaceType.SLACK, conversation="C1", message_refs=("1.000001",), app_id="A1")
    with pytest.raises(SurfaceUnavailable, match="message_not_found"):
        await adapter.show_outcome(make_card(status=ApprovalStatus.EXPIRED), make_route(), gone)


async def test_deliver_failures_become_surface_unavailable(
    adapter: SlackAdapter, emu: SlackEmulator, make_card: Any, make_route: Any
) -> None:
    emu.fail_next("chat.postMessage", status=200, error="not_in_channel")
    with pytest.raises(SurfaceUnavailable) as caught:
        await adapter.deliver(make_card(), make_route())
    assert caught.value.details == {"method": "chat.postMessage", "slackError": "not_in_channel"}
    assert "/invite" in caught.value.message
    emu.fail_next("chat.postMessage", status=500, times=3)
    with pytest.raises(SurfaceUnavailable):
        await adapter.deliver(make_card(), make_route())
    assert emu.messages == []


async def test_deliver_survives_one_rate_limit(
    adapter: SlackAdapter, emu: SlackEmulator, make_card: Any, make_route: Any
) -> None:
    emu.fail_next("chat.postMessage", status=429, retry_after=1)
    delivered = await adapter.deliver(make_card(), make_route())
    assert emu.latest("C1", delivered.message_refs[0]) is not None


async def test_posts_are_paced_per_channel(
    adapter: SlackAdapter, emu: SlackEmulator, make_card: Any, make_route: Any
) -> None:
    started = time.monotonic()
    await asyncio.gather(*(adapter.deliver(make_card(), make_route()) for _ in range(4)))
    busy = time.monotonic() - started
    assert busy >= 0.9  # a burst of 3, then one second for the 4th
    started = time.monotonic()
    await adapter.deliver(make_card(), make_route(channel_id="C2"))
    assert time.monotonic() - started < 0.5


async def test_not_a_slack_route(adapter: SlackAdapter, make_card: Any) -> None:
    with pytest.raises(SurfaceUnavailable, match="dashboard"):
        await adapter.deliver(make_card(), DashboardRoute(surface=SurfaceType.DASHBOARD, approvers=("u_1",)))


async def test_deliver_before_start_is_surface_unavailable(
    desk: Any, make_card: Any, make_route: Any
) -> None:
    slack = SlackAdapter(SlackConfig(signing_secret="s", bot_token="xoxb-1"), desk)
    with pytest.raises(SurfaceUnavailable, match="not started"):
        await slack.deliver(make_card(), make_route())


def test_config_is_checked(desk: Any) -> None:
    with pytest.raises(SlackConfigError, match="SLACK_SIGNING_SECRET"):
        SlackAdapter(SlackConfig(signing_secret=" ", bot_token="xoxb-1"), desk)
    with pytest.raises(SlackConfigError, match="SLACK_BOT_TOKEN"):
        SlackAdapter(SlackConfig(signing_secret="s"), desk)
    with pytest.raises(SlackConfigError, match="installation store"):
        SlackAdapter(SlackConfig(signing_secret="s", client_id="cid", client_secret="csec"), desk)
    assert SlackAdapter(SlackConfig(signing_secret="s", bot_token="t"), desk).name == "slack"


def test_bolts_token_notice_is_filtered_and_nothing_else() -> None:
    import logging

    from surfaces.slack.adapter import _quiet_token_notice

    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord("cosigner.slack.bolt", logging.WARNING, __file__, 1, message, None, None)

    assert not _quiet_token_notice(record("As you gave `client` as well, `token` will be unused."))
    assert _quiet_token_notice(record("Failed to run a middleware"))

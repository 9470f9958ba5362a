"""Clicks through Bolt: answers reach the desk, refusals reach the clicker, deny asks for a comment."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import httpx

from contracts.enums import ApprovalMode, ToolKind, Verdict
from contracts.errors import AlreadyDecided, NotAnApprover
from surfaces.slack import SlackAdapter
from surfaces.slack.emulator import SlackEmulator
from tests.harness import until as wait_for

COMMENT = {"comment": {"comment": {"type": "plain_text_input", "value": "Over the limit"}}}


def until(check: Callable[[], Any]) -> Any:
    return wait_for(check, seconds=3.0, interval=0.01)


async def card(adapter: SlackAdapter, make_card: Any, make_route: Any, **changes: Any) -> tuple[str, str]:
    delivered = await adapter.deliver(make_card(**changes), make_route())
    return delivered.conversation, delivered.message_refs[0]


async def test_approve_reaches_the_desk_with_what_slack_said(
    adapter: SlackAdapter,
    emu: SlackEmulator,
    http: httpx.AsyncClient,
    desk: Any,
    secret: str,
    make_card: Any,
    make_route: Any,
) -> None:
    channel, ts = await card(adapter, make_card, make_route)
    response = await emu.click(
        http, channel=channel, ts=ts, action_id="cosigner.approve", secret=secret, user="U1"
    )
    assert response.status_code == 200 and response.text == ""
    (answer,) = desk.answers
    assert answer.verdict is Verdict.APPROVE and answer.approval_id == "apr_01"
    assert (answer.conversation, answer.message_ref, answer.app_id) == (channel, ts, "A1")
    assert (answer.actor, answer.org, answer.actor_org) == ("U1", "T1", "T1")
    await adapter.stop()
    assert emu.ephemerals == []


async def test_approve_for_this_run(
    adapter: SlackAdapter,
    emu: SlackEmulator,
    http: httpx.AsyncClient,
    desk: Any,
    secret: str,
    make_card: Any,
    make_route: Any,
) -> None:
    channel, ts = await card(adapter, make_card, make_route, kind=ToolKind.WRITE, mode=ApprovalMode.ASK)
    await emu.click(http, channel=channel, ts=ts, action_id="cosigner.approve_for_run", secret=secret)
    assert desk.answers[0].verdict is Verdict.APPROVE_FOR_RUN


async def test_a_refused_click_tells_the_clicker_why(
    adapter: SlackAdapter,
    emu: SlackEmulator,
    http: httpx.AsyncClient,
    desk: Any,
    secret: str,
    make_card: Any,
    make_route: Any,
) -> None:
    channel, ts = await card(adapter, make_card, make_route)
    desk.refuse = NotAnApprover("U9 is not an approver of approval apr_01")
    response = await emu.click(
        http,
        channel=channel,
        ts=ts,
        action_id="cosigner.approve",
        secret=secret,
        user="U9",
        user_team="T0OTHER",
    )
    assert response.status_code == 200
    (note,) = await until(lambda: emu.ephemerals)
    assert (note.channel, note.user) == (channel, "U9")
    assert note.text is not None and "NOT_AN_APPROVER" in note.text and "not recorded" in note.text


async def test_the_ack_does_not_wait_for_the_refusal_notice(
    adapter: SlackAdapter,
    emu: SlackEmulator,
    http: httpx.AsyncClient,
    desk: Any,
    secret: str,
    make_card: Any,
    make_route: Any,
) -> None:
    channel, ts = await card(adapter, make_card, make_route)
    desk.refuse = AlreadyDecided("approval apr_01 is already approved")
    emu.fail_next("chat.postEphemeral", status=200, delay=1.0)
    started = time.monotonic()
    response = await emu.click(http, channel=channel, ts=ts, action_id="cosigner.approve", secret=secret)
    assert response.status_code == 200
    assert time.monotonic() - started < 0.5
    (note,) = await until(lambda: emu.ephemerals)
    assert note.text is not None and "ALREADY_DECIDED" in note.text


async def test_a_crashing_desk_still_acks_and_says_so(
    adapter: SlackAdapter,
    emu: SlackEmulator,
    http: httpx.AsyncClient,
    desk: Any,
    secret: str,
    make_card: Any,
    make_route: Any,
) -> None:
    channel, ts = await card(adapter, make_card, make_route)

    async def boom(answer: Any) -> Any:
        raise RuntimeError("database is down")

    desk.answer = boom
    response = await emu.click(http, channel=channel, ts=ts, action_id="cosigner.approve", secret=secret)
    assert response.status_code == 200
    (note,) = await until(lambda: emu.ephemerals)
    assert note.text is not None and "could not record" in note.text and "database" not in note.text


async def test_deny_opens_a_modal_and_its_submission_denies_with_the_comment(
    adapter: SlackAdapter,
    emu: SlackEmulator,
    http: httpx.AsyncClient,
    desk: Any,
    secret: str,
    make_card: Any,
    make_route: Any,
) -> None:
    emu.strict_triggers = True
    channel, ts = await card(adapter, make_card, make_route)
    response = await emu.click(http, channel=channel, ts=ts, action_id="cosigner.deny", secret=secret)
    assert response.status_code == 200
    assert desk.answers == []  # nothing is decided until the modal is submitted
    (opened,) = await until(lambda: emu.views)
    assert opened.view["callback_id"] == "cosigner.deny_comment"
    submitted = await emu.submit_view(http, secret=secret, values=COMMENT, user="U1")
    assert submitted.status_code == 200 and submitted.text == ""
    (answer,) = desk.answers
    assert answer.verdict is Verdict.DENY and answer.comment == "Over the limit"
    assert (answer.conversation, answer.message_ref, answer.approval_id) == (channel, ts, "apr_01")
    assert (answer.actor, answer.org, answer.app_id) == ("U1", "T1", "A1")


async def test_a_refused_deny_shows_the_reason_in_the_modal(
    adapter: SlackAdapter,
    emu: SlackEmulator,
    http: httpx.AsyncClient,
    desk: Any,
    secret: str,
    make_card: Any,
    make_route: Any,
) -> None:
    channel, ts = await card(adapter, make_card, make_route)
    await emu.click(http, channel=channel, ts=ts, action_id="cosigner.deny", secret=secret)
    await until(lambda: emu.views)
    desk.refuse = NotAnApprover("U9 is not an approver of approval apr_01")
    response = await emu.submit_view(http, secret=secret, values=COMMENT, user="U9")
    assert response.status_code == 200
    body = response.json()
    assert body["response_action"] == "errors"
    assert "NOT_AN_APPROVER" in body["errors"]["comment"]


async def test_an_org_wide_click_has_the_enterprise_as_its_org(
    adapter: SlackAdapter,
    emu: SlackEmulator,
    http: httpx.AsyncClient,
    desk: Any,
    secret: str,
    make_card: Any,
    make_route: Any,
) -> None:
    channel, ts = await card(adapter, make_card, make_route)
    await emu.click(
        http,
        channel=channel,
        ts=ts,
        action_id="cosigner.approve",
        secret=secret,
        team=None,
        enterprise="E1",
        user_team="T1",
    )
    (answer,) = desk.answers
    assert (answer.org, answer.enterprise_id, answer.actor_org) == ("E1", "E1", "T1")


async def test_other_buttons_are_acknowledged_quietly(
    adapter: SlackAdapter, http: httpx.AsyncClient, desk: Any, secret: str
) -> None:
    from surfaces.slack.interactions import block_actions_payload, send_signed

    payload = block_actions_payload(
        action={"type": "button", "action_id": "someone.else", "value": "x", "block_id": "b"},
        blocks=[],
        channel="C1",
        ts="1700000000.000100",
        app_id="A1",
    )
    response = await send_signed(http, "/slack/events", payload, secret=secret)
    assert response.status_code == 200
    assert desk.answers == []


async def test_a_click_leaves_the_level_of_cosigners_own_logs_alone(
    adapter: SlackAdapter,
    emu: SlackEmulator,
    http: httpx.AsyncClient,
    desk: Any,
    secret: str,
    make_card: Any,
    make_route: Any,
) -> None:
    # Bolt configures a logger named after its app on every request: named "cosigner", it
    # reset Cosigner's own level, and `serve` fell silent after the first click.
    ours = logging.getLogger("cosigner")
    before = ours.level
    ours.setLevel(logging.INFO)
    try:
        channel, ts = await card(adapter, make_card, make_route)
        await emu.click(http, channel=channel, ts=ts, action_id="cosigner.approve", secret=secret, user="U1")
        assert desk.answers and ours.level == logging.INFO and ours.filters == []
    finally:
        ours.setLevel(before)
    await adapter.stop()

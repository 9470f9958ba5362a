"""The signed inbound webhook, called as Twilio (or a forger) would call it."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest
from twilio.request_validator import RequestValidator

from contracts.enums import ApprovalStatus, Verdict
from contracts.errors import AlreadyDecided, SurfaceUnavailable
from surfaces.sms import SmsAdapter
from surfaces.sms.caller import TwilioCaller

EMPTY = '<?xml version="1.0" encoding="UTF-8"?><Response />'
HELP = (
    "Reply YES or NO (plus the code when asked), or NEVER to deny and always deny this tool for you. "
    "MORE texts the whole call. "
    "Nothing was decided."
)


def said(response: httpx.Response) -> str | None:
    """The text of the TwiML reply, or None for an empty `<Response />`."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/xml")
    if response.text == EMPTY:
        return None
    prefix = '<?xml version="1.0" encoding="UTF-8"?><Response><Message>'
    assert response.text.startswith(prefix) and response.text.endswith("</Message></Response>")
    return response.text[len(prefix) : -len("</Message></Response>")]


# --- answers ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "verdict"),
    [("YES", Verdict.APPROVE), ("  no \n", Verdict.DENY), ("Yes 4821", Verdict.APPROVE)],
)
async def test_exact_answer_decides(
    phone: TwilioCaller, desk: Any, kit: Any, one_pending: str, body: str, verdict: Verdict
) -> None:
    response = await phone.text(kit.alice, kit.bot, body)
    assert said(response) is None  # the confirmation comes from show_outcome
    [answer] = desk.answers
    assert (answer.approval_id, answer.verdict, answer.surface) == (one_pending, verdict, "sms")
    assert (answer.actor, answer.org, answer.conversation) == (kit.alice, kit.bot, kit.bot)
    assert answer.actor_org is None and answer.message_ref is None


@pytest.mark.parametrize("body", ["yes please", "Y", "ok", "👍", "YES!", "", "approve"])
async def test_loose_words_get_help_and_decide_nothing(
    phone: TwilioCaller, desk: Any, kit: Any, one_pending: str, body: str
) -> None:
    assert said(await phone.text(kit.alice, kit.bot, body)) == HELP
    assert desk.answers == [] and desk.status(one_pending) is ApprovalStatus.PENDING


async def test_wrong_from_decides_nothing(phone: TwilioCaller, desk: Any, kit: Any, one_pending: str) -> None:
    assert said(await phone.text(kit.mallory, kit.bot, "YES")) == HELP
    assert desk.answers == []


async def test_right_from_wrong_to_decides_nothing(
    phone: TwilioCaller, desk: Any, kit: Any, one_pending: str
) -> None:
    assert said(await phone.text(kit.alice, "+15550009999", "YES")) == HELP
    assert desk.answers == []


async def test_number_inside_a_messaging_service_still_matches_its_requests(
    phone: TwilioCaller, desk: Any, kit: Any, one_pending: str
) -> None:
    response = await phone.text(kit.alice, kit.bot, "YES", messaging_service_sid="MG" + "c" * 32)
    assert said(response) is None
    assert desk.answers[0].conversation == kit.bot


async def test_two_pending_without_a_code_names_the_codes(
    phone: TwilioCaller, desk: Any, kit: Any, two_pending: None
) -> None:
    reply = said(await phone.text(kit.alice, kit.bot, "YES"))
    assert reply is not None and "4821, 1234" in reply and "Nothing was decided" in reply
    assert desk.answers == []


async def test_two_pending_with_a_code_decides_that_one(
    phone: TwilioCaller, desk: Any, kit: Any, two_pending: None
) -> None:
    assert said(await phone.text(kit.alice, kit.bot, "no 1234")) is None
    assert [(a.approval_id, a.verdict) for a in desk.answers] == [("apr_2", Verdict.DENY)]
    assert desk.status("apr_1") is ApprovalStatus.PENDING


async def test_a_request_not_yet_texted_does_not_count(
    phone: TwilioCaller, desk: Any, kit: Any, one_pending: str
) -> None:
    desk.add(kit.card("apr_9", "9999"), kit.route(kit.alice), conversation=None)
    assert said(await phone.text(kit.alice, kit.bot, "YES")) is None
    assert [a.approval_id for a in desk.answers] == [one_pending]
    assert said(await phone.text(kit.alice, kit.bot, "YES 9999")) is not None
    assert desk.status("apr_9") is ApprovalStatus.PENDING


async def test_wrong_code_decides_nothing(
    phone: TwilioCaller, desk: Any, kit: Any, two_pending: None
) -> None:
    reply = said(await phone.text(kit.alice, kit.bot, "YES 9999"))
    assert reply == "No pending request has code 9999 (pending: 4821, 1234). Nothing was decided."
    assert desk.answers == []


async def test_wrong_code_with_one_pending_decides_nothing(
    phone: TwilioCaller, desk: Any, kit: Any, one_pending: str
) -> None:
    assert "has code 1111" in (said(await phone.text(kit.alice, kit.bot, "YES 1111")) or "")
    assert desk.answers == []


async def test_replayed_message_sid_decides_nothing(
    phone: TwilioCaller, desk: Any, kit: Any, two_pending: None
) -> None:
    first = await phone.text(kit.alice, kit.bot, "YES 4821", message_sid="SM" + "1" * 32)
    assert said(first) is None
    replay = await phone.text(kit.alice, kit.bot, "YES 1234", message_sid="SM" + "1" * 32)
    assert said(replay) is None
    assert [a.approval_id for a in desk.answers] == ["apr_1"]
    assert desk.status("apr_2") is ApprovalStatus.PENDING


async def test_reply_after_expiry_says_nothing_was_done(phone: TwilioCaller, desk: Any, kit: Any) -> None:
    desk.add(kit.card(status=ApprovalStatus.EXPIRED), kit.route(kit.alice))
    assert said(await phone.text(kit.alice, kit.bot, "YES")) == ("Request 4821 expired, nothing was done.")
    assert desk.answers == []


async def test_refusal_by_the_desk_is_explained(
    phone: TwilioCaller, desk: Any, kit: Any, one_pending: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def lost_race(answer: Any) -> Any:
        raise AlreadyDecided("the request is already denied.")

    monkeypatch.setattr(desk, "answer", lost_race)
    reply = said(await phone.text(kit.alice, kit.bot, "YES"))
    assert reply == "Not accepted: the request is already denied. Nothing was decided."


# --- signatures ------------------------------------------------------------


async def test_forged_signature_is_refused(
    phone: TwilioCaller, desk: Any, kit: Any, one_pending: str
) -> None:
    response = await phone.text(kit.alice, kit.bot, "YES", token="not-the-token")
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "INVALID_SIGNATURE"
    assert desk.answers == [] and desk.store.marks == set()


async def test_missing_signature_is_refused(
    phone: TwilioCaller, desk: Any, kit: Any, one_pending: str
) -> None:
    response = await phone.text(kit.alice, kit.bot, "YES", signature=None)
    assert response.status_code == 403
    assert desk.answers == [] and desk.store.marks == set()


async def test_signature_over_the_internal_url_is_refused(
    phone: TwilioCaller, desk: Any, kit: Any, one_pending: str
) -> None:
    # Behind the proxy the bot sees http://internal:8000; Twilio signs the public URL.
    internal = "http://internal:8000/sms/inbound"
    response = await phone.text(kit.alice, kit.bot, "YES", signed_url=internal)
    assert response.status_code == 403
    assert desk.answers == []


async def test_a_parameter_changed_after_signing_is_refused(
    phone: TwilioCaller, desk: Any, kit: Any, one_pending: str
) -> None:
    params = [("MessageSid", "SM" + "2" * 32), ("From", kit.alice), ("To", kit.bot)]
    signature = RequestValidator(kit.token).compute_signature(
        kit.public + "/sms/inbound", dict([*params, ("Body", "NO")])
    )
    response = await phone.post("/sms/inbound", [*params, ("Body", "YES")], signature=signature)
    assert response.status_code == 403
    assert desk.answers == []


async def test_unknown_parameters_are_signed_too(
    phone: TwilioCaller, desk: Any, kit: Any, one_pending: str
) -> None:
    response = await phone.text(kit.alice, kit.bot, "YES", override={"AddOns": '{"status":"ok"}'})
    assert said(response) is None
    assert len(desk.answers) == 1


async def test_query_string_is_part_of_the_signed_url(
    phone: TwilioCaller, desk: Any, kit: Any, one_pending: str
) -> None:
    params = [
        ("MessageSid", "SM" + "3" * 32),
        ("From", kit.alice),
        ("To", kit.bot),
        ("Body", "YES"),
    ]
    ok = await phone.post("/sms/inbound?tenant=acme", params)
    assert said(ok) is None
    assert len(desk.answers) == 1


async def test_missing_fields_are_a_bad_request(phone: TwilioCaller, kit: Any) -> None:
    response = await phone.post("/sms/inbound", [("Body", "YES"), ("From", kit.alice)])
    assert response.status_code == 400


async def test_oversized_body_is_refused(phone: TwilioCaller, kit: Any) -> None:
    response = await phone.text(kit.alice, kit.bot, "YES", override={"Pad": "x" * 70_000})
    assert response.status_code == 413


# --- opt-out ---------------------------------------------------------------


async def test_stop_mid_approval_fails_it_closed(
    phone: TwilioCaller, adapter: SmsAdapter, desk: Any, kit: Any, two_pending: None
) -> None:
    assert said(await phone.text(kit.alice, kit.bot, "stop")) is None  # Twilio answers STOP
    assert await desk.store.opted_out(kit.alice)
    assert desk.failures == [
        ("apr_1", "SURFACE_UNAVAILABLE", "approver opted out by STOP"),
        ("apr_2", "SURFACE_UNAVAILABLE", "approver opted out by STOP"),
    ]
    with pytest.raises(SurfaceUnavailable, match="opted out"):
        await adapter.deliver(kit.card("apr_3", "5555"), kit.route(kit.alice))
    assert said(await phone.text(kit.alice, kit.bot, "START")) is None
    assert not await desk.store.opted_out(kit.alice)


async def test_advanced_opt_out_type_counts_as_stop(
    phone: TwilioCaller, desk: Any, kit: Any, one_pending: str
) -> None:
    response = await phone.text(kit.alice, kit.bot, "ARRET", override={"OptOutType": "STOP"})
    assert said(response) is None
    assert desk.status(one_pending) is ApprovalStatus.DENIED


async def test_help_is_left_to_twilio(phone: TwilioCaller, desk: Any, kit: Any, one_pending: str) -> None:
    assert said(await phone.text(kit.alice, kit.bot, "HELP")) is None
    assert said(await phone.text(kit.alice, kit.bot, "info")) is None
    assert desk.answers == []


async def test_bare_yes_re_subscribes_and_still_answers(
    phone: TwilioCaller, desk: Any, kit: Any, one_pending: str
) -> None:
    await desk.store.set_opted_out(kit.alice, True)
    assert said(await phone.text(kit.alice, kit.bot, "YES")) is None
    assert not await desk.store.opted_out(kit.alice)
    assert desk.answers[0].verdict is Verdict.APPROVE


async def test_logs_carry_no_bodies_or_parameters(
    phone: TwilioCaller,
    adapter: SmsAdapter,
    desk: Any,
    kit: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    card = kit.card("apr_5", "5555", reason="secret-reason-text")
    await adapter.deliver(card, kit.route(kit.bob))
    desk.add(card, kit.route(kit.bob))
    await phone.text(kit.bob, kit.bot, "maybe-later-text")
    await phone.text(kit.bob, kit.bot, "YES", token="forged")
    await phone.text(kit.bob, kit.bot, "YES")
    assert caplog.records, "expected some log lines"
    for words in ("secret-reason-text", "ord_4421", "maybe-later-text", kit.bob):
        assert words not in caplog.text


async def test_a_yes_to_a_call_too_long_to_text_whole_carries_why_even_if_its_text_did_not_record_it(
    phone: TwilioCaller, desk: Any, kit: Any
) -> None:
    # A text sent before texts recorded whether they showed the call whole: the call as it
    # stands says, so the desk still refuses the YES (the in-memory desk here records it).
    long = {f"p{i:03d}": f"{i:020d}" for i in range(300)} | {"to": "payouts@attacker.example"}
    desk.add(kit.card("apr_1", "4821", parameters=long), kit.route(kit.alice))
    assert said(await phone.text(kit.alice, kit.bot, "YES")) == (
        "Not accepted: request 4821 is too long to show whole by text, so YES cannot approve it. "
        "Reply NO 4821 to deny it. Nothing was decided."
    )
    [answer] = desk.answers
    assert answer.unshown is not None and answer.unshown.startswith("request 4821 is too long to text whole")
    assert desk.status("apr_1") is ApprovalStatus.PENDING
    assert said(await phone.text(kit.alice, kit.bot, "NO")) is None
    assert desk.status("apr_1") is ApprovalStatus.DENIED

"""The texts: what they say, and that they stay within two GSM-7 segments."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts.enums import ApprovalStatus
from contracts.ports import Ending
from surfaces.sms.fit import BUDGET, compact_parameters, cut, segments, sms_length
from surfaces.sms.follow_up_text import reminder_text
from surfaces.sms.more import MORE_PARTS, more_parts, not_texted_whole, unshown
from surfaces.sms.replies_text import closed_text, help_text, to_outcome_text
from surfaces.sms.text import to_sms_text


def test_request_text_shows_the_call_the_claim_the_expiry_and_the_answer(kit: Any) -> None:
    text = to_sms_text(kit.card(), code_required=False)
    assert text.splitlines() == [
        "Cosigner request 4821: approve issue_refund?",
        "Params: amountCents=12900, cardToken=[REDACTED], orderId=ord_4421",
        'Agent says (unverified): "Customer says the discount was not applied"',
        "Expires 16:00 UTC.",
        "Reply YES or NO.",
    ]
    assert segments(text) <= 2


def test_code_is_asked_for_when_several_requests_are_pending(kit: Any) -> None:
    text = to_sms_text(kit.card(), code_required=True)
    assert "Reply YES 4821 or NO 4821" in text
    assert "several requests are pending" in text


def test_no_reason_no_claim_line(kit: Any) -> None:
    text = to_sms_text(kit.card(reason="  "), code_required=False)
    assert "Agent says" not in text


def test_expiry_on_another_day_names_the_date(kit: Any) -> None:
    card = kit.card()
    late = card.__class__(**{**card.__dict__, "expires_at": kit.start + timedelta(days=1)})
    assert "Expires Jan 03 15:00 UTC." in to_sms_text(late, code_required=False)


def test_long_parameters_are_cut_with_a_note(kit: Any) -> None:
    card = kit.card(parameters={"note": "x" * 600, "orderId": "ord_1"})
    text = to_sms_text(card, code_required=True)
    assert sms_length(text) <= BUDGET
    assert "...(+" in text and "orderId=ord_1" in text, "every field keeps a place"
    assert "1 value cut: reply MORE 4821 for the whole call." in text
    assert text.endswith("(code needed: several requests are pending).")
    assert "issue_refund" in text and "Expires" in text


def test_long_reason_is_cut_before_the_parameters(kit: Any) -> None:
    card = kit.card(reason="Please " * 100)
    text = to_sms_text(card, code_required=False)
    assert "amountCents=12900, cardToken=[REDACTED], orderId=ord_4421" in text
    assert sms_length(text) <= BUDGET


def test_reason_cannot_fake_lines(kit: Any) -> None:
    card = kit.card(reason="ok\nReply YES or NO.\nParams: amountCents=1")
    lines = to_sms_text(card, code_required=False).splitlines()
    assert len(lines) == 5
    assert lines[2].startswith('Agent says (unverified): "ok Reply YES')


def test_typographic_quotes_in_the_reason_keep_the_text_gsm7(kit: Any) -> None:
    text = to_sms_text(kit.card(reason="Customer’s “discount” — missing…"), code_required=False)
    assert 'Customer\'s "discount" - missing...' in text
    assert sms_length(text) == len(text) + text.count("[") + text.count("]")


def test_values_that_look_like_other_parameters_are_quoted() -> None:
    line = compact_parameters({"note": "1, amountCents=1", "n": 2, "ok": True, "x": None})
    assert line == 'n=2, note="1, amountCents=1", ok=true, x=null'
    assert compact_parameters({"a": {"b": [1, 2]}}) == 'a={"b":[1,2]}'
    assert compact_parameters({}) == "(none)"


def test_gsm7_extension_characters_count_twice() -> None:
    assert sms_length("abc") == 3
    assert sms_length("{}") == 4
    assert sms_length("é") == 1
    assert sms_length("😀") == 2  # UCS-2: one surrogate pair
    assert segments("a" * 160) == 1 and segments("a" * 161) == 2 and segments("a" * 306) == 2
    assert segments("ж" * 70) == 1 and segments("ж" * 71) == 2


def test_cut_says_how_much_was_cut() -> None:
    assert cut("short", 10) == "short"
    out = cut("x" * 300, 40)
    assert sms_length(out) <= 40
    kept = out.split("...")[0]
    assert out.endswith(f"(+{300 - len(kept)} chars cut)")


GSM_TEXT = st.text(alphabet=st.sampled_from("abcXYZ019 _-.,:;!?'\"{}[]~|€@£éÄ\n"), max_size=300)
ANY_TEXT = st.text(max_size=300)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.data(),
    code_required=st.booleans(),
    tool=st.from_regex(r"[A-Za-z0-9_.\-]{1,40}", fullmatch=True),
)
def test_any_request_fits_two_segments_worth(
    kit: Any, data: st.DataObject, code_required: bool, tool: str
) -> None:
    text_kind = data.draw(st.sampled_from([GSM_TEXT, ANY_TEXT]))
    params = data.draw(
        st.dictionaries(
            text_kind.filter(bool).map(lambda key: key[:20]),
            st.one_of(text_kind, st.integers(), st.booleans(), st.none()),
            max_size=8,
        )
    )
    reason = data.draw(st.one_of(st.none(), text_kind))
    card = kit.card(tool_name=tool, parameters=params, reason=reason)
    text = to_sms_text(card, code_required=code_required)
    # 306 GSM-7 septets (two segments), or 306 UTF-16 units when the text needs UCS-2.
    assert sms_length(text) <= BUDGET
    assert text.startswith(f"Cosigner request 4821: approve {tool}?")
    if unshown(card):  # too long even for MORE (emoji count twice): NO only
        assert text.endswith("pending)." if code_required else "Reply NO to deny.")
    else:
        assert text.endswith("pending)." if code_required else "Reply YES or NO.")
    if text_kind is GSM_TEXT:
        assert segments(text) <= 2


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (ApprovalStatus.APPROVED, "Approved issue_refund (4821)."),
        (ApprovalStatus.DENIED, "Denied issue_refund (4821). Nothing was done."),
        (
            ApprovalStatus.EXPIRED,
            "Expired issue_refund (4821): nobody answered in time, nothing was done.",
        ),
        (ApprovalStatus.CANCELLED, "Cancelled issue_refund (4821) by the agent, nothing was done."),
    ],
)
def test_outcome_texts(kit: Any, status: ApprovalStatus, expected: str) -> None:
    assert to_outcome_text(kit.card(status=status)) == expected


def test_outcome_of_a_fail_closed_request_names_the_code(kit: Any) -> None:
    outcome = Ending(ApprovalStatus.DENIED, kit.start, "system", "SURFACE_UNAVAILABLE")
    card = kit.card(status=ApprovalStatus.DENIED, outcome=outcome)
    assert to_outcome_text(card) == (
        "Denied issue_refund (4821) by Cosigner (SURFACE_UNAVAILABLE). Nothing was done."
    )


def test_help_and_closed_texts(kit: Any) -> None:
    assert help_text() == (
        "Reply YES or NO (plus the code when asked), or NEVER to deny and always deny this tool for you. "
        "MORE texts the whole call. "
        "Nothing was decided."
    )
    assert "4821, 1234" in help_text(["4821", "1234"])
    assert help_text(["4821"], handoffs=["4821"]) == (
        "Reply DONE once you have done the step, or NO to cancel. Nothing was decided."
    )
    both = help_text(["4821", "1234"], handoffs=["1234"])
    assert "YES, NO or NEVER (always deny), DONE or NO for a handed-off step (1234)" in both
    assert "CANCEL" not in both and "STOP" not in both
    assert closed_text(kit.card(status=ApprovalStatus.EXPIRED)) == ("Request 4821 expired, nothing was done.")
    assert "already approved" in closed_text(kit.card(status=ApprovalStatus.APPROVED))


def test_an_edited_call_is_marked_and_says_what_changed(kit: Any) -> None:
    card = dataclasses.replace(
        kit.card(),
        edited={"orderId": "ord_4421", "amountCents": 4000, "cardToken": "[REDACTED]"},
        quorum=2,
    )
    text = to_sms_text(card, code_required=False)
    assert text.splitlines() == [
        # The long mark would cut the call: the shorter one, and what changed, fit.
        "Cosigner request 4821: approve issue_refund? (edited by an approver)",
        "Params: amountCents=4000, cardToken=[REDACTED], orderId=ord_4421",
        "Changed: amountCents 12900->4000.",
        'Agent says (unverified): "Customer says ... (+29 chars cut)',
        "Expires 16:00 UTC.",
        "Reply YES or NO. 2 approvers must say YES; one NO denies.",
    ]
    assert segments(text) <= 2


def test_an_edit_of_long_values_names_the_fields_only_and_a_full_text_says_nothing(kit: Any) -> None:
    long = {"note": "a" * 40, "orderId": "ord_1"}
    card = dataclasses.replace(kit.card(parameters=long), edited={**long, "note": "b" * 40}, quorum=2)
    assert "Changed: note.\n" in to_sms_text(card, code_required=False)
    full = {"note": "x" * 600, "orderId": "ord_1"}
    card = dataclasses.replace(kit.card(parameters=full), edited={**full, "note": "y" * 600}, quorum=2)
    text = to_sms_text(card, code_required=True)
    assert sms_length(text) <= BUDGET and "Params: note=yyyyyyyyyyyy...(+588), orderId=ord_1\n" in text
    assert "Changed: note.\n" in text and "(edited)" in text


def test_a_quorum_text_needing_a_code_still_shows_the_call(kit: Any) -> None:
    # Before, the quorum's longer answer line left no room: "Param... (+44 chars cut)", and
    # 312 septets (three segments). The claim now gives up its line; MORE texts it.
    card = dataclasses.replace(kit.card(parameters={"note": "x" * 600, "orderId": "ord_1"}), quorum=2)
    text = to_sms_text(card, code_required=True)
    assert sms_length(text) <= BUDGET
    assert text.splitlines()[1].startswith("Params: note=xxxx") and "orderId=ord_1" in text


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.data(),
    code_required=st.booleans(),
    quorum=st.integers(1, 5),
    tool=st.from_regex(r"[A-Za-z0-9_.\-]{1,40}", fullmatch=True),
)
def test_any_quorum_or_edited_request_fits_two_segments_worth(
    kit: Any, data: st.DataObject, code_required: bool, quorum: int, tool: str
) -> None:
    text_kind = data.draw(st.sampled_from([GSM_TEXT, ANY_TEXT]))
    values = st.one_of(text_kind, st.integers(), st.booleans(), st.none())
    params = data.draw(
        st.dictionaries(text_kind.filter(bool).map(lambda key: key[:20]), values, min_size=1, max_size=8)
    )
    edited = {**params, **data.draw(st.dictionaries(st.sampled_from(sorted(params)), values, min_size=1))}
    reason = data.draw(st.one_of(st.none(), text_kind))
    card = kit.card(tool_name=tool, parameters=params, reason=reason)
    if data.draw(st.booleans()):
        card = dataclasses.replace(card, edited=edited, quorum=max(quorum, 2))
    else:
        card = dataclasses.replace(card, quorum=quorum)
    text = to_sms_text(card, code_required=code_required)
    assert sms_length(text) <= BUDGET
    assert text.startswith(f"Cosigner request 4821: approve {tool}?")
    assert ("(edited" in text.splitlines()[0]) == (card.edited is not None)
    if text_kind is GSM_TEXT:
        assert segments(text) <= 2


# 300 parameters of 20 characters and where the money goes: about 9,000 characters of call.
LONG = {f"p{i:03d}": f"{i:020d}" for i in range(300)} | {"to": "payouts@attacker.example"}
INBOX = "https://approvals.cosigner.example.com/inbox/"


def test_more_parts_count_exactly_what_of_the_call_no_text_carries(kit: Any) -> None:
    card = kit.card(parameters=LONG, reason="Pay the supplier " * 40)
    parts = more_parts(card)
    assert len(parts.texts) == MORE_PARTS and all(sms_length(t) <= BUDGET for t in parts.texts)
    call = f"Params: {compact_parameters(LONG)}"
    texted = "".join(t.split("): ", 1)[1] for t in parts.texts).split("... (+")[0]
    assert call.startswith(texted) and parts.unshown == len(call) - len(texted)
    claim = f' Agent says (unverified): "{" ".join(card.reason.split())}"'  # texted after the call
    assert parts.texts[-1].endswith(
        f"... (+{parts.unshown + len(claim):,} chars not texted: too long for SMS)"
    )
    assert not_texted_whole(card) == (
        f"request 4821 is too long to text whole ({parts.unshown:,} characters of the call "
        "do not fit in 15 texts)"
    )
    # A reason too long to text leaves a call that fits whole: only the call counts.
    fits = kit.card(parameters={"note": "n" * 3000}, reason="x" * 2000)
    assert more_parts(fits).texts[-1].endswith("chars not texted: too long for SMS)")
    assert unshown(fits) == 0 and not_texted_whole(fits) is None


@pytest.mark.parametrize("code_required", [False, True])
@pytest.mark.parametrize("inbox", [None, INBOX])
def test_a_call_too_long_to_text_whole_is_offered_no_only_and_names_the_inbox(
    kit: Any, code_required: bool, inbox: str | None
) -> None:
    card = dataclasses.replace(kit.card(parameters=LONG), quorum=2)
    text = to_sms_text(card, code_required=code_required, inbox=inbox)
    assert sms_length(text) <= BUDGET and segments(text) <= 2
    lines = text.splitlines()
    assert lines[1].startswith("Params: p000=") and "YES or" not in text and "approvers must" not in text
    where = f" Read it whole at {inbox}" if inbox else ""
    assert f"Too long to text whole, so YES cannot approve it.{where}" in lines
    assert lines[-1] == (
        "Reply NO 4821 to deny (code needed: several requests are pending)."
        if code_required
        else "Reply NO to deny."
    )
    assert "too long to approve by text: reply NO 4821 to deny" in reminder_text(card)
    assert "Reply YES 4821 or NO 4821" in reminder_text(kit.card())


def test_an_operation_is_shown_whole_by_its_preview(kit: Any) -> None:
    from contracts.operations import Preview, PreviewField

    # What is approved is the preview: MORE texts it (the agent's request follows as its claim).
    fields = [PreviewField(label="To", value="x" * 1500), PreviewField(label="Memo", value="y" * 1500)]
    card = dataclasses.replace(
        kit.card(parameters={"orderId": "ord_1"}), preview=Preview(title="Refund", fields=fields)
    )
    parts = more_parts(card)
    assert parts.texts[0].startswith("4821 Refund (1/") and "Preview: To: xxx" in parts.texts[0]
    assert parts.unshown == 0 and "orderId=ord_1" in "".join(parts.texts)
    big = dataclasses.replace(card, preview=Preview(title="Refund", fields=[*fields, *fields]))
    assert unshown(big) > 0 and "Too long to text whole" in to_sms_text(big, code_required=False)


@pytest.mark.parametrize("char", ["n", "€", "ж"])  # one septet, two septets (GSM-7 extension), UCS-2
@pytest.mark.parametrize("reason", [None, "r" * 2000])
def test_the_shortcut_for_a_call_that_fits_agrees_with_the_parts(
    kit: Any, char: str, reason: str | None
) -> None:
    for size in range(1000, 4400, 13):
        card = kit.card(parameters={"note": char * size}, reason=reason)
        assert unshown(card) == more_parts(card).unshown, size

"""to_blocks / to_closed_blocks / deny_modal: layout, buttons, and escaping of everything untrusted."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contracts.enums import ApprovalMode, ApprovalStatus, ToolKind
from contracts.ports import Ending
from surfaces.slack import mrkdwn
from surfaces.slack.blocks import as_dicts, to_blocks
from surfaces.slack.closed_blocks import to_closed_blocks
from surfaces.slack.deny_modal import deny_modal

OUR_TOKENS = re.compile(r"<@[UW][A-Z0-9]+>|<!date\^\d+\^\{date_short_pretty\} \{time\}\|[^<>|]+>")
BAD_AMP = re.compile(r"&(?!amp;|lt;|gt;)")
NASTY = [
    "<!channel>",
    "<!here>",
    "<@U1>",
    "<!subteam^S1>",
    "<http://x|y>",
    "```",
    "&amp;",
    "&",
    "<",
    ">",
]


def texts(blocks: list[dict[str, Any]]) -> list[str]:
    """Every mrkdwn string in a Block Kit tree."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "mrkdwn":
                found.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(blocks)
    return found


def assert_inert(text: str) -> None:
    stripped = OUR_TOKENS.sub("", text)
    assert "<" not in stripped and ">" not in stripped, text
    assert not BAD_AMP.search(text), text


def test_card_layout(make_card: Any, make_route: Any, t0: datetime) -> None:
    blocks, fallback = to_blocks(make_card(), make_route())
    data = as_dicts(blocks)
    assert data[0] == {
        "type": "header",
        "text": {"type": "plain_text", "text": "issue_refund", "emoji": False},
    }
    params = data[1]["text"]["text"]
    assert '"orderId": "ord_4421"' in params and params.count("```") == 2
    flat = json.dumps(data, ensure_ascii=False)
    assert "<@U1>" in flat
    assert "Agent's stated reason (unverified claim)" in flat
    assert "tools.issue_refund: danger → ask_always" in flat
    assert f"<!date^{int((t0 + timedelta(minutes=5)).timestamp())}^" in flat
    assert all(t.get("verbatim") for b in data for t in _text_objects(b))
    assert fallback == "Approval needed: issue_refund (K7Q), expires 2026-11-29 12:05 UTC"


def _text_objects(node: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if node.get("type") == "mrkdwn":
            out.append(node)
        for value in node.values():
            out.extend(_text_objects(value))
    elif isinstance(node, list):
        for value in node:
            out.extend(_text_objects(value))
    return out


def _buttons(card: Any, route: Any) -> list[dict[str, Any]]:
    data = as_dicts(to_blocks(card, route)[0])
    actions = [b for b in data if b["type"] == "actions"]
    assert len(actions) == 1
    elements: list[dict[str, Any]] = actions[0]["elements"]
    return elements


def test_danger_card_confirms_approve_and_offers_no_run_wide_approval(
    make_card: Any, make_route: Any
) -> None:
    buttons = _buttons(make_card(), make_route())
    assert [b["action_id"] for b in buttons] == ["cosigner.approve", "cosigner.deny", "cosigner.full_call"]
    assert buttons[0]["style"] == "primary" and "confirm" in buttons[0]
    assert buttons[1]["style"] == "danger" and "confirm" not in buttons[1]


def test_ask_mode_offers_approve_for_this_run(make_card: Any, make_route: Any) -> None:
    buttons = _buttons(make_card(kind=ToolKind.WRITE, mode=ApprovalMode.ASK), make_route())
    assert [b["action_id"] for b in buttons] == [
        "cosigner.approve",
        "cosigner.approve_for_run",
        "cosigner.deny",
        "cosigner.full_call",
    ]
    assert buttons[1]["text"]["text"] == "Approve for this run"
    # Only the run grant asks first, naming whom it covers; a write tool's Approve does not.
    assert [b["action_id"] for b in buttons if "confirm" in b] == ["cosigner.approve_for_run"]
    assert "in this conversation" in buttons[1]["confirm"]["text"]["text"]
    assert sum(1 for b in buttons if b.get("style") == "primary") == 1


def test_buttons_carry_only_the_approval_id(make_card: Any, make_route: Any) -> None:
    card = make_card(parameters={"secret": "tok_live_123"})
    data = as_dicts(to_blocks(card, make_route())[0])
    actions = next(b for b in data if b["type"] == "actions")
    assert actions["block_id"] == "cosigner:apr_01"
    assert {b["value"] for b in actions["elements"]} == {"apr_01"}
    assert "tok_live_123" not in json.dumps(actions)


def test_trigger_is_never_a_mention_built_from_text(make_card: Any, make_route: Any) -> None:
    card = make_card(triggered_by="<@U0BOSS> via <!channel>")
    data = as_dicts(to_blocks(card, make_route(requester=None))[0])
    flat = json.dumps(data, ensure_ascii=False)
    assert "&lt;@U0BOSS&gt; via &lt;!channel&gt;" in flat
    for text in texts(data):
        assert_inert(text)


def test_nasty_text_everywhere_is_inert(make_card: Any, make_route: Any) -> None:
    card = make_card(
        tool_name="issue_refund",
        parameters={n: n for n in NASTY},
        reason=" ".join(NASTY),
        policy_rule="<!here> rule & more",
        execution_id="<!channel>",
    )
    blocks, fallback = to_blocks(card, make_route())
    data = as_dicts(blocks)
    for text in texts(data):
        assert_inert(text)
    assert_inert(fallback)
    params = data[1]["text"]["text"]
    assert params.count("```") == 2
    assert "&amp;amp;" in params  # an entity in the data shows as itself


def test_closed_card_has_no_buttons_and_shows_the_outcome(
    make_card: Any, make_route: Any, t0: datetime
) -> None:
    outcome = Ending(
        status=ApprovalStatus.DENIED,
        decided_at=t0 + timedelta(minutes=1),
        decider_kind="person",
        decider="U2",
        surface="slack",
        comment="Over the limit <!channel> & then some",
    )
    card = make_card(status=ApprovalStatus.DENIED, outcome=outcome)
    blocks, fallback = to_closed_blocks(card, make_route())
    data = as_dicts(blocks)
    assert not [b for b in data if b["type"] == "actions"]
    flat = json.dumps(data, ensure_ascii=False)
    assert "*Denied* by <@U2>" in flat
    assert f"<!date^{int((t0 + timedelta(minutes=1)).timestamp())}^" in flat
    assert "Over the limit &lt;!channel&gt; &amp; then some" in flat
    assert fallback.startswith("Denied: issue_refund")
    for text in texts(data):
        assert_inert(text)


def test_closed_card_by_timeout_and_by_policy(make_card: Any, make_route: Any, t0: datetime) -> None:
    expired = make_card(
        status=ApprovalStatus.EXPIRED,
        outcome=Ending(ApprovalStatus.EXPIRED, t0, "timeout"),
    )
    assert "*Expired* by timeout" in json.dumps(as_dicts(to_closed_blocks(expired, make_route())[0]))
    by_rule = make_card(
        status=ApprovalStatus.APPROVED,
        outcome=Ending(ApprovalStatus.APPROVED, t0, "policy", decider="allow_below<5000>"),
    )
    flat = json.dumps(as_dicts(to_closed_blocks(by_rule, make_route())[0]))
    assert "policy rule allow_below&lt;5000&gt;" in flat
    sms = make_card(
        status=ApprovalStatus.APPROVED,
        outcome=Ending(ApprovalStatus.APPROVED, t0, "person", decider="+15550001", surface="sms"),
    )
    assert "+15550001 (sms)" in json.dumps(as_dicts(to_closed_blocks(sms, make_route())[0]))


def test_deny_modal_metadata_holds_only_ids() -> None:
    view = deny_modal("apr_01", "issue_refund", "C1", "1700000000.000100").to_dict()
    assert json.loads(view["private_metadata"]) == {
        "a": "apr_01",
        "c": "C1",
        "t": "1700000000.000100",
    }
    assert view["callback_id"] == "cosigner.deny_comment"
    assert view["blocks"][1]["block_id"] == "comment" and view["blocks"][1]["optional"] is True


# --- properties -------------------------------------------------------------------------

pieces = st.sampled_from(NASTY) | st.text(max_size=40)
nasty_text = st.lists(pieces, max_size=300).map("".join)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | nasty_text,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(nasty_text, inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(params=st.dictionaries(nasty_text, json_values, max_size=8), reason=nasty_text)
def test_any_card_is_valid_block_kit_and_inert(
    params: dict[str, Any], reason: str, make_card: Any, make_route: Any
) -> None:
    card = make_card(parameters=params, reason=reason or None)
    blocks, fallback = to_blocks(card, make_route())
    data = as_dicts(blocks)  # slack_sdk validates Block Kit limits here
    assert len(data) <= 50
    section = data[1]["text"]["text"]
    assert len(section) <= 3000
    assert section.count("```") == 2
    for text in texts(data):
        assert len(text) <= 3000
        assert_inert(text)
    assert_inert(fallback)


@settings(max_examples=300, deadline=None)
@given(text=nasty_text, limit=st.integers(min_value=0, max_value=400))
def test_truncation_never_cuts_an_entity_and_counts_what_it_cut(text: str, limit: int) -> None:
    escaped = mrkdwn.escape(text)
    kept, dropped = mrkdwn.truncate(escaped, limit)
    assert len(kept) <= limit
    assert not re.search(r"&[a-z]{0,3}$", kept)
    assert not BAD_AMP.search(kept)
    original_kept = mrkdwn.unescape(kept)
    assert text.startswith(original_kept)
    assert len(original_kept) + dropped == len(text)


@settings(max_examples=200, deadline=None)
@given(text=nasty_text, limit=st.integers(min_value=80, max_value=3000))
def test_fit_and_fenced_stay_within_the_limit(text: str, limit: int) -> None:
    fitted = mrkdwn.fit(text, limit)
    assert len(fitted) <= limit
    assert_inert(fitted)
    fenced = mrkdwn.fenced(text, limit)
    assert len(fenced) <= limit
    assert fenced.count("```") == 2
    if len(mrkdwn.escape(text)) > limit - 8:
        assert "not shown" in fenced


def test_fence_breakout_stays_inside_the_code_block() -> None:
    fenced = mrkdwn.fenced("a```<!channel>```b````", 3000)
    assert fenced.count("```") == 2
    assert fenced.startswith("```\n") and fenced.endswith("\n```")
    assert "&lt;!channel&gt;" in fenced


def test_cut_note_names_the_number_of_characters() -> None:
    fitted = mrkdwn.fit("&" * 1000, 200)
    kept = fitted.split("\n")[0]
    assert kept.count("&amp;") * 5 == len(kept)
    assert f"{1000 - kept.count('&amp;'):,} more characters not shown" in fitted


# --- every field on the card, and what it leaves out ---------------------------------

ISSUE_JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiJwYXlvdXRzIiwiYW1vdW50Ijo1MDAwMCwiaWF0IjoxNzAwMDAwMDAwfQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)


def _notice_and_confirm(data: list[dict[str, Any]]) -> tuple[str, str]:
    notice = next(b for b in data if b.get("block_id") == "cosigner:hidden")["text"]["text"]
    actions = next(b for b in data if b["type"] == "actions")
    assert (
        data.index(actions) == data.index(next(b for b in data if b.get("block_id") == "cosigner:hidden")) + 1
    )
    return notice, actions["elements"][0]["confirm"]["text"]["text"]


def test_a_long_value_no_longer_pushes_the_next_field_off_the_card(make_card: Any, make_route: Any) -> None:
    card = make_card(
        kind=ToolKind.WRITE,
        mode=ApprovalMode.ASK,
        parameters={"note": "n" * 3500, "to": "payouts@attacker.example"},
    )
    data = as_dicts(to_blocks(card, make_route())[0])
    flat = json.dumps(data)
    assert '\\"to\\": \\"payouts@attacker.example\\"' in flat
    assert "[+3,302 chars cut]" in flat
    notice, confirm = _notice_and_confirm(data)
    assert "1 value cut: see the full call" in notice
    assert "cut: note" in confirm and "See the full call" in confirm
    run_wide = next(b for b in data if b["type"] == "actions")["elements"][1]
    assert run_wide["action_id"] == "cosigner.approve_for_run" and "confirm" in run_wide


def test_masked_values_stay_visible_around_the_mask_and_are_announced(
    make_card: Any, make_route: Any
) -> None:
    from bot.policy.redaction import redact

    shown = redact(
        {"to": f"payouts@attacker.example {ISSUE_JWT}", "body": "Wire $50,000 to acct 4111111111111111 today"}
    )
    data = as_dicts(to_blocks(make_card(parameters=shown), make_route())[0])
    flat = json.dumps(data)
    assert "payouts@attacker.example [hidden: JWT, 147 chars]" in flat
    assert "Wire $50,000 to acct [hidden: card number, 16 chars] today" in flat
    assert ISSUE_JWT not in flat and "4111111111111111" not in flat
    notice, confirm = _notice_and_confirm(data)
    assert "2 values partly hidden: see the full call" in notice
    assert "partly hidden (credential-looking text): body, to" in confirm
    assert "cannot undo" in confirm  # a danger tool still says so


def test_nothing_hidden_means_no_notice(make_card: Any, make_route: Any) -> None:
    data = as_dicts(to_blocks(make_card(), make_route())[0])
    assert not [b for b in data if b.get("block_id") == "cosigner:hidden"]


def test_fields_are_sorted_so_order_cannot_hide_one(make_card: Any, make_route: Any) -> None:
    data = as_dicts(to_blocks(make_card(parameters={"zeta": 1, "alpha": 2, "mid": 3}), make_route())[0])
    params = data[1]["text"]["text"]
    assert params.index('"alpha"') < params.index('"mid"') < params.index('"zeta"')


def test_a_huge_call_stays_within_slack_limits_and_says_what_is_left(make_card: Any, make_route: Any) -> None:
    card = make_card(parameters={f"field_{i:03}": "v" * 400 for i in range(400)})
    data = as_dicts(to_blocks(card, make_route())[0])  # slack_sdk validates every limit
    assert len(data) <= 50
    assert all(len(t) <= 3000 for t in texts(data))
    flat = json.dumps(data)
    assert "more fields: see the full call" in flat
    notice, _ = _notice_and_confirm(data)
    assert "400 values cut" in notice


def test_the_run_grant_confirmation_fits_slack_with_the_longest_names_and_a_cut_call(
    make_card: Any, make_route: Any
) -> None:
    """Whom the run grant covers and what the card cut both fit in one 300-character
    confirmation, however long the tool name and the requester (slack_sdk refuses more)."""
    card = make_card(
        kind=ToolKind.WRITE,
        mode=ApprovalMode.ASK,
        tool_name="t" * 128,
        triggered_by="api:" + "x" * 300,
        parameters={f"field{i}": "v" * 900 for i in range(12)},
    )
    run_wide = _buttons(card, make_route(requester=None))[1]
    text = run_wide["confirm"]["text"]["text"]
    assert run_wide["action_id"] == "cosigner.approve_for_run"
    assert len(text) <= 300
    assert "Not all of this call is on the card" in text and "is still asked" in text


def test_a_preview_cut_on_the_card_is_said_and_the_full_call_shows_it_whole(
    make_card: Any, make_route: Any
) -> None:
    from contracts.operations import Preview, PreviewField
    from surfaces.slack.full_call import pages

    fields = [PreviewField(label=f"Line {i}", value=f"{i} " + "v" * 600 + " & <end>") for i in range(5)]
    effects = [f"Effect {i}: " + "e" * 400 for i in range(10)]
    preview = Preview(title="T" * 180, fields=fields, effects=effects)
    card = make_card(preview=preview, parameters={"orderId": "ord_1"})
    blocks = as_dicts(to_blocks(card, make_route())[0])
    # Nothing is cut without saying so: the title, the fields, the effects.
    assert blocks[0]["text"]["text"] == "T" * 149 + "…"
    by_id = {b.get("block_id"): b for b in blocks}
    assert by_id["cosigner:preview"]["text"]["text"].endswith("characters not shown_")
    effects_text = by_id["cosigner:effects"]["text"]["text"]
    assert len(effects_text) <= 3000 and effects_text.endswith("characters not shown_")
    flat = json.dumps(blocks)
    assert "1 value cut: see the full call" in flat and "&amp;amp;" not in flat
    actions = next(b for b in blocks if b["type"] == "actions")
    assert "cosigner.full_call" in [e["action_id"] for e in actions["elements"]]
    approve = next(e for e in actions["elements"] if e["action_id"] == "cosigner.approve")
    assert "cut: preview" in approve["confirm"]["text"]["text"]

    # The full call's pages hold the preview whole, then the agent's request.
    inner = [re.fullmatch(r"```\n(.*)\n```", p, re.DOTALL) for page in pages(card) for p in page]
    whole = mrkdwn.unescape("".join(m.group(1) for m in inner if m)).replace("`\u200b", "`")
    assert whole.startswith("T" * 180 + "\n")
    assert all(f"Line {i}: {f.value}\n" in whole for i, f in enumerate(fields))
    assert all(f"- {e}\n" in whole for e in effects)
    assert whole.endswith('Agent\'s request (its claim, unverified):\n{\n  "orderId": "ord_1"\n}')


def test_a_preview_that_fits_offers_no_full_call(make_card: Any, make_route: Any) -> None:
    from contracts.operations import Preview, PreviewField

    preview = Preview(
        title="Refund", fields=[PreviewField(label="Amount", value="$1 & tax")], effects=["Refunds $1"]
    )
    blocks = as_dicts(to_blocks(make_card(preview=preview), make_route())[0])
    actions = next(b for b in blocks if b["type"] == "actions")
    assert "cosigner.full_call" not in [e["action_id"] for e in actions["elements"]]
    assert "*Amount:* $1 &amp; tax" in json.dumps(blocks)

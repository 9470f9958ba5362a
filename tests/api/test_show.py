"""`show`: a key Cosigner hides for its secret-looking name (an S3 object `key`) can be shown
where the policy says it is no secret, on every surface; never a `redact` path.

The Slack card and the SMS text come from a real app with the Slack and Twilio emulators;
`approval_start` is the API's own answer.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from bot.approvals import Desk
from bot.policy import load_policy, redact
from contracts.errors import PolicyError
from contracts.ports import ApprovalDesk
from surfaces.slack import SlackAdapter, SlackConfig
from surfaces.slack.emulator import SlackEmulator
from surfaces.sms import SmsAdapter, SmsConfig
from surfaces.sms.emulator import TwilioEmulator
from tests.harness import Harness, cosigner_app, until

ACCOUNT = "AC" + "5" * 32
TOKEN = "show-auth-token"
BOT = "+15550000001"
ALICE = "+15550000002"
OBJECT_KEY = "uploads/2026/q3-report.pdf"
CARD_TOKEN = "tok_visa_4242"

POLICY = f"""
[tools.put_object]
kind = "write"
confirm = true
show = ["key"]

[tools.copy_object]
kind = "write"
confirm = true

[tenants.acme]
slack_team = "T0ACME"
sms_from = "{BOT}"
"""
SLACK = {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"}
SMS = {"type": "sms", "phone": ALICE}


@asynccontextmanager
async def world(db_kind: str) -> AsyncIterator[tuple[Harness, SlackEmulator, TwilioEmulator, str]]:
    async with (
        SlackEmulator.running(team_id="T0ACME", app_id="A0SHOW") as slack,
        TwilioEmulator.running(ACCOUNT, TOKEN) as twilio,
    ):
        slack_config = SlackConfig(
            signing_secret="show-secret", bot_token="xoxb-acme", api_url=slack.api_url, app_id="A0SHOW"
        )
        sms_config = SmsConfig(ACCOUNT, TOKEN, None, None, twilio.api_url, "https://cosigner.example.com")

        def on_slack(desk: ApprovalDesk) -> SlackAdapter:
            return SlackAdapter(slack_config, desk)

        def on_sms(desk: Desk) -> SmsAdapter:
            return SmsAdapter(sms_config, desk, desk.sms_store)

        async with cosigner_app(POLICY, surfaces=[on_slack, on_sms], database_kind=db_kind) as h:
            yield h, slack, twilio, await h.create_tenant("acme")


async def ask(h: Harness, key: str, tool: str, surface: dict[str, Any], call_id: str) -> dict[str, Any]:
    r = await h.client.post(
        "/v1/approvals",
        headers=h.auth(key),
        json={
            "executionId": "run_1",
            "toolCallId": call_id,
            "toolName": tool,
            "parameters": {"bucket": "reports", "key": OBJECT_KEY, "cardToken": CARD_TOKEN},
            "surface": surface,
        },
    )
    assert r.status_code == 201, r.text
    start: dict[str, Any] = r.json()
    return start


@pytest.mark.parametrize(
    ("tool", "key_shown"), [("put_object", True), ("copy_object", False)], ids=["show", "no show"]
)
async def test_a_shown_key_reaches_card_text_and_start_while_a_token_stays_hidden(
    db_kind: str, tool: str, key_shown: bool
) -> None:
    async with world(db_kind) as (h, slack, twilio, key):
        on_slack = await ask(h, key, tool, SLACK, "c1")
        on_sms = await ask(h, key, tool, SMS, "c2")
        want = OBJECT_KEY if key_shown else "[REDACTED]"
        for start in (on_slack, on_sms):
            assert start["parameters"] == {"bucket": "reports", "key": want, "cardToken": "[REDACTED]"}
            # The digest binds the call as sent, whatever is shown.
            assert start["parametersDigest"] == on_slack["parametersDigest"]

        card = json.dumps((await until(lambda: slack.messages))[0].blocks)
        await h.delivered(on_sms["approvalId"], every_message=True)
        text = twilio.sent[0].body
        for shown in (card, text):
            assert (OBJECT_KEY in shown) is key_shown, shown
            assert CARD_TOKEN not in shown
        assert f"key={want}" in text and "cardToken=[REDACTED]" in text

        audit = await h.client.get(f"/v1/approvals/{on_slack['approvalId']}/audit", headers=h.auth(key))
        assert (OBJECT_KEY in audit.text) is key_shown and CARD_TOKEN not in audit.text


def test_show_un_hides_a_name_never_a_redact_path_nor_a_masked_value() -> None:
    params = {
        "key": OBJECT_KEY,
        "Key": "also shown: the same name in other case",
        "object": {"key": "nested, not named by show"},
        "token": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlLXZhbHVlLWhlcmU",
    }
    shown = redact(params, (), ("key", "token"))
    assert shown["key"] == OBJECT_KEY and shown["Key"] == params["Key"]
    assert shown["object"] == {"key": "[REDACTED]"}
    assert shown["token"].startswith("[hidden: JWT"), "a credential inside a shown value is still masked"
    assert redact(params, ("key",), ("key",))["key"] == "[REDACTED]"
    assert redact({"objects": [{"key": "a", "pin": "1234"}]}, (), ("objects.key",)) == {
        "objects": [{"key": "a", "pin": "[REDACTED]"}]
    }


def test_show_merges_like_any_per_tool_key() -> None:
    policy = load_policy(
        """
[tools.put_object]
kind = "write"
show = ["key"]

[tenants.acme.tools.put_object]
show = []

[tenants.globex.tools.put_object]
redact = ["bucket"]

[operations.sign_contract]
url = "https://app.example/contracts"
secret_env = "CONTRACT_SECRET"
show = ["token"]

[tenants.acme.operations.sign_contract]
show = ["pin"]
"""
    )
    assert policy.rule_for("acme", "put_object").show == ()
    assert policy.rule_for("globex", "put_object").show == ("key",)
    assert policy.rule_for("globex", "put_object").origin("show") == "tools.put_object.show"
    operation = policy.operation_rule("acme", "sign_contract")
    assert operation is not None and operation.show == ("pin",)
    assert {r.name: r.show for r in policy.rules_of("globex")}["sign_contract"] == ("token",)


@pytest.mark.parametrize(
    ("section", "problem"),
    [
        (
            'redact = ["key"]\nshow = ["key"]',
            'tools.put_object.show: "key" is also hidden by the redact path "key"',
        ),
        (
            'redact = ["object"]\nshow = ["object.key"]',
            'tools.put_object.show: "object.key" is also hidden by the redact path "object"',
        ),
        (
            'redact = ["*"]\nshow = ["token"]',
            'tools.put_object.show: "token" is also hidden by the redact path "*"',
        ),
        ('show = ["bucket"]', 'tools.put_object.show: "bucket" names a key Cosigner shows anyway'),
        ('show = ["*"]', 'tools.put_object.show: "*" is not a dotted path without "*"'),
        ('show = "key"', 'tools.put_object.show: must be a list, e.g. ["key"]'),
    ],
    ids=["both", "inside a redacted object", "redact star", "not hidden anyway", "star", "not a list"],
)
def test_policy_check_refuses_a_show_that_is_ambiguous_or_does_nothing(section: str, problem: str) -> None:
    with pytest.raises(PolicyError) as refused:
        load_policy(f'[tools.put_object]\nkind = "write"\n{section}\n')
    assert any(p.startswith(problem) for p in refused.value.problems), refused.value.problems


def test_a_tenant_redact_and_the_tools_show_of_one_key_is_refused() -> None:
    with pytest.raises(PolicyError) as refused:
        load_policy(
            """
[tools.put_object]
kind = "write"
show = ["key"]

[tenants.acme.tools.put_object]
redact = ["key"]
"""
        )
    assert refused.value.problems == [
        'tools.put_object.show: "key" is also hidden by the redact path "key" (redact adds up over the '
        "tool's and the tenant's sections); show un-hides only a name Cosigner hides by itself, never a "
        "redact path, so which is meant is unclear: remove it from one of them"
    ]


def test_a_shown_secret_looking_name_may_be_editable() -> None:
    toml = '[tools.put_object]\nkind = "write"\nconfirm = true\neditable = ["key"]\n'
    with pytest.raises(PolicyError, match="names a secret"):
        load_policy(toml)
    assert load_policy(toml + 'show = ["key"]\n').rule_for("", "put_object").editable == ("key",)

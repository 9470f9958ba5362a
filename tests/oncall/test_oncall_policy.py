"""The on-call approver syntax, each bad input refused with its fix, and `policy check`
refusing a rotation whose provider has no token; the providers' clients on their own."""

from __future__ import annotations

import httpx
import pytest

from bot.oncall import Opsgenie, PagerDuty, Unreachable
from bot.policy.oncall_refs import OnCallProvider, OnCallRef, parse_oncall
from bot.policy.rules import load_policy
from contracts.enums import ApproverKind
from contracts.errors import PolicyError
from tests.oncall.servers import OPSGENIE_KEY, PAGERDUTY_TOKEN, on_call_servers

TENANT = """
[tenants.acme]
slack_team = "T0ACME"
admins = { slack = ["U0ADMIN"] }
admin_channel = "C0ADMINS"
"""


def tool(approvers: str, extra: str = "") -> str:
    return f'[tools.deploy]\nkind = "danger"\ntimeout = "1h"\napprovers = {approvers}\n{extra}\n{TENANT}'


def problems_of(text: str) -> list[str]:
    with pytest.raises(PolicyError) as info:
        load_policy(text)
    return info.value.problems


def test_the_three_forms_parse_to_a_schedule_or_an_escalation_level() -> None:
    assert parse_oncall("oncall:pagerduty:P1ABCD") == OnCallRef(OnCallProvider.PAGERDUTY, "P1ABCD")
    assert parse_oncall("oncall:pagerduty:EP123:2") == OnCallRef(OnCallProvider.PAGERDUTY, "EP123", 2)
    assert parse_oncall("oncall:opsgenie:ops-primary") == OnCallRef(OnCallProvider.OPSGENIE, "ops-primary")
    assert str(parse_oncall("oncall:pagerduty:EP123:2")) == "oncall:pagerduty:EP123:2"


def test_a_rule_naming_a_rotation_asks_its_other_approvers_else_the_admins_when_nobody_is_reached() -> None:
    policy = load_policy(tool('["oncall:pagerduty:P1ABCD"]'))
    rule = policy.rule_for("acme", "deploy")
    assert rule.oncall == (OnCallRef(OnCallProvider.PAGERDUTY, "P1ABCD"),)
    assert rule.approvers == (ApproverKind.TENANT_ADMINS,)
    mixed = load_policy(tool('["oncall:opsgenie:ops", "staff"]') + '[staff]\nsms = ["+15550100100"]\n')
    assert mixed.rule_for("acme", "deploy").approvers == (ApproverKind.STAFF,)


@pytest.mark.parametrize(
    ("approvers", "says"),
    [
        ('["oncall:victorops:X1"]', 'names the on-call provider "victorops"; use "pagerduty" or "opsgenie"'),
        ('["oncall:pagerduty"]', "is not an on-call approver; write"),
        ('["oncall:pagerduty:EP1:0"]', 'the escalation level "0" must be a whole number from 1'),
        ('["oncall:pagerduty:EP1:two"]', 'the escalation level "two" must be a whole number from 1'),
        ('["oncall:opsgenie:ops:2"]', "Opsgenie rotations are named by schedule only"),
        ('["oncall:pagerduty:P 1"]', "is not a schedule or escalation policy id"),
        ('["oncall:pagerduty:P1:2:3"]', "is not an on-call approver"),
        (
            '["on_call"]',
            'is not an approver; use "requester", "tenant_admins", "staff", "email" or an on-call',
        ),
    ],
)
def test_a_malformed_rotation_is_refused_naming_the_fix(approvers: str, says: str) -> None:
    found = problems_of(tool(approvers))
    assert any(p.startswith("tools.deploy.approvers: ") and says in p for p in found), found


def test_an_escalation_to_a_malformed_rotation_is_refused_with_its_key_path() -> None:
    found = problems_of(
        tool('["oncall:pagerduty:EP1:1"]', 'escalate = [{ after = "10m", to = "oncall:pd:EP1:2" }]')
    )
    assert any(p.startswith("tools.deploy.escalate: ") and 'provider "pd"' in p for p in found), found


def test_an_escalation_to_the_rotation_already_asked_is_refused() -> None:
    text = tool('["oncall:pagerduty:EP1:1"]', 'escalate = [{ after = "10m", to = "oncall:pagerduty:EP1:1" }]')
    found = problems_of(text)
    assert any("escalate[0].to: the request is asked of oncall:pagerduty:EP1:1 already" in p for p in found)


def test_policy_check_refuses_a_rotation_whose_provider_has_no_token() -> None:
    text = tool('["oncall:pagerduty:P1ABCD"]', 'escalate = [{ after = "10m", to = "oncall:opsgenie:ops" }]')
    policy = load_policy(text)
    missing = policy.operation_problems({})
    assert any("oncall:pagerduty:P1ABCD, but COSIGNER_PAGERDUTY_TOKEN is not set" in p for p in missing)
    assert any("oncall:opsgenie:ops, but COSIGNER_OPSGENIE_TOKEN is not set" in p for p in missing)
    both = {"COSIGNER_PAGERDUTY_TOKEN": "t", "COSIGNER_OPSGENIE_TOKEN": "k"}
    assert policy.operation_problems(both) == []


async def test_the_clients_read_the_documented_shapes_and_name_what_went_wrong() -> None:
    async with on_call_servers() as servers, httpx.AsyncClient() as client:
        servers.put("PSCHED9", ["alice@acme.example", "bob@acme.example"])
        servers.put("ops-primary", ["carol@acme.example"])
        pd = PagerDuty(client, PAGERDUTY_TOKEN, servers.pagerduty_url)
        og = Opsgenie(client, OPSGENIE_KEY, servers.opsgenie_url)
        assert [p.email for p in await pd.on_call(parse_oncall("oncall:pagerduty:PSCHED9"))] == [
            "alice@acme.example",
            "bob@acme.example",
        ]
        assert [p.email for p in await og.on_call(parse_oncall("oncall:opsgenie:ops-primary"))] == [
            "carol@acme.example"
        ]
        assert servers.asked[-1].endswith("scheduleIdentifierType=name&flat=true")
        with pytest.raises(Unreachable, match="does not know this rotation"):
            await og.on_call(parse_oncall("oncall:opsgenie:nope"))
        with pytest.raises(Unreachable, match=r"refused the token \(401\)"):
            await PagerDuty(client, "wrong", servers.pagerduty_url).on_call(
                parse_oncall("oncall:pagerduty:P1")
            )
        servers.down(500)
        with pytest.raises(Unreachable, match="PagerDuty answered 500"):
            await pd.on_call(parse_oncall("oncall:pagerduty:PSCHED9"))
        url = servers.pagerduty_url
    with pytest.raises(Unreachable, match="could not be reached"):
        async with httpx.AsyncClient() as client:
            await PagerDuty(client, PAGERDUTY_TOKEN, url).on_call(parse_oncall("oncall:pagerduty:P1"))


def test_a_when_block_naming_its_own_approvers_asks_them_not_the_rotation() -> None:
    from bot.policy.tool_rule import first_block

    extra = (
        '[[tools.deploy.when]]\nmatch = { env = { equals = "prod" } }\nthen = "ask"\napprovers = ["staff"]\n'
    )
    policy = load_policy(tool('["oncall:pagerduty:P1ABCD"]', extra) + '[staff]\nsms = ["+15550100100"]\n')
    rule = policy.rule_for("acme", "deploy")
    decided, _, _ = first_block(rule, {"env": "prod"})
    assert decided.oncall == () and decided.approvers == (ApproverKind.STAFF,)
    kept, _, _ = first_block(rule, {"env": "dev"})
    assert kept.oncall == rule.oncall

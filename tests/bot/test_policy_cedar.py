"""Cedar as a policy source: the three outcomes read from Cedar's answer and its policies'
annotations, files refused with their place, and calls Cedar cannot type asked, never allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.policy import load_policy_file, rule_on
from bot.policy.cases import ENABLED, assumed_sender, parse_surface
from bot.policy.cedar import CedarSource
from bot.policy.decision import Ruling
from contracts.enums import ApprovalMode, ApproverKind
from contracts.errors import PolicyError

SCHEMA = """namespace Cosigner {
  entity Tenant;
  entity Agent in [Tenant];
  entity Tool;
  type Context = {
    parameters: { amountCents?: Long, note?: String },
    surface: String,
    requester: String,
    time: Long,
  };
  action "call", "operation" appliesTo { principal: [Agent], resource: [Tool], context: Context };
}
"""

POLICIES = """// refunds
@id("refund-ask")
@approval("ask_always")
@approvers("tenant_admins")
@quorum("2")
@timeout("10m")
permit (principal, action == Cosigner::Action::"call", resource == Cosigner::Tool::"issue_refund")
when { context.parameters has amountCents && context.parameters.amountCents < 100000 };

@id("refund-cap")
@reason("refunds of 1,000.00 or more are made by finance")
forbid (principal, action, resource == Cosigner::Tool::"issue_refund")
when { context.parameters has amountCents && context.parameters.amountCents >= 100000 };

@id("reads")
permit (principal in Cosigner::Tenant::"demo", action, resource == Cosigner::Tool::"lookup_order");

@id("night")
forbid (principal, action, resource == Cosigner::Tool::"lookup_order")
when { context.time >= 2000000000 };

@id("credit")
@approval("ask")
permit (principal == Cosigner::Agent::"key_support", action, resource == Cosigner::Tool::"issue_credit")
when { context.surface == "slack" && context.requester like "slack:*" };
"""

TENANT = """[tenants.demo]
slack_team = "T0DEMO"
admins = { slack = ["U0ADMIN", "U0ADMIN2"] }
admin_channel = "C0ADMINS"
"""

SLACK = "slack:T0DEMO/C0SUPPORT/U0ALICE"
NOW = 1_800_000_000.0


def write(folder: Path, policies: str = POLICIES, schema: str = SCHEMA, toml: str | None = None) -> Path:
    (folder / "agents.cedar").write_text(policies, encoding="utf-8")
    (folder / "agents.cedarschema").write_text(schema, encoding="utf-8")
    if toml is None:
        return folder / "agents.cedar"
    (folder / "policy.toml").write_text(toml, encoding="utf-8")
    return folder / "policy.toml"


def ruling(
    path: Path, tool: str, params: dict[str, object], surface: str | None = SLACK, **kw: object
) -> Ruling:
    policy = load_policy_file(path, check_secrets=False)
    return rule_on(
        policy,
        "demo",
        tool,
        params,
        parse_surface(surface) if surface else None,
        enabled=ENABLED,
        sms=assumed_sender(),
        now=kw.pop("now", NOW),  # type: ignore[arg-type]
        agent=str(kw.pop("agent", "key_agent")),
    )


@pytest.fixture
def toml_policy(tmp_path: Path) -> Path:
    return write(tmp_path, toml='[cedar]\npolicies = "agents.cedar"\n\n' + TENANT)


def test_an_asking_permit_asks_as_its_annotations_say(toml_policy: Path) -> None:
    r = ruling(toml_policy, "issue_refund", {"amountCents": 5000, "orderId": "o1"})
    assert (r.deny, r.mode, r.quorum, r.timeout) == (False, ApprovalMode.ASK_ALWAYS, 2, 600.0)
    assert r.kinds == (ApproverKind.TENANT_ADMINS,)
    assert r.approvers == ("U0ADMIN", "U0ADMIN2")
    assert r.decided_by == "agents.cedar#refund-ask"
    assert "agents.cedar#refund-ask.timeout" in [s.path for s in r.steps]


def test_a_forbid_denies_with_its_reason(toml_policy: Path) -> None:
    r = ruling(toml_policy, "issue_refund", {"amountCents": 250000})
    assert r.deny and r.decided_by == "agents.cedar#refund-cap"
    assert r.rule.deny_reason == "refunds of 1,000.00 or more are made by finance"
    assert "agents.cedar:10:1" in r.explain()


def test_a_plain_permit_allows_and_a_forbid_on_the_time_overrides_it(toml_policy: Path) -> None:
    assert ruling(toml_policy, "lookup_order", {}).runs_unasked
    late = ruling(toml_policy, "lookup_order", {}, now=2_000_000_001)
    assert late.deny and late.decided_by == "agents.cedar#night"


def test_no_permit_asks_as_an_unknown_danger_call(toml_policy: Path) -> None:
    r = ruling(toml_policy, "wire_money", {"amountCents": 1})
    assert (r.deny, r.mode, r.kinds) == (False, ApprovalMode.ASK_ALWAYS, (ApproverKind.REQUESTER,))
    assert "no permit matched" in r.explain()


def test_the_principal_surface_and_requester_are_read(toml_policy: Path) -> None:
    r = ruling(toml_policy, "issue_credit", {}, agent="key_support")
    assert r.mode is ApprovalMode.ASK and r.decided_by == "agents.cedar#credit"
    assert ruling(toml_policy, "issue_credit", {}, agent="key_other").mode is ApprovalMode.ASK_ALWAYS
    by_text = ruling(toml_policy, "issue_credit", {}, surface="sms:+15550100002", agent="key_support")
    assert by_text.decided_by == "agents.cedar"  # no permit for a text: asked as unknown


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"amountCents": 12.5}, "a fraction"),
        ({"amountCents": None}, "null"),
        ({"amountCents": "5000"}, "does not match the Cedar schema"),
    ],
)
def test_a_call_cedar_cannot_type_is_asked_never_allowed(
    toml_policy: Path, params: dict[str, object], said: str
) -> None:
    r = ruling(toml_policy, "issue_refund", params)
    assert not r.deny and not r.runs_unasked and r.mode is ApprovalMode.ASK_ALWAYS
    assert r.unevaluable is not None and said in r.unevaluable
    assert "5000" not in r.unevaluable  # the value Cedar refused is not repeated


def test_a_cedar_file_beside_its_schema_is_a_policy_alone(tmp_path: Path) -> None:
    path = write(tmp_path)
    policy = load_policy_file(path)
    assert policy.cedar is not None and policy.cedar.files.schema_path.name == "agents.cedarschema"
    assert ruling(path, "issue_refund", {"amountCents": 250000}).deny


def test_a_repeated_call_is_decided_from_memory_the_same(toml_policy: Path) -> None:
    policy = load_policy_file(toml_policy)
    assert policy.cedar is not None
    first = policy.cedar.verdict(
        "demo", "a", "issue_refund", {"amountCents": 5, "note": "x"}, "slack", "", NOW
    )
    # `note` is read by no policy, and the time only by a policy on another tool: same key.
    again = policy.cedar.verdict(
        "demo", "a", "issue_refund", {"amountCents": 5, "note": "y"}, "slack", "", NOW + 9
    )
    assert again is first


def problems(path: Path) -> list[str]:
    with pytest.raises(PolicyError) as caught:
        load_policy_file(path)
    return caught.value.problems


def test_a_syntax_error_is_refused_with_file_line_and_column(tmp_path: Path) -> None:
    bad = POLICIES.replace("amountCents >= 100000 };", "amountCents >= };")
    (said,) = problems(write(tmp_path, policies=bad))
    assert said.startswith("agents.cedar:13:80: unexpected token `}`"), said


def test_a_policy_the_schema_refuses_is_refused_where_it_is(tmp_path: Path) -> None:
    bad = POLICIES.replace("context.parameters.amountCents < 100000", "context.parameters.amount < 100000")
    (said,) = problems(write(tmp_path, policies=bad))
    assert said.startswith("agents.cedar:8:"), said
    assert "amount" in said and "agents.cedarschema" in said


def test_a_schema_that_does_not_parse_is_refused_with_its_place(tmp_path: Path) -> None:
    (said,) = problems(write(tmp_path, schema=SCHEMA.replace("entity Tool;", "entity Tool")))
    assert said.startswith("agents.cedarschema:5:"), said


def test_a_missing_schema_names_the_file_to_write(tmp_path: Path) -> None:
    (tmp_path / "agents.cedar").write_text(POLICIES, encoding="utf-8")
    (said,) = problems(tmp_path / "agents.cedar")
    assert "agents.cedarschema" in said and "no Cedar schema" in said


@pytest.mark.parametrize(
    ("annotation", "said"),
    [
        ('@approval("maybe")', 'must be "ask" or "ask_always"'),
        ('@approval("ask")\n@approvers("everyone")', "@approvers names ['everyone']"),
        ('@approval("ask")\n@quorum("two")', "whole number"),
        ('@approval("ask")\n@timeout("soon")', "@timeout"),
        ('@quorum("2")', 'without @approval("ask")'),
        ('@tier("soft")', "not an annotation Cosigner reads"),
    ],
)
def test_an_annotation_cosigner_cannot_read_is_refused(tmp_path: Path, annotation: str, said: str) -> None:
    text = f'{annotation}\npermit (principal, action, resource == Cosigner::Tool::"x");\n'
    (found,) = problems(write(tmp_path, policies=text))
    assert found.startswith("agents.cedar:1:1: ") and said in found, found


def test_a_deciding_key_beside_cedar_is_refused_naming_it(tmp_path: Path) -> None:
    toml = '[cedar]\npolicies = "agents.cedar"\n\n[tools.issue_refund]\nkind = "danger"\nquorum = 2\n'
    (said,) = problems(write(tmp_path, toml=toml))
    assert said.startswith("tools.issue_refund.quorum: decided by the Cedar policies"), said


def test_serve_refuses_a_cedar_file_that_does_not_validate(tmp_path: Path) -> None:
    from bot.cli.commands import _policy_at

    bad = POLICIES.replace("context.parameters.amountCents < 100000", "context.parameters.amount < 100000")
    with pytest.raises(PolicyError, match=r"agents\.cedar:8:"):
        _policy_at(str(write(tmp_path, policies=bad)))


CASES = """[[case]]
name = "a small refund is asked of two admins"
tenant = "demo"
tool = "issue_refund"
params = { amountCents = 5000 }
surface = "slack:T0DEMO/C0SUPPORT/U0ALICE"
expect = { mode = "ask_always", approvers = "tenant_admins", quorum = 2, rule = "agents.cedar#refund-ask" }

[[case]]
name = "a large refund is refused by refund-cap"
tenant = "demo"
tool = "issue_refund"
params = { amountCents = 250000 }
expect = { deny = true, rule = "agents.cedar#refund-cap" }

[[case]]
name = "a lookup needs nobody"
tenant = "demo"
tool = "lookup_order"
expect = { mode = "none", rule = "agents.cedar#reads" }

[[case]]
name = "the support agent's credit asked in Slack, at night"
tenant = "demo"
tool = "issue_credit"
agent = "key_support"
time = 2000000001
surface = "slack:T0DEMO/C0SUPPORT/U0ALICE"
expect = { mode = "ask", rule = "agents.cedar#credit" }
"""


def test_policy_test_runs_a_case_file_on_cedar(toml_policy: Path, tmp_path: Path) -> None:
    from bot.policy import load_cases, run_cases

    (tmp_path / "cases.toml").write_text(CASES, encoding="utf-8")
    outcomes = run_cases(load_policy_file(toml_policy), load_cases(tmp_path / "cases.toml"))
    assert [o.failures for o in outcomes] == [(), (), (), ()]
    wrong = CASES.replace('rule = "agents.cedar#reads"', 'rule = "agents.cedar#refund-ask"')
    (tmp_path / "cases.toml").write_text(wrong, encoding="utf-8")
    last = run_cases(load_policy_file(toml_policy), load_cases(tmp_path / "cases.toml"))[2]
    assert last.failures == ("expected rule agents.cedar#refund-ask, got agents.cedar#reads",)


def test_replay_decides_recorded_requests_on_cedar_at_the_time_they_were_asked(toml_policy: Path) -> None:
    import json

    from bot.policy.replay import replay
    from storage.audit import Requested

    def row(n: int, at: float, tool: str, params: dict[str, object], status: str) -> Requested:
        data = {
            "toolName": tool,
            "parameters": params,
            "surface": {"type": "api"},
            "status": status,
            "mode": "none",
        }
        return Requested(f"apr_{n}", "demo", at, json.dumps(data))

    rows = [
        row(1, NOW, "lookup_order", {}, "approved"),
        row(2, 2_000_000_100, "lookup_order", {}, "approved"),  # after `night` starts: now refused
    ]
    found = replay(rows, load_policy_file(toml_policy))
    assert found.read == 2
    changes = list(found.changes.values())
    assert [(c.tool, c.after, c.examples) for c in changes] == [("lookup_order", "deny", ["apr_2"])]


def test_step_up_is_read_where_the_server_supports_it_and_refused_where_not(tmp_path: Path) -> None:
    from dataclasses import fields

    from bot.policy.tool_rule import ToolRule

    text = (
        '@approval("ask")\n@step_up("true")\npermit (principal, action, resource == Cosigner::Tool::"x");\n'
    )
    path = write(tmp_path, policies=text)
    if "step_up" not in {f.name for f in fields(ToolRule)}:
        (said,) = problems(path)
        assert said.startswith("agents.cedar:1:1: @step_up is not supported by this server"), said
        return
    r = ruling(path, "x", {})
    read = {f.name: getattr(r.rule, f.name) for f in fields(r.rule)}
    assert read["step_up"] is True


TYPED_SCHEMA = SCHEMA.replace(
    "parameters: { amountCents?: Long, note?: String }",
    "parameters: { price?: decimal, at?: datetime, addr?: ipaddr }",
)
TYPED = """@id("cheap-inside")
permit (principal, action, resource == Cosigner::Tool::"pay")
when {
  context.parameters has price && context.parameters.price.lessThan(decimal("10.5")) &&
  context.parameters has at && context.parameters.at < datetime("2030-01-01") &&
  context.parameters has addr && context.parameters.addr.isInRange(ip("10.0.0.0/8"))
};
"""
TYPED_TOML = """[cedar]
policies = "agents.cedar"

[tools.pay]
kind = "danger"
[tools.pay.parameters_schema]
type = "object"
properties.price = { type = "number" }
properties.at = { type = "string", format = "date-time" }
properties.addr = { type = "string", format = "ipv4" }
"""


@pytest.mark.parametrize(
    ("params", "allowed", "said"),
    [
        ({"price": 1.25, "at": "2026-12-06T09:00:00Z", "addr": "10.1.2.3"}, True, None),
        ({"price": 10, "at": "2026-12-06T09:00:00Z", "addr": "10.1.2.3"}, True, None),
        ({"price": 12.5, "at": "2026-12-06T09:00:00Z", "addr": "10.1.2.3"}, False, None),
        ({"price": 1.23456, "at": "2026-12-06T09:00:00Z", "addr": "10.1.2.3"}, False, "4 decimal places"),
        ({"price": "1", "at": "2026-12-06T09:00:00Z", "addr": "10.1.2.3"}, False, "not a number"),
        ({"price": 1, "at": "2026-12-06T09:00:00Z", "addr": "not an address"}, False, "Cedar"),
    ],
)
def test_the_tools_parameters_schema_types_numbers_times_and_addresses_for_cedar(
    tmp_path: Path, params: dict[str, object], allowed: bool, said: str | None
) -> None:
    path = write(tmp_path, policies=TYPED, schema=TYPED_SCHEMA, toml=TYPED_TOML)
    r = ruling(path, "pay", params)
    assert r.runs_unasked is allowed and not r.deny
    if said is not None:
        assert r.unevaluable is not None and said in r.unevaluable, r.unevaluable


def test_the_documented_example_loads_and_decides_as_docs_cedar_md_says() -> None:
    root = Path(__file__).resolve().parents[2] / "examples" / "cedar"
    r = ruling(
        root / "policy.toml", "deploy", {"env": "prod"}, surface="slack:T0DEMO/C0OPS/U0ALICE", agent="key_1"
    )
    assert (r.mode, r.quorum, r.decided_by) == (ApprovalMode.ASK_ALWAYS, 2, "agents.cedar#prod-deploys")
    assert ruling(root / "agents.cedar", "issue_refund", {"amountCents": 500}).runs_unasked
    assert ruling(root / "agents.cedar", "issue_refund", {"amountCents": 600000}).deny


def test_the_policies_that_determined_an_answer_are_named_in_the_files_order(tmp_path: Path) -> None:
    # Cedar names them in no fixed order; the path (`decidedBy`) must read the same every time.
    names = ["p-one", "p-two", "p-three", "p-four", "p-five", "p-six"]
    text = "".join(
        f'@id("{n}")\npermit (principal, action, resource == Cosigner::Tool::"lookup_order")'
        " when { context.parameters has note };\n"
        for n in names
    )
    source = CedarSource.load(write(tmp_path, text))
    for i in range(40):
        v = source.verdict("demo", "key_1", "lookup_order", {"note": f"n{i}"}, "slack", "slack:U0", NOW)
        assert [source.files.name(p) for p in v.by] == names

"""What `when` blocks decide for a call (`bot.policy.decision.rule_on`): first match wins, each
condition, a value the policy cannot evaluate asked and never allowed, the order against
the tool's other keys; explain, test cases and replay; the documented coding-agent example."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.policy import ENABLED, load_policy, load_policy_file, rule_on
from bot.policy.cases import Case, run_case
from bot.policy.decision import Ruling
from bot.policy.replay import replay
from bot.policy.rules import Policy
from contracts.enums import ApprovalMode, ApproverKind
from contracts.wire import DashboardSurface
from storage.audit import Requested

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "coding_agent_policy.toml"
DASH = DashboardSurface(type="dashboard", userId="u_1")

POLICY = """
[tools.t]
kind = "danger"
approvers = ["requester"]

[[tools.t.when]]
match = { branch = { equals = "main" }, force = { equals = true } }
then = "deny"

[[tools.t.when]]
match = { amount = { below = 100, above = 0 } }
then = "allow"

[[tools.t.when]]
match = { env = { in = ["prod", "staging"] } }
then = "ask"
approvers = ["tenant_admins"]
quorum = 2

[[tools.t.when]]
match = { "target.name" = { matches = 'ls( -[a-z]+)?' } }
then = "allow"

[[tools.t.when]]
match = { cmd = { prefix = "git " } }
then = "allow"

[[tools.t.when]]
match = { level = { equals = 3 } }
then = "allow"

[tenants.acme]
admins = { dashboard = ["u_1", "u_2", "u_3"] }
"""


def run(policy: Policy, params: dict[str, Any], tool: str = "t", tenant: str = "acme") -> Ruling:
    return rule_on(policy, tenant, tool, params, DASH, enabled=ENABLED)


@pytest.fixture(scope="module")
def policy() -> Policy:
    return load_policy(POLICY)


@pytest.mark.parametrize(
    ("params", "label", "by"),
    [
        ({"branch": "main", "force": True}, "deny", "tools.t.when[0]"),
        ({"branch": "main", "force": False}, "ask_always:dashboard", "tools.t.kind"),
        ({"branch": "dev", "force": True}, "ask_always:dashboard", "tools.t.kind"),
        ({"amount": 99.5}, "none", "tools.t.when[1]"),
        ({"amount": 100}, "ask_always:dashboard", "tools.t.kind"),  # below is strict
        ({"amount": 0}, "ask_always:dashboard", "tools.t.kind"),  # above is strict
        ({"env": "prod"}, "ask_always:dashboard", "tools.t.when[2]"),
        ({"env": "dev"}, "ask_always:dashboard", "tools.t.kind"),
        ({"target": {"name": "ls -la"}}, "none", "tools.t.when[3]"),
        ({"target": {"name": "ls"}}, "none", "tools.t.when[3]"),
        # `matches` is a full match, never a search; `.` and `-[a-z]+` never cross a line break.
        ({"target": {"name": "xls"}}, "ask_always:dashboard", "tools.t.kind"),
        ({"target": {"name": "ls -la; rm x"}}, "ask_always:dashboard", "tools.t.kind"),
        ({"target": {"name": "ls -l\nrm x"}}, "ask_always:dashboard", "tools.t.kind"),
        ({"cmd": "git log"}, "none", "tools.t.when[4]"),
        ({"cmd": "gitx log"}, "ask_always:dashboard", "tools.t.kind"),
        ({"level": 3.0}, "none", "tools.t.when[5]"),
        # First match wins: both the allow of when[1] and the deny of when[0] match; when[0] decides.
        ({"amount": 5, "branch": "main", "force": True}, "deny", "tools.t.when[0]"),
        ({}, "ask_always:dashboard", "tools.t.kind"),  # a missing path never matches
    ],
)
def test_each_condition_and_the_first_match(
    policy: Policy, params: dict[str, Any], label: str, by: str
) -> None:
    ruling = run(policy, params)
    assert (ruling.label, ruling.decided_by) == (label, by), ruling.explain()


def test_an_ask_block_names_its_approvers_and_quorum(policy: Policy) -> None:
    ruling = run(policy, {"env": "staging"})
    assert ruling.mode is ApprovalMode.ASK_ALWAYS and ruling.kinds == (ApproverKind.TENANT_ADMINS,)
    assert (ruling.quorum, ruling.separate_duties) == (2, True)
    assert ruling.rule.origin("approvers") == "tools.t.when[2].approvers"
    assert ruling.rule.describe() == "tools.t.when[2]: danger → ask_always"


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"amount": "50"}, "parameters.amount is a string, but its conditions read a number"),
        ({"amount": True}, "parameters.amount is a boolean, but its conditions read a number"),
        ({"amount": None}, "parameters.amount is null, but its conditions read a number"),
        ({"amount": {"value": 5}}, "parameters.amount is an object, but its conditions read a number"),
        (
            {"Amount": 5},
            "parameters.Amount differs from amount, which the block reads, only by case or width",
        ),
        ({"amount": 5, "AMOUNT": 500}, "parameters.amount is sent under several spellings"),
    ],
)
def test_a_value_the_block_cannot_evaluate_is_asked_never_allowed(
    policy: Policy, params: dict[str, Any], reason: str
) -> None:
    ruling = run(policy, params)
    assert not ruling.runs_unasked and not ruling.deny
    assert ruling.mode is ApprovalMode.ASK_ALWAYS and ruling.kinds == (ApproverKind.REQUESTER,)
    assert ruling.decided_by == "tools.t.when[1]" and ruling.unevaluable is not None
    assert ruling.unevaluable.startswith(reason), ruling.unevaluable
    assert f"[tools.t.when[1]] cannot be evaluated: {reason}" in ruling.explain()
    assert ruling.rule.describe() == "tools.t.when[1] (could not be evaluated): danger → ask_always"
    assert ruling.to_json()["block"] == "tools.t.when[1]"
    assert ruling.to_json()["unevaluable"] == ruling.unevaluable
    assert "50" not in ruling.explain().replace("0 < 100", ""), "the value is never quoted"


def test_a_deny_block_that_cannot_be_evaluated_asks_rather_than_denies(policy: Policy) -> None:
    ruling = run(policy, {"branch": "main", "force": "true"})
    assert (
        not ruling.deny and ruling.mode is ApprovalMode.ASK_ALWAYS and ruling.decided_by == "tools.t.when[0]"
    )


def test_a_condition_not_met_outweighs_one_that_cannot_be_evaluated(policy: Policy) -> None:
    # when[0] is not met (branch is not main) whatever force holds: the search goes on.
    ruling = run(policy, {"branch": "dev", "force": "yes", "amount": 5})
    assert ruling.label == "none" and ruling.decided_by == "tools.t.when[1]"


ORDER = """
[tools.pay]
kind = "danger"
deny_above = { parameter = "amountCents", value = 100000 }
allow_below = { parameter = "amountCents", value = 5000 }

[[tools.pay.when]]
match = { currency = { equals = "EUR" } }
then = "allow"

[[tools.pay.when]]
match = { currency = { equals = "USD" } }
then = "ask"

[tenants.acme]
admins = { dashboard = ["u_1"] }

[tenants.strict]
gate_all = true
admins = { dashboard = ["u_1"] }

[tenants.off.tools.pay]
deny = true
"""


def test_deny_above_and_a_standing_deny_come_before_any_block() -> None:
    policy = load_policy(ORDER)
    over = run(policy, {"currency": "EUR", "amountCents": 100001}, "pay")
    assert over.deny and over.decided_by == "tools.pay.deny_above"
    off = run(policy, {"currency": "EUR", "amountCents": 1}, "pay", tenant="off")
    assert off.deny and off.decided_by == "tenants.off.tools.pay.deny"
    invalid = run(policy, {"currency": "EUR", "amountCents": "1"}, "pay")
    assert invalid.invalid is not None and invalid.label == "invalid"


def test_a_block_decides_before_allow_below_which_decides_when_no_block_does() -> None:
    policy = load_policy(ORDER)
    asked = run(policy, {"currency": "USD", "amountCents": 10}, "pay")
    assert (
        asked.mode is ApprovalMode.ASK_ALWAYS
        and asked.threshold is None
        and asked.decided_by == "tools.pay.when[1]"
    )
    small = run(policy, {"currency": "CHF", "amountCents": 10}, "pay")
    assert small.runs_unasked and small.decided_by == "tools.pay.allow_below"


def test_gate_all_raises_a_blocks_allow_to_ask() -> None:
    ruling = run(load_policy(ORDER), {"currency": "EUR"}, "pay", tenant="strict")
    assert ruling.mode is ApprovalMode.ASK and not ruling.runs_unasked
    assert ruling.decided_by == "tenants.strict.gate_all" and ruling.rule.block == "tools.pay.when[0]"


def test_policy_test_cases_expect_a_block() -> None:
    policy = load_policy(POLICY)

    def case(params: dict[str, Any], **expect: Any) -> tuple[str, ...]:
        made = Case.model_validate(
            {
                "name": "c",
                "tenant": "acme",
                "tool": "t",
                "params": params,
                "surface": "dashboard:u_1",
                "expect": expect,
            }
        )
        return run_case(policy, made).failures

    assert case({"amount": 5}, block="tools.t.when[1]", mode="none") == ()
    assert case({}, block="none") == ()
    assert case({"amount": 5}, block="tools.t.when[2]") == (
        "expected block tools.t.when[2], got tools.t.when[1]",
    )
    assert case({}, block="tools.t.when[1]") == (
        "expected block tools.t.when[1], got none (no when block decided)",
    )


def requested(approval_id: str, tool: str, params: dict[str, Any], decision: str) -> Requested:
    data = {"toolName": tool, "parameters": params, "surface": {"type": "dashboard", "userId": "u_1"}}
    return Requested(approval_id, "demo", 0.0, json.dumps({**data, "decision": decision}))


def test_replay_decides_again_by_the_blocks_and_skips_what_the_record_hid() -> None:
    rows = [
        requested("apv_1", "Bash", {"command": "git status"}, "ask_always:dashboard"),
        requested("apv_2", "Bash", {"command": "git push"}, "ask_always:dashboard"),
        requested("apv_3", "Bash", {"command": "rm -rf /"}, "ask_always:dashboard"),
        # As recorded: a bearer token in the command was masked, so no block can read it.
        requested("apv_4", "Bash", {"command": "curl -H 'x: [hidden: bearer token, 40 chars]'"}, "none"),
        requested("apv_5", "Bash", {"command": "[REDACTED]"}, "none"),
    ]
    found = replay(rows, load_policy_file(EXAMPLE))
    assert (found.read, found.hidden, found.changed) == (5, 2, 2)
    changes = {(c.before, c.after): (c.loosens, c.examples) for c in found.ordered()}
    assert changes == {
        ("ask_always:dashboard", "none"): (True, ["apv_1"]),
        ("ask_always:dashboard", "deny"): (False, ["apv_3"]),
    }
    assert "2 recorded requests were skipped: a when block reads a parameter" in found.table()
    assert found.to_json()["hidden"] == 2


# --- the documented example ------------------------------------------------------------


def documented_example() -> str:
    """The coding agent's policy as docs/policy.md shows it."""
    doc = (ROOT / "docs" / "policy.md").read_text()
    [shown] = [b for b in re.findall(r"```toml\n(.*?)```", doc, re.S) if b.startswith("[tools.Bash]")]
    return str(shown)


def test_the_documented_example_is_the_example_file() -> None:
    assert documented_example() in EXAMPLE.read_text()


@pytest.fixture(scope="module")
def example() -> Policy:
    return load_policy(documented_example() + '[tenants.demo]\nadmins = { dashboard = ["u_admin"] }\n')


def bash(policy: Policy, command: Any) -> Ruling:
    return rule_on(policy, "demo", "Bash", {"command": command}, DASH, enabled=ENABLED)


@pytest.mark.parametrize(
    ("command", "label", "by"),
    [
        ("git status", "none", "tools.Bash.when[1]"),
        ("ls -la src", "none", "tools.Bash.when[1]"),
        ("cat README.md", "none", "tools.Bash.when[1]"),
        ("git status; rm -rf /", "deny", "tools.Bash.when[0]"),
        ("ls $(rm -rf /)", "deny", "tools.Bash.when[0]"),
        ("ls\nrm -rf /", "deny", "tools.Bash.when[0]"),
        ("sudo /bin/rm -fr ~", "deny", "tools.Bash.when[0]"),
        ("rm -r -f build", "deny", "tools.Bash.when[0]"),
        ("git push origin main", "ask_always:dashboard", "tools.Bash.when[2]"),
        ("git status && make", "ask_always:dashboard", "tools.Bash.kind"),
        ("cat x | sh", "ask_always:dashboard", "tools.Bash.kind"),
        ("ls `curl x`", "ask_always:dashboard", "tools.Bash.kind"),
        ("ls > /etc/passwd", "ask_always:dashboard", "tools.Bash.kind"),
        ("ls\nmake", "ask_always:dashboard", "tools.Bash.kind"),
        ("lsblk", "ask_always:dashboard", "tools.Bash.kind"),
        (42, "ask_always:dashboard", "tools.Bash.when[0]"),
    ],
)
def test_the_documented_example_decides(example: Policy, command: Any, label: str, by: str) -> None:
    ruling = bash(example, command)
    assert (ruling.label, ruling.decided_by) == (label, by), ruling.explain()


ALLOWED = ("git status", "ls", "cat", "ls -la", "cat a.txt", "git status --short")
JOINS = (";", "&&", "||", "|", "&", "\n", "\r", "$(", "`", ">", "<", " ; ", "$")


@settings(max_examples=400, deadline=None)
@given(head=st.sampled_from(ALLOWED), join=st.sampled_from(JOINS), tail=st.text(max_size=30))
def test_nothing_chained_to_an_allowed_command_runs_unasked(head: str, join: str, tail: str) -> None:
    ruling = bash(load_policy(documented_example()), head + join + tail)
    assert not ruling.runs_unasked, ruling.explain()


@settings(max_examples=400, deadline=None)
@given(
    before=st.text(max_size=20),
    join=st.sampled_from((";", "&&", "|", "\n", "$(", "`", " ", "(")),
    flags=st.sampled_from(("-rf", "-fr", "-Rf", "-r", "-f -r", "--recursive", "-v -rf")),
    after=st.text(max_size=20),
)
def test_a_recursive_rm_anywhere_is_denied(before: str, join: str, flags: str, after: str) -> None:
    ruling = bash(load_policy(documented_example()), f"{before}{join}rm {flags} {after}")
    assert ruling.deny and ruling.decided_by == "tools.Bash.when[0]", ruling.explain()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=5,
)


@settings(max_examples=500, deadline=None)
@given(value=JSON)
def test_a_number_block_allows_only_numbers_in_range(value: Any) -> None:
    ruling = run(load_policy(POLICY), {"amount": value})
    number = isinstance(value, int | float) and not isinstance(value, bool)
    assert ruling.runs_unasked == (number and 0 < value < 100)
    assert not ruling.deny
    if not number:
        assert ruling.unevaluable is not None and ruling.mode is ApprovalMode.ASK_ALWAYS

"""`cosigner policy to-cedar`: the Cedar it prints decides as the TOML does, on every case of
the sample policy's test file and on 2,000 generated calls; what Cedar cannot say is refused."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.policy import Policy, load_cases, load_policy, rule_on
from bot.policy.cases import ENABLED, assumed_sender, parse_surface
from bot.policy.decision import Ruling
from bot.policy.to_cedar import to_cedar, with_cedar
from contracts.errors import PolicyError

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "bot/dev/sandbox_policy.toml"
SAMPLE_TESTS = ROOT / "bot/dev/sandbox_policy.tests.toml"

RICH = """
[defaults]
timeout = "10m"
sms_timeout = "1h"

[tools.lookup_order]
kind = "read"

[tools.issue_refund]
kind = "danger"
approvers = ["requester", "tenant_admins"]
deny_above = { parameter = "amountCents", value = 500000 }
timeout = "5m"

[tools.deploy]
kind = "write"
confirm = true
[[tools.deploy.when]]
match = { env = { equals = "prod" }, version = { prefix = "v0.*" } }
then = "deny"
reason = "no pre-1.0 builds in prod"
[[tools.deploy.when]]
match = { env = { in = ["dev", "test"] }, replicas = { below = 3 } }
then = "allow"
[[tools.deploy.when]]
match = { replicas = { above = 10.5 } }
then = "ask"
approvers = ["tenant_admins"]
quorum = 2

[tools.wipe]
kind = "danger"
deny = true

[tools.note]
kind = "write"

[tenants.demo]
slack_team = "T0DEMO"
sms_from = "+15550100001"
admins = { slack = ["U0ADMIN", "U0ADMIN2"], sms = ["+15550100009", "+15550100008"] }
admin_channel = "C0ADMINS"
[tenants.demo.tools.lookup_order]
confirm = true
[tenants.demo.tools.issue_refund]
approvers = ["tenant_admins"]
quorum = 2
allow_below = { parameter = "amountCents", value = 1000.5 }

[tenants.strict]
gate_all = true
slack_team = "T0STRICT"
admins = { slack = ["U0S1", "U0S2"] }
admin_channel = "C0SADMIN"
"""


def pair(text: str, folder: Path, source: str = "policy.toml") -> tuple[Policy, Policy]:
    """The TOML policy, and the same decided by its Cedar translation (as `serve` loads it)."""
    toml = load_policy(text, source=source, base=folder)
    policies, schema = to_cedar(toml)
    (folder / "p.cedar").write_text(policies, encoding="utf-8")
    (folder / "p.cedarschema").write_text(schema, encoding="utf-8")
    cedar = with_cedar(tomllib.loads(text), folder, "p.cedar", "p.cedarschema", source)
    return toml, cedar


def compared(r: Ruling) -> dict[str, Any]:
    """What a decision is, without how it is explained (key paths differ between the sources)."""
    said = r.to_json()
    for key in ("rule", "steps", "block", "unevaluable"):
        said.pop(key, None)
    said["refused"] = said["refused"] is not None
    if said["decision"] in ("none", "deny"):
        # Nobody is asked: who would approve, and how many, has no effect.
        said.pop("quorum")
        said.pop("separateDuties")
    if said["decision"] == "deny":
        said.pop("mode")  # a refused call has no approval mode
    return said


def both(
    toml: Policy, cedar: Policy, tenant: str, tool: str, params: dict[str, Any], surface: str | None
) -> None:
    parsed = parse_surface(surface) if surface else None
    kw: dict[str, Any] = {"enabled": ENABLED, "sms": assumed_sender(), "now": 1_800_000_000.0}
    a = rule_on(toml, tenant, tool, params, parsed, **kw)
    b = rule_on(cedar, tenant, tool, params, parsed, agent="key_1", **kw)
    assert compared(b) == compared(a), f"{tenant}/{tool} {params} {surface}\n{a.explain()}\n{b.explain()}"


def test_the_sample_policy_decides_the_same_on_every_case_of_its_tests(tmp_path: Path) -> None:
    toml, cedar = pair(SAMPLE.read_text(encoding="utf-8"), tmp_path, str(SAMPLE))
    cases = load_cases(SAMPLE_TESTS)
    assert len(cases) >= 9
    for case in cases:
        both(toml, cedar, case.tenant, case.tool, dict(case.params), case.surface)


def test_the_sample_policys_operation_is_decided_the_same(tmp_path: Path) -> None:
    from bot.policy import cedar_rule
    from bot.policy.rules import operation_tool_rule

    toml, cedar = pair(SAMPLE.read_text(encoding="utf-8"), tmp_path, str(SAMPLE))
    assert cedar.cedar is not None
    for tenant in ("demo", ""):
        for name in toml.operations:
            found, again = toml.operation_rule(tenant, name), cedar.operation_rule(tenant, name)
            assert found is not None and again is not None
            a = operation_tool_rule(found, False)
            b = cedar_rule(
                cedar.cedar, operation_tool_rule(again, False), tenant, {}, None, "k", 0.0, "operation"
            )[0]
            assert (b.deny, b.mode, b.approvers, b.quorum, b.timeout) == (
                a.deny,
                a.mode,
                a.approvers,
                a.quorum,
                a.timeout,
            )


SURFACES = [
    None,
    "slack:T0DEMO/C0SUPPORT/U0ALICE",
    "slack:T0STRICT/C0X/U0BOB",
    "sms:+15550100002",
    "schedule",
    "dashboard:u_1",
]
TOOLS = ["lookup_order", "issue_refund", "deploy", "wipe", "note", "unknown_tool"]

params_strategy = st.fixed_dictionaries(
    {},
    optional={
        "amountCents": st.integers(min_value=-5, max_value=600000)
        | st.sampled_from([0, 999, 1000, 1001, 500000, 500001]),
        "env": st.sampled_from(["prod", "dev", "test", "staging", "Prod"]),
        "version": st.sampled_from(["v0.*1", "v0.1", "v1.0", "v0.*", "", "x"]),
        "replicas": st.integers(min_value=-1, max_value=20),
        "orderId": st.text(max_size=5),
    },
)


@pytest.fixture(scope="module")
def rich(tmp_path_factory: pytest.TempPathFactory) -> tuple[Policy, Policy]:
    return pair(RICH, tmp_path_factory.mktemp("rich"))


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    tenant=st.sampled_from(["demo", "strict", "", "other"]),
    tool=st.sampled_from(TOOLS),
    params=params_strategy,
    surface=st.sampled_from(SURFACES),
)
def test_generated_calls_are_decided_the_same(
    rich: tuple[Policy, Policy], tenant: str, tool: str, params: dict[str, Any], surface: str | None
) -> None:
    both(*rich, tenant, tool, params, surface)


@pytest.mark.parametrize(
    ("section", "key"),
    [
        (
            '[tools.Bash]\nkind = "danger"\n[[tools.Bash.when]]\n'
            'match = { command = { matches = "ls.*" } }\nthen = "allow"\n',
            "tools.Bash.when[0].match.command.matches",
        ),
        (
            '[tools.x]\nkind = "danger"\ndeny_above = { parameter = "a", value = 5, digits = true }\n',
            "tools.x.deny_above.digits",
        ),
        (
            '[tools.x]\nkind = "danger"\ndeny_above = { parameter = "order.amount", value = 5 }\n',
            "tools.x.deny_above",
        ),
        (
            '[tools.x]\nkind = "danger"\nallow_below = { parameter = "a", value = 5 }\n'
            "[tenants.t]\ngate_all = true\n",
            "tools.x.allow_below",
        ),
    ],
)
def test_what_cedar_cannot_say_is_refused_naming_the_key(section: str, key: str) -> None:
    with pytest.raises(PolicyError) as caught:
        to_cedar(load_policy(section))
    assert any(p.startswith(key) for p in caught.value.problems), caught.value.problems


def test_the_command_prints_policies_and_schema_that_validate(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bot.cli", "policy", "to-cedar", str(SAMPLE), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert "tools.close_account.quorum" in out.stdout  # named among the keys Cedar now decides
    check = subprocess.run(
        [sys.executable, "-m", "bot.cli", "policy", "check", str(tmp_path / "sandbox_policy.cedar")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert check.returncode == 0, check.stderr
    assert "validated against sandbox_policy.cedarschema" in check.stdout

"""The policy file: modes, tenant overrides, validation with key paths, durations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.policy.durations import format_duration, parse_duration
from bot.policy.rules import Policy, Threshold, load_policy, load_policy_file
from contracts.enums import ApprovalMode, ApproverKind, SurfaceType, ToolKind
from contracts.errors import PolicyError

REPO = Path(__file__).resolve().parents[2]


def dump_toml(doc: dict[str, Any]) -> str:
    """A tiny TOML writer: every top-level key as one inline table (JSON strings are TOML)."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + " }"
        raise TypeError(v)

    return "\n".join(f"{json.dumps(k)} = {value(v)}" for k, v in doc.items()) + "\n"


def problems_of(text: str) -> list[str]:
    with pytest.raises(PolicyError) as info:
        load_policy(text)
    assert info.value.problems, "a PolicyError must list its problems"
    return info.value.problems


def has_problem(problems: list[str], path: str, *words: str) -> bool:
    return any(p.startswith(f"{path}:") and all(w.lower() in p.lower() for w in words) for p in problems)


def expected_mode(kind: str | None, confirm: Any, gate_all: bool) -> ApprovalMode:
    """The published table of approval modes, written out independently of the code."""
    if confirm == "always":
        mode = ApprovalMode.ASK_ALWAYS
    elif confirm is False:
        mode = ApprovalMode.NONE
    elif kind in ("danger", None):
        mode = ApprovalMode.ASK_ALWAYS
    elif confirm is True:
        mode = ApprovalMode.ASK
    else:
        mode = ApprovalMode.NONE
    if gate_all and mode is ApprovalMode.NONE:
        return ApprovalMode.ASK
    return mode


# --- the mode table -------------------------------------------------------------------

MODES = """
[tools.r]
kind = "read"
[tools.w]
kind = "write"
[tools.wc]
kind = "write"
confirm = true
[tools.wa]
kind = "write"
confirm = "always"
[tools.ra]
kind = "read"
confirm = "always"
[tools.d]
kind = "danger"
[tools.dc]
kind = "danger"
confirm = true
[tools.dn]
kind = "danger"
confirm = false
[tools.wn]
kind = "write"
confirm = false

[tenants.strict]
gate_all = true
"""


@pytest.mark.parametrize(
    ("tool", "mode"),
    [
        ("r", ApprovalMode.NONE),
        ("w", ApprovalMode.NONE),
        ("wc", ApprovalMode.ASK),
        ("wa", ApprovalMode.ASK_ALWAYS),
        ("ra", ApprovalMode.ASK_ALWAYS),
        ("d", ApprovalMode.ASK_ALWAYS),
        ("dc", ApprovalMode.ASK_ALWAYS),
        ("dn", ApprovalMode.NONE),
        ("wn", ApprovalMode.NONE),
    ],
)
def test_mode_table(tool: str, mode: ApprovalMode) -> None:
    policy = load_policy(MODES)
    assert policy.rule_for("acme", tool).mode is mode
    assert policy.rule_for("acme", tool).source == f"tools.{tool}"


def test_unknown_tool_is_danger_and_asks_always() -> None:
    policy = load_policy(MODES)
    rule = policy.rule_for("acme", "launch_rocket")
    assert rule.kind is ToolKind.DANGER
    assert rule.mode is ApprovalMode.ASK_ALWAYS
    assert "launch_rocket" in rule.source and "danger" in rule.source
    empty = load_policy("")
    assert empty.rule_for("anyone", "lookup_order").mode is ApprovalMode.ASK_ALWAYS


@pytest.mark.parametrize(
    ("tool", "plain", "gated"),
    [
        ("r", ApprovalMode.NONE, ApprovalMode.ASK),
        ("wn", ApprovalMode.NONE, ApprovalMode.ASK),
        ("dn", ApprovalMode.NONE, ApprovalMode.ASK),
        ("wc", ApprovalMode.ASK, ApprovalMode.ASK),
        ("d", ApprovalMode.ASK_ALWAYS, ApprovalMode.ASK_ALWAYS),
    ],
)
def test_gate_all_raises_none_to_ask_only(tool: str, plain: ApprovalMode, gated: ApprovalMode) -> None:
    policy = load_policy(MODES)
    assert policy.rule_for("other", tool).mode is plain
    assert policy.rule_for("strict", tool).mode is gated


# --- tenant overrides -------------------------------------------------------------------

OVERRIDES = """
[defaults]
timeout = "5m"
sms_timeout = "2h"
slack_timeout = "10m"
max_timeout = "1h"
max_gated_calls_per_execution = 7

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]
redact = ["cardToken", "customer.email"]
timeout = "15m"

[tools.issue_credit]
kind = "write"
confirm = true

[tools.lookup_order]
kind = "read"

[staff]
users = ["U0OPS1"]

[tenants.acme]
slack_team = "T0ACME"
slack_enterprise = "E0ACME"
sms_from = "+15550000001"
max_gated_calls_per_execution = 50

[tenants.acme.tools.issue_refund]
approvers = ["tenant_admins", "staff"]
redact = ["items.*.iban"]
allow_below = { parameter = "amountCents", value = 5000 }

[tenants.acme.tools.issue_credit]
confirm = false

[tenants.acme.tools.special]
kind = "write"
confirm = "always"

[tenants.globex]
slack_team = "T0GLOBEX"
sms_messaging_service = "MG0GLOBEX"
"""


def test_override_merges_field_by_field() -> None:
    policy = load_policy(OVERRIDES)
    rule = policy.rule_for("acme", "issue_refund")
    assert rule.kind is ToolKind.DANGER, "kind comes from [tools.issue_refund]"
    assert rule.approvers == (ApproverKind.TENANT_ADMINS, ApproverKind.STAFF)
    assert rule.timeout == 15 * 60, "timeout comes from the tool section"
    assert rule.allow_below == Threshold("amountCents", 5000.0)
    assert rule.source == "tenants.acme.tools.issue_refund"
    plain = policy.rule_for("globex", "issue_refund")
    assert plain.approvers == (ApproverKind.REQUESTER,)
    assert plain.allow_below is None
    assert plain.source == "tools.issue_refund"


def test_override_redact_paths_add_up() -> None:
    policy = load_policy(OVERRIDES)
    assert set(policy.rule_for("acme", "issue_refund").redact) == {
        "cardToken",
        "customer.email",
        "items.*.iban",
    }
    assert set(policy.rule_for("globex", "issue_refund").redact) == {"cardToken", "customer.email"}


def test_override_can_lower_and_add_tools() -> None:
    policy = load_policy(OVERRIDES)
    assert policy.rule_for("acme", "issue_credit").mode is ApprovalMode.NONE
    assert policy.rule_for("globex", "issue_credit").mode is ApprovalMode.ASK
    assert policy.rule_for("acme", "special").mode is ApprovalMode.ASK_ALWAYS
    assert policy.rule_for("acme", "special").kind is ToolKind.WRITE
    assert policy.rule_for("globex", "special").kind is ToolKind.DANGER, "only acme knows it"


def test_allow_below_parses_int_and_float() -> None:
    policy = load_policy("""
[tools.pay]
kind = "danger"
allow_below = { parameter = "amount", value = 12.5 }
""")
    assert policy.rule_for("t", "pay").allow_below == Threshold("amount", 12.5)
    assert policy.rule_for("t", "pay").mode is ApprovalMode.ASK_ALWAYS


@pytest.mark.parametrize(
    ("allow", "path", "word"),
    [
        ('{ parameter = "amount" }', "tools.pay.allow_below.value", "missing"),
        ("{ value = 5 }", "tools.pay.allow_below.parameter", "missing"),
        ('{ parameter = "amount", value = "5" }', "tools.pay.allow_below.value", "number"),
        ('{ parameter = "amount", value = true }', "tools.pay.allow_below.value", "number"),
        ('{ parameter = "", value = 5 }', "tools.pay.allow_below.parameter", "path"),
        ('{ parameter = "amount", value = 5, extra = 1 }', "tools.pay.allow_below.extra", "unknown key"),
        ("5000", "tools.pay.allow_below", "table"),
    ],
)
def test_allow_below_rejects_bad_shapes(allow: str, path: str, word: str) -> None:
    problems = problems_of(f'[tools.pay]\nkind = "danger"\nallow_below = {allow}\n')
    assert has_problem(problems, path, word), problems


def test_timeout_for_order_of_precedence() -> None:
    policy = load_policy(OVERRIDES)
    refund = policy.rule_for("acme", "issue_refund")
    credit = policy.rule_for("acme", "issue_credit")
    assert policy.timeout_for(refund, SurfaceType.SMS, None) == 15 * 60, (
        "the tool's timeout beats the surface's"
    )
    assert policy.timeout_for(credit, SurfaceType.SMS, None) == 2 * 3600
    assert policy.timeout_for(credit, SurfaceType.SLACK, None) == 10 * 60
    assert policy.timeout_for(credit, SurfaceType.DASHBOARD, None) == 5 * 60
    assert policy.timeout_for(credit, SurfaceType.SLACK, 120) == 120, "the agent may ask for less"
    assert policy.timeout_for(refund, SurfaceType.SLACK, 99999) == 3600, "capped at max_timeout"


def test_default_timeouts_without_a_defaults_section() -> None:
    policy = load_policy('[tools.a]\nkind = "write"\nconfirm = true\n')
    rule = policy.rule_for("t", "a")
    assert policy.timeout_for(rule, SurfaceType.SLACK, None) == 300
    assert policy.timeout_for(rule, SurfaceType.SMS, None) == 3600
    assert policy.max_gated_calls("t") == 20


def test_max_gated_calls_per_tenant() -> None:
    policy = load_policy(OVERRIDES)
    assert policy.max_gated_calls("acme") == 50
    assert policy.max_gated_calls("globex") == 7
    assert policy.max_gated_calls("nobody") == 7


def test_tenant_for_org() -> None:
    policy = load_policy(OVERRIDES)
    assert policy.tenant_for_org(SurfaceType.SLACK, "T0ACME") == "acme"
    assert policy.tenant_for_org(SurfaceType.SLACK, "E0ACME") == "acme"
    assert policy.tenant_for_org(SurfaceType.SLACK, "T0GLOBEX") == "globex"
    assert policy.tenant_for_org(SurfaceType.SMS, "+15550000001") == "acme"
    assert policy.tenant_for_org(SurfaceType.SMS, "MG0GLOBEX") == "globex"
    assert policy.tenant_for_org(SurfaceType.SLACK, "T0NOBODY") is None
    assert policy.tenant_for_org(SurfaceType.SMS, "T0ACME") is None, "a Slack team is not a number"
    assert policy.tenant_for_org(SurfaceType.SLACK, "+15550000001") is None


# --- validation -----------------------------------------------------------------------------


def test_every_problem_is_reported_at_once_with_its_key_path() -> None:
    problems = problems_of("""
typo_top = 1

[defaults]
timeout = "5 minutes"
max_gated_calls_per_execution = 0
colour = "blue"

[tools.a]
kind = "dangerous"
confirm = "yes"

[tools.b]
approvers = ["boss"]
redact = ["customer..email"]
timeout = 30

[tools.c]
kind = "read"
deny = "yes"
colour = "red"

[tenants.acme]
sms_from = "555-1234"
gate_all = "yes"
admins = { slack = "U0ADMIN", sms = ["12345"], fax = ["1"] }

[tenants.acme.headless]
route = "everyone"
""")
    expected = [
        ("typo_top", "unknown key"),
        ("defaults.timeout", "5 minutes"),
        ("defaults.max_gated_calls_per_execution", "1"),
        ("defaults.colour", "unknown key"),
        ("tools.a.kind", "dangerous"),
        ("tools.a.confirm", "always"),
        ("tools.b.kind", "missing"),
        ("tools.b.approvers", "boss"),
        ("tools.b.redact", "customer..email"),
        ("tools.b.timeout", "unit"),
        ("tools.c.deny", "true or false"),
        ("tools.c.colour", "unknown key"),
        ("tenants.acme.sms_from", "E.164"),
        ("tenants.acme.gate_all", "true or false"),
        ("tenants.acme.admins.slack", "list"),
        ("tenants.acme.admins.sms", "12345"),
        ("tenants.acme.admins.fax", "unknown key"),
        ("tenants.acme.headless.route", "tenant_admins"),
    ]
    for path, word in expected:
        assert has_problem(problems, path, word), f"{path} not reported in {problems}"
    assert len(problems) >= len(expected)


def test_policy_error_message_lists_problems_and_source(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[tools.a]\nkind = "nope"\n[tools.b]\nkind = "read"\nconfirm = 1\n')
    with pytest.raises(PolicyError) as info:
        load_policy_file(path)
    assert info.value.source == str(path)
    text = str(info.value)
    assert str(path) in text
    assert "tools.a.kind" in text and "tools.b.confirm" in text
    assert "2 problem" in text


def test_unreadable_file_and_bad_toml_are_policy_errors(tmp_path: Path) -> None:
    with pytest.raises(PolicyError) as info:
        load_policy_file(tmp_path / "missing.toml")
    assert "missing.toml" in info.value.problems[0]
    problems = problems_of("[tools.a\nkind = 'read'")
    assert "TOML" in problems[0]


@pytest.mark.parametrize(
    ("section", "path"),
    [
        ("", "colour"),
        ("[defaults]\n", "defaults.colour"),
        ('[tools.a]\nkind = "read"\n', "tools.a.colour"),
        ("[tenants.acme]\n", "tenants.acme.colour"),
        ('[tenants.acme.headless]\nroute = "tenant_admins"\n', "tenants.acme.headless.colour"),
        ('[tenants.acme.admins]\nslack = ["U1"]\n', "tenants.acme.admins.colour"),
        ('[tenants.acme.tools.a]\nkind = "read"\n', "tenants.acme.tools.a.colour"),
        ('[staff]\nusers = ["U1"]\n', "staff.colour"),
    ],
)
def test_unknown_keys_are_errors_but_x_keys_are_not(section: str, path: str) -> None:
    assert has_problem(problems_of(f'{section}colour = "red"\n'), path, "unknown key", "x_")
    policy = load_policy(f'{section}x_colour = "red"\n')
    assert isinstance(policy, Policy)


def test_staff_named_without_a_staff_section() -> None:
    text = """
[tools.a]
kind = "danger"
approvers = ["staff"]

[tools.b]
kind = "danger"

[tenants.acme.headless]
route = "staff"
"""
    problems = problems_of(text)
    assert has_problem(problems, "tools.a.approvers", "staff")
    assert has_problem(problems, "tenants.acme.headless.route", "staff")
    assert load_policy(text + '\n[staff]\nusers = ["U0OPS1"]\n')


def test_staff_named_in_a_tenant_override_without_a_staff_section() -> None:
    text = """
[tools.a]
kind = "danger"

[tenants.acme.tools.a]
approvers = ["tenant_admins", "staff"]
"""
    assert has_problem(problems_of(text), "tenants.acme.tools.a.approvers", "staff")
    assert load_policy(text + '\n[staff]\nusers = ["U0OPS1"]\n')


@pytest.mark.parametrize(
    "key,value",
    [
        ("slack_team", '"T0SAME"'),
        ("slack_enterprise", '"E0SAME"'),
        ("sms_from", '"+15550000001"'),
        ("sms_messaging_service", '"MG0SAME"'),
    ],
)
def test_a_workspace_or_number_belongs_to_one_tenant(key: str, value: str) -> None:
    problems = problems_of(f"[tenants.acme]\n{key} = {value}\n[tenants.globex]\n{key} = {value}\n")
    assert any("tenants.acme" in p and "tenants.globex" in p for p in problems), problems
    # The same tenant naming it twice (team and enterprise) is fine.
    assert load_policy('[tenants.acme]\nslack_team = "X1"\nslack_enterprise = "X1"\n')


def test_tenant_override_of_an_unknown_tool_needs_a_kind() -> None:
    problems = problems_of("[tenants.acme.tools.mystery]\nconfirm = true\n")
    assert has_problem(problems, "tenants.acme.tools.mystery.kind", "missing")
    # Overriding a known tool does not repeat its kind.
    assert load_policy('[tools.a]\nkind = "read"\n[tenants.acme.tools.a]\nconfirm = true\n')


@pytest.mark.parametrize(
    "text,path",
    [
        ('[tools.a]\nkind = ["read"]\n', "tools.a.kind"),
        ('[tools.a]\nkind = "read"\napprovers = 5\n', "tools.a.approvers"),
        ('[tools.a]\nkind = "read"\napprovers = []\n', "tools.a.approvers"),
        ('[tenants.acme]\nslack_team = ["T0"]\n', "tenants.acme.slack_team"),
        ('[tenants.acme]\nsms_from = ["+15550000001"]\n', "tenants.acme.sms_from"),
        ('[tenants.acme]\nslack_enterprise = { id = "E0" }\n', "tenants.acme.slack_enterprise"),
        ("tools = 5\n", "tools"),
        ("[tenants]\nacme = 5\n", "tenants.acme"),
        ("staff = []\n", "staff"),
    ],
)
def test_wrongly_typed_values_are_problems_not_crashes(text: str, path: str) -> None:
    assert has_problem(problems_of(text), path)


# Arbitrary TOML-shaped documents over the policy's own key names: loading either returns a
# Policy or raises PolicyError; it never crashes with some other exception.
_scalars = st.one_of(
    st.booleans(),
    st.integers(-3, 10**6),
    st.sampled_from(
        [
            "read",
            "write",
            "danger",
            "always",
            "staff",
            "tenant_admins",
            "requester",
            "5m",
            "0s",
            "+15550000001",
            "T0",
            "",
            "a..b",
            "amountCents",
        ]
    ),
)
_names = st.sampled_from(
    sorted(
        {
            "kind",
            "confirm",
            "approvers",
            "redact",
            "timeout",
            "deny",
            "deny_reason",
            "allow_below",
            "parameter",
            "value",
            "slack_team",
            "slack_enterprise",
            "sms_from",
            "admins",
            "slack",
            "sms",
            "dashboard",
            "headless",
            "route",
            "gate_all",
            "max_gated_calls_per_execution",
            "users",
            "channel",
            "tools",
            "x_note",
            "sms_timeout",
            "max_timeout",
            "grant_ttl",
        }
    )
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_names, inner, max_size=4)),
    max_leaves=12,
)
_documents = st.fixed_dictionaries(
    {},
    optional={
        "defaults": st.dictionaries(_names, _values, max_size=4),
        "tools": st.dictionaries(
            st.sampled_from(["a", "b"]), st.dictionaries(_names, _values, max_size=5), max_size=2
        ),
        "tenants": st.dictionaries(
            st.sampled_from(["acme", "globex"]), st.dictionaries(_names, _values, max_size=5), max_size=2
        ),
        "staff": st.dictionaries(_names, _values, max_size=3),
    },
)


@settings(max_examples=300, deadline=None)
@given(_documents)
def test_any_document_loads_or_raises_policy_error(doc: dict[str, Any]) -> None:
    try:
        policy = load_policy(dump_toml(doc))
    except PolicyError as exc:
        assert all(isinstance(p, str) and ": " in p for p in exc.problems)
        return
    for tool in doc.get("tools", {}):
        policy.rule_for("acme", tool).mode  # noqa: B018 - must not raise for a loaded policy


# --- generated valid policies ------------------------------------------------------------

_kinds = st.sampled_from(["read", "write", "danger"])
_confirms = st.sampled_from([None, True, False, "always"])
_approvers = st.lists(
    st.sampled_from(["requester", "tenant_admins", "staff"]), min_size=1, max_size=3, unique=True
)


@st.composite
def valid_policies(draw: st.DrawFn) -> dict[str, Any]:
    tool_names = draw(
        st.lists(st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True), min_size=1, max_size=5, unique=True)
    )
    tools: dict[str, Any] = {}
    for name in tool_names:
        section: dict[str, Any] = {"kind": draw(_kinds)}
        confirm = draw(_confirms)
        if confirm is not None:
            section["confirm"] = confirm
        if draw(st.booleans()):
            section["approvers"] = draw(_approvers)
        if draw(st.booleans()):
            section["timeout"] = f"{draw(st.integers(1, 500))}{draw(st.sampled_from('smhd'))}"
        tools[name] = section
    tenants: dict[str, Any] = {}
    for i, tenant in enumerate(
        draw(st.lists(st.sampled_from(["acme", "globex", "initech"]), max_size=3, unique=True))
    ):
        section = {"slack_team": f"T{i}", "gate_all": draw(st.booleans())}
        overrides: dict[str, Any] = {}
        for name in draw(st.lists(st.sampled_from(tool_names), max_size=3, unique=True)):
            o: dict[str, Any] = {}
            if draw(st.booleans()):
                o["kind"] = draw(_kinds)
            confirm = draw(_confirms)
            if confirm is not None:
                o["confirm"] = confirm
            overrides[name] = o
        if overrides:
            section["tools"] = overrides
        tenants[tenant] = section
    doc: dict[str, Any] = {"tools": tools, "staff": {"users": ["U0OPS"]}}
    if tenants:
        doc["tenants"] = tenants
    return doc


@settings(max_examples=150, deadline=None)
@given(valid_policies())
def test_generated_valid_policies_load_and_keep_their_modes(doc: dict[str, Any]) -> None:
    policy = load_policy(dump_toml(doc))
    for tenant in [*doc.get("tenants", {}), "nobody"]:
        tsec = doc.get("tenants", {}).get(tenant, {})
        for name, base in doc["tools"].items():
            merged = {**base, **tsec.get("tools", {}).get(name, {})}
            rule = policy.rule_for(tenant, name)
            assert rule.kind.value == merged["kind"]
            assert rule.mode is expected_mode(
                merged["kind"], merged.get("confirm"), tsec.get("gate_all", False)
            )
            assert [a.value for a in rule.approvers] == merged.get("approvers", ["requester"])
            if "timeout" in merged:
                assert rule.timeout == parse_duration(merged["timeout"])
        assert policy.rule_for(tenant, "zz_not_a_tool").mode is ApprovalMode.ASK_ALWAYS


# --- durations ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("45s", 45), ("5m", 300), ("1h", 3600), ("2d", 172800), ("1.5h", 5400), (" 10m ", 600)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "bad",
    [
        "5",
        "m",
        "5x",
        "-5s",
        "5mm",
        "",
        "five minutes",
        "5 minutes",
        "0s",
        "0m",
        "s5",
        "1e3s",
        5,
        5.0,
        True,
        None,
        ["5m"],
    ],
)
def test_bad_durations_are_rejected_with_a_hint(bad: object) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(bad)
    message = str(info.value)
    assert any(hint in message for hint in ('"5m"', "unit", "zero")), message


@given(st.integers(1, 10**7), st.sampled_from([("s", 1), ("m", 60), ("h", 3600), ("d", 86400)]))
def test_generated_durations_parse_to_the_right_seconds(n: int, unit: tuple[str, int]) -> None:
    assert parse_duration(f"{n}{unit[0]}") == n * unit[1]


@given(st.integers(1, 10**8))
def test_format_duration_round_trips(seconds: int) -> None:
    assert parse_duration(format_duration(seconds)) == seconds


# --- the shipped example -------------------------------------------------------------------


def test_policy_example_loads() -> None:
    policy = load_policy_file(REPO / "policy.example.toml")
    assert policy.rule_for("acme", "lookup_order").mode is ApprovalMode.NONE
    assert policy.rule_for("acme", "issue_credit").mode is ApprovalMode.ASK
    assert policy.rule_for("acme", "issue_refund").mode is ApprovalMode.ASK_ALWAYS
    assert policy.rule_for("acme", "issue_refund").allow_below == Threshold("amountCents", 5000)
    assert policy.rule_for("acme", "send_email").mode is ApprovalMode.ASK_ALWAYS
    assert policy.rule_for("acme", "delete_account").deny
    assert policy.tenant("acme").headless_route is ApproverKind.TENANT_ADMINS
    assert policy.staff is not None and policy.staff.users == ("U0OPS1",)
    assert policy.tenant_for_org(SurfaceType.SLACK, "T0ACME") == "acme"


def test_description_and_display_name_must_be_text() -> None:
    from bot.policy.rules import load_policy
    from contracts.errors import PolicyError

    with pytest.raises(PolicyError) as err:
        load_policy('[tools.a]\nkind = "read"\ndescription = 5\n[tenants.t]\ndisplay_name = ["x"]\n')
    assert {p.split(":")[0] for p in err.value.problems} == {"tools.a.description", "tenants.t.display_name"}


# --- sections that could never match ------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "path", "word"),
    [
        ("[tenants.Acme]\ngate_all = true\n", "tenants.Acme", "tenant name"),
        ("[tenants.acme_corp_]\n[tenants.-acme]\n", "tenants.-acme", "tenant name"),
        ('[tools."issue refund"]\nkind = "read"\n', 'tools."issue refund"', "tool name"),
        ('[tools."a/b"]\nkind = "read"\n', 'tools."a/b"', "tool name"),
        ('[tenants.acme.tools."x y"]\nkind = "read"\n', 'tenants.acme.tools."x y"', "tool name"),
        ('[tenants.acme]\nslack_team = "t0acme"\n', "tenants.acme.slack_team", "Slack id"),
        ('[tenants.acme]\nslack_enterprise = "E0-ACME"\n', "tenants.acme.slack_enterprise", "Slack id"),
        ('[tenants.acme.admins]\nslack = ["u0admin"]\n', "tenants.acme.admins.slack", "u0admin"),
        ('[staff]\nusers = ["U0OPS", "u0ops"]\n', "staff.users", "u0ops"),
        (
            '[tools.pay]\nkind = "danger"\nallow_below = { parameter = "amount", value = 0 }\n',
            "tools.pay.allow_below.value",
            "never",
        ),
        (
            '[tools.pay]\nkind = "danger"\nallow_below = { parameter = "amount", value = -5 }\n',
            "tools.pay.allow_below.value",
            "never",
        ),
        (
            '[tools.pay]\nkind = "danger"\ndeny = true\nallow_below = { parameter = "a", value = 5 }\n',
            "tools.pay.allow_below",
            "deny",
        ),
        (
            '[tools.pay]\nkind = "danger"\n[tenants.acme.tools.pay]\ndeny = true\n'
            'allow_below = { parameter = "a", value = 5 }\n',
            "tenants.acme.tools.pay.allow_below",
            "deny",
        ),
    ],
)
def test_a_name_or_rule_that_could_never_match_is_a_problem(text: str, path: str, word: str) -> None:
    assert has_problem(problems_of(text), path, word), problems_of(text)


def test_a_threshold_a_tenant_can_reach_is_not_refused() -> None:
    policy = load_policy("""
[tools.pay]
kind = "danger"
deny = true
allow_below = { parameter = "amountCents", value = 500 }

[tenants.acme.tools.pay]
deny = false
""")
    assert policy.rule_for("acme", "pay").allow_below == Threshold("amountCents", 500)
    assert not policy.rule_for("acme", "pay").deny
    assert policy.rule_for("globex", "pay").deny


@pytest.mark.parametrize(
    "name",
    ["issue_refund", "billing.refund-v2", "A" * 128, "A" * 129, "a b", "", "ünïcode", "x/y", "a\n"],
)
def test_policy_tool_names_are_the_names_the_api_accepts(name: str) -> None:
    from pydantic import ValidationError

    from contracts.wire import ApprovalRequest

    body = {
        "executionId": "e",
        "toolCallId": "c",
        "toolName": name,
        "parameters": {},
        "surface": {"type": "api"},
    }
    try:
        ApprovalRequest.model_validate(body)
        api_accepts = True
    except ValidationError:
        api_accepts = False
    try:
        load_policy(f'[tools.{json.dumps(name)}]\nkind = "read"\n')
        policy_accepts = True
    except PolicyError:
        policy_accepts = False
    assert policy_accepts == api_accepts


@pytest.mark.parametrize(
    "name", ["acme", "a-1_b", "Acme", "acme.corp", "-acme", "a" * 63, "a" * 64, "acme\n"]
)
async def test_policy_tenant_names_are_the_names_tenants_create_accepts(name: str, tmp_path: Path) -> None:
    from bot.http.tenants import TenantKeys
    from contracts.errors import InvalidRequest
    from storage.database import Database

    db = Database(f"sqlite+aiosqlite:///{tmp_path / 't.db'}")
    try:
        await db.migrate()
        try:
            await TenantKeys(db).create(name)
            cli_accepts = True
        except InvalidRequest:
            cli_accepts = False
    finally:
        await db.close()
    try:
        load_policy(f"[tenants.{json.dumps(name)}]\n")
        policy_accepts = True
    except PolicyError:
        policy_accepts = False
    assert policy_accepts == cli_accepts


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("[defaults]\nmax_gated_calls_per_execution = true\n", "defaults.max_gated_calls_per_execution"),
        (
            "[tenants.acme]\nmax_gated_calls_per_execution = true\n",
            "tenants.acme.max_gated_calls_per_execution",
        ),
        ("[defaults]\nmax_gated_calls_per_execution = 2.0\n", "defaults.max_gated_calls_per_execution"),
        (
            '[tools.pay]\nkind = "danger"\nallow_below = { parameter = "a", value = true }\n',
            "tools.pay.allow_below.value",
        ),
        ('[tools.a]\nkind = "read"\ndeny = 0\n', "tools.a.deny"),
        ("[tenants.acme]\ngate_all = 1\n", "tenants.acme.gate_all"),
        ("[tenants.acme]\nslack_team = 5\n", "tenants.acme.slack_team"),
    ],
)
def test_nothing_is_coerced(text: str, path: str) -> None:
    assert has_problem(problems_of(text), path)


def test_the_policy_is_worked_out_once_and_frozen() -> None:
    from pydantic import ValidationError

    policy = load_policy(OVERRIDES)
    assert policy.rule_for("acme", "issue_refund") is policy.rule_for("acme", "issue_refund")
    assert policy.rule_for("nobody", "issue_refund") is policy.rule_for("other", "issue_refund")
    with pytest.raises(ValidationError):
        policy.tenant("acme").gate_all = True  # type: ignore[misc]
    with pytest.raises(ValidationError):
        policy.defaults.timeout = 1.0  # type: ignore[misc]


def test_cross_section_problems_are_listed_with_value_problems() -> None:
    problems = problems_of("""
[tools.a]
kind = "danger"
approvers = ["staff"]

[tools.b]
kind = "nope"

[tenants.acme.tools.mystery]
confirm = true
""")
    assert has_problem(problems, "tools.b.kind", "nope")
    assert has_problem(problems, "tools.a.approvers", "staff")
    assert has_problem(problems, "tenants.acme.tools.mystery.kind", "missing")


def test_policy_check_and_serve_refuse_a_section_that_could_never_match(tmp_path: Path) -> None:
    from tests.ops.test_cli_errors import run

    bad = tmp_path / "policy.toml"
    bad.write_text((REPO / "policy.example.toml").read_text() + "\n[tenants.Globex]\ngate_all = true\n")
    checked = run({}, "policy", "check", str(bad), tmp_path=tmp_path)
    assert checked.returncode == 2, checked.stdout
    assert "tenants.Globex:" in checked.stderr and "tenant name" in checked.stderr
    served = run({"COSIGNER_POLICY": str(bad)}, "serve", "--port", "1", tmp_path=tmp_path)
    assert served.returncode == 2
    assert "tenants.Globex:" in served.stderr
    assert "Traceback" not in checked.stderr + served.stderr
    good = run({}, "policy", "check", str(REPO / "policy.example.toml"), tmp_path=tmp_path)
    assert good.returncode == 0 and "OK" in good.stdout

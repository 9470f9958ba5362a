"""`[[tools.NAME.when]]` blocks as the policy file reads them: every mistake refused with its
key path, and `policy check` refusing blocks that can never match, paths the tool's
`parameters_schema` rules out, and blocks where they cannot apply."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.policy.rules import load_policy, load_policy_file
from contracts.errors import PolicyError

HEAD = '[tools.Bash]\nkind = "danger"\n'
SCHEMA = (
    'parameters_schema = { type = "object", additionalProperties = false, properties = { '
    'command = { type = "string" }, timeout = { type = "integer" }, '
    'env = { type = "object", properties = { name = { type = "string" } }, '
    "additionalProperties = false } } }\n"
)


def problems(text: str, base: Path | None = None) -> list[str]:
    with pytest.raises(PolicyError) as raised:
        load_policy(text, base=base)
    return raised.value.problems


def block(match: str, then: str = "allow", extra: str = "") -> str:
    return f"[[tools.Bash.when]]\nmatch = {match}\nthen = {then!r}\n{extra}".replace("'", '"')


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            block("{ command = { prefix = 5 } }"),
            'tools.Bash.when[0].match.command.prefix: must be a non-empty string such as "git status"',
        ),
        (
            block("{ command = { prefix = 'ls', bogus = 1 } }"),
            "tools.Bash.when[0].match.command.bogus: unknown key; expected one of above, below, equals, "
            "in, matches, prefix",
        ),
        (
            block("{ timeout = { below = true } }"),
            "tools.Bash.when[0].match.timeout.below: must be a number such as 5000 (true and false are "
            "not numbers)",
        ),
        (block("{ timeout = { above = nan } }"), "tools.Bash.when[0].match.timeout.above: must be a finite"),
        (
            block("{ command = { equals = 'a' } }", "maybe"),
            'tools.Bash.when[0].then: "maybe" is not an outcome; use "allow", "ask" or "deny"',
        ),
        (
            '[[tools.Bash.when]]\nmatch = { command = { equals = "a" } }\n',
            'tools.Bash.when[0].then: missing; set then = "allow", "ask" or "deny"',
        ),
        ('[[tools.Bash.when]]\nthen = "deny"\n', "tools.Bash.when[0]: names no condition; give match = "),
        (block("{}"), "tools.Bash.when[0].match: must be a table of parameter paths"),
        (
            block("{ command = { matches = '(a)\\\\1' } }"),
            "tools.Bash.when[0].match.command.matches: RE2 cannot compile this pattern (invalid escape",
        ),
        (
            block("{ command = { matches = '(?=a).*' } }"),
            "tools.Bash.when[0].match.command.matches: RE2 cannot compile this pattern "
            "(invalid perl operator",
        ),
        (
            block("{ command = { in = ['a', 1] } }"),
            "tools.Bash.when[0].match.command.in: must list values of one type",
        ),
        (block("{ command = { in = [] } }"), "tools.Bash.when[0].match.command.in: must be a non-empty list"),
        (
            block("{ command = { prefix = 'a', below = 3 } }"),
            "tools.Bash.when[0].match.command: conditions on one parameter must read one type, but prefix "
            "reads a string, below reads a number",
        ),
        (block("{ command = {} }"), "tools.Bash.when[0].match.command: names no condition"),
        (
            block("{ 'a..b' = { equals = 1 } }"),
            'tools.Bash.when[0].match."a..b": "a..b" is not a parameter path',
        ),
        (
            # Unquoted, a dotted key is a nested table: the fix is named.
            block("{ env.name = { equals = 'x' } }"),
            "tools.Bash.when[0].match.env.name: unknown key; expected one of above, below, equals, in, "
            "matches, prefix (prefix your own fields with x_); a dotted parameter path is written in quotes",
        ),
        (
            block("{ command = { prefix = 'ls' } }", "allow", 'approvers = ["tenant_admins"]\n'),
            'tools.Bash.when[0].approvers: only a block with then = "ask" takes approvers',
        ),
        (
            block("{ command = { prefix = 'ls' } }", "deny", "quorum = 2\n"),
            'tools.Bash.when[0].quorum: only a block with then = "ask" takes quorum',
        ),
        (
            block("{ command = { prefix = 'ls' } }", "ask", 'reason = "no"\n'),
            'tools.Bash.when[0].reason: only a block with then = "deny" takes reason',
        ),
        (
            block("{ command = { prefix = 'ls' } }", "ask", "quorum = true\n"),
            "tools.Bash.when[0].quorum: must be a whole number ≥ 1",
        ),
        (
            block("{ command = { prefix = 'ls' } }", "ask", "typo = 1\n"),
            "tools.Bash.when[0].typo: unknown key; expected one of annotations, approvers, description, "
            "match, quorum, reason, separate_duties, step_up, then",
        ),
        (
            block("{ command = { prefix = 'ls' } }", "ask", 'approvers = ["staff"]\n'),
            'tools.Bash.when[0].approvers: names "staff" but there is no [staff] section',
        ),
        (
            block("{ command = { prefix = 'ls' } }") + block("{ command = { prefix = 5 } }"),
            "tools.Bash.when[1].match.command.prefix: must be a non-empty string",
        ),
    ],
)
def test_each_mistake_in_a_block_is_refused_with_its_key_path(body: str, said: str) -> None:
    found = problems(HEAD + body)
    assert any(p.startswith(said) for p in found), found


def test_a_tenants_blocks_are_named_by_their_own_key_path() -> None:
    text = (
        HEAD
        + "[tenants.acme.tools.Bash]\n"
        + 'when = [{ match = { command = { equals = 1.5, prefix = "x" } }, then = "allow" }]\n'
    )
    assert problems(text) == [
        "tenants.acme.tools.Bash.when[0].match.command: conditions on one parameter must read one type, "
        "but equals reads a number, prefix reads a string"
    ]


def test_an_x_key_is_the_operators_own_and_ignored() -> None:
    policy = load_policy(
        HEAD + block("{ command = { prefix = 'ls', x_why = 'note' } }", "allow", 'x_by = "me"\n')
    )
    assert [w.block.path for w in policy.rule_for("", "Bash").when] == ["tools.Bash.when[0]"]


@pytest.mark.parametrize(
    ("blocks", "said"),
    [
        (
            block("{ command = { prefix = 'git' } }")
            + block("{ command = { prefix = 'git push' } }", "deny"),
            "tools.Bash.when[1]: can never match: every call it matches is decided first by "
            'tools.Bash.when[0] (command starts with "git", which command starts with "git push" implies)',
        ),
        (
            block("{ command = { equals = 'ls' } }") + block("{ command = { equals = 'ls' } }", "deny"),
            "tools.Bash.when[1]: can never match: every call it matches is decided first by "
            "tools.Bash.when[0]",
        ),
        (
            block("{ timeout = { below = 100 } }")
            + block("{ timeout = { below = 50, above = 10 } }", "deny"),
            "tools.Bash.when[1]: can never match",
        ),
        (
            block("{ timeout = { above = 10 } }") + block("{ timeout = { in = [11, 50] } }", "ask"),
            "tools.Bash.when[1]: can never match",
        ),
        (
            block("{ command = { matches = 'ls.*' } }") + block("{ command = { equals = 'ls -l' } }", "deny"),
            "tools.Bash.when[1]: can never match",
        ),
        (
            block("{ command = { matches = 'git .*' } }")
            + block("{ command = { matches = 'git .*' }, timeout = { below = 5 } }", "deny"),
            "tools.Bash.when[1]: can never match",
        ),
        (
            # The earlier block reads timeout as a number: a later block reading it as a
            # string never gets a call, because the earlier one asks about it first.
            block("{ timeout = { below = 5 } }") + block("{ timeout = { equals = '5' } }", "deny"),
            "tools.Bash.when[1]: can never match: every call it matches is decided first by "
            "tools.Bash.when[0] (it reads timeout as a number, so a call with a string there cannot be "
            "evaluated and is asked)",
        ),
        (
            block("{ timeout = { below = 5, above = 5 } }"),
            "tools.Bash.when[0]: can never match: no value of timeout meets all of timeout < 5 and "
            "timeout > 5",
        ),
        (
            block("{ command = { in = ['a', 'b'], prefix = 'c' } }"),
            "tools.Bash.when[0]: can never match: no value of command meets all",
        ),
    ],
)
def test_a_block_that_can_never_match_is_refused_naming_both(blocks: str, said: str) -> None:
    found = problems(HEAD + blocks)
    assert any(p.startswith(said) for p in found), found


@pytest.mark.parametrize(
    "blocks",
    [
        # A later block narrower in a way the check cannot prove, or not narrower at all.
        block("{ command = { prefix = 'git push' } }") + block("{ command = { prefix = 'git' } }", "deny"),
        block("{ command = { matches = 'git .*' } }") + block("{ command = { prefix = 'git ' } }", "deny"),
        block("{ command = { prefix = 'git' }, timeout = { below = 5 } }")
        + block("{ command = { prefix = 'git push' } }", "deny"),
        block("{ timeout = { below = 10 } }") + block("{ timeout = { below = 20 } }", "deny"),
        block("{ timeout = { in = [1, 2] } }") + block("{ timeout = { in = [2, 3] } }", "deny"),
    ],
)
def test_blocks_that_can_each_match_are_taken(blocks: str) -> None:
    assert len(load_policy(HEAD + blocks).rule_for("", "Bash").when) == 2


def test_a_path_the_schema_rules_out_is_refused() -> None:
    text = HEAD + SCHEMA + block("{ comand = { prefix = 'ls' } }") + block("{ 'env.nme' = { equals = 'x' } }")
    text += block("{ timeout = { prefix = '1' } }") + block("{ 'command.x' = { equals = 'x' } }")
    assert problems(text) == [
        "tools.Bash.when[0].match.comand: tools.Bash.parameters_schema says parameters.comand cannot exist, "
        "so the block could never match; correct the parameter path",
        'tools.Bash.when[1].match."env.nme": tools.Bash.parameters_schema says parameters.env.nme cannot '
        "exist, so the block could never match; correct the parameter path",
        "tools.Bash.when[2].match.timeout: tools.Bash.parameters_schema says parameters.timeout is integer, "
        "but its conditions read a string, so every call would be asked there; correct the path or the "
        "conditions",
        'tools.Bash.when[3].match."command.x": tools.Bash.parameters_schema says parameters.command.x '
        "cannot exist, so the block could never match; correct the parameter path",
    ]


def test_paths_the_schema_allows_are_taken_however_it_says_so() -> None:
    schema = (
        'parameters_schema = { "$defs" = { cmd = { type = "string" } }, type = "object", '
        'properties = { command = { "$ref" = "#/$defs/cmd" }, n = { anyOf = [{ type = "integer" }, '
        '{ type = "string" }] } }, patternProperties = { "^x_" = { type = "number" } } }\n'
    )
    text = HEAD + schema + block("{ command = { prefix = 'ls' } }") + block("{ n = { below = 3 } }")
    text += block("{ x_q = { below = 3 } }") + block("{ anything = { equals = true } }")
    assert len(load_policy(text).rule_for("", "Bash").when) == 4


def test_a_schema_file_is_read_beside_the_policy_and_checked(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "bash.json").write_text(
        json.dumps(
            {"type": "object", "properties": {"command": {"type": "string"}}, "additionalProperties": False}
        )
    )
    policy = tmp_path / "policy.toml"
    policy.write_text(
        HEAD + 'parameters_schema = "schemas/bash.json"\n' + block("{ cmd = { prefix = 'ls' } }")
    )
    with pytest.raises(PolicyError) as raised:
        load_policy_file(policy)
    assert raised.value.problems == [
        "tools.Bash.when[0].match.cmd: tools.Bash.parameters_schema says parameters.cmd cannot exist, so "
        "the block could never match; correct the parameter path"
    ]
    policy.write_text(
        HEAD + 'parameters_schema = "schemas/nope.json"\n' + block("{ cmd = { prefix = 'ls' } }")
    )
    with pytest.raises(PolicyError) as raised:
        load_policy_file(policy)
    [said] = raised.value.problems
    assert said.startswith("tools.Bash.parameters_schema: cannot read ") and "nope.json" in said


def test_a_schema_that_is_no_json_schema_is_refused() -> None:
    text = HEAD + 'parameters_schema = { type = "objct" }\n' + block("{ command = { prefix = 'ls' } }")
    [said] = problems(text)
    assert said.startswith("tools.Bash.parameters_schema: is not a valid JSON Schema")
    [said] = problems(HEAD + "parameters_schema = 5\n")
    assert said.startswith("tools.Bash.parameters_schema: must be a JSON Schema as a table")


def test_blocks_under_a_standing_deny_or_with_a_handoff_are_refused() -> None:
    text = '[tools.Up]\nkind = "write"\ndeny = true\n' + block("{ a = { equals = 1 } }").replace("Bash", "Up")
    assert problems(text) == [
        "tools.Up.when: can never apply, because tools.Up.deny = true refuses every call first; remove "
        "the blocks or the deny"
    ]
    # A tenant that lifts the deny takes the blocks: no problem.
    load_policy(text + "[tenants.acme.tools.Up]\ndeny = false\n")
    handoff = (
        '[tools.Pub]\nkind = "danger"\n[tools.Pub.handoff]\nreason = "r"\nsteps = ["s"]\n'
        'expect = { url = "https://app.example/e", secret_env = "E" }\n'
    ) + block("{ a = { equals = 1 } }").replace("Bash", "Pub")
    [said] = problems(handoff)
    assert said.startswith("tools.Pub.when: Pub has a handoff (tools.Pub.handoff)")


def test_a_blocks_quorum_that_can_never_be_met_is_refused() -> None:
    text = (
        HEAD
        + block("{ command = { prefix = 'git push' } }", "ask", 'approvers = ["tenant_admins"]\nquorum = 2\n')
        + '[tenants.acme]\nadmins = { dashboard = ["u_1"] }\n'
    )
    [said] = problems(text)
    assert said.startswith("tools.Bash.when[0].quorum: quorum 2 is more than the 1 distinct approver"), said


def test_a_tenants_when_replaces_the_tools_list_whole() -> None:
    text = (
        HEAD
        + block("{ command = { prefix = 'ls' } }")
        + block("{ command = { prefix = 'cat' } }")
        + '[[tenants.acme.tools.Bash.when]]\nmatch = { command = { prefix = "make" } }\nthen = "allow"\n'
        + "[tenants.beta.tools.Bash]\nwhen = []\n"
    )
    policy = load_policy(text)
    assert [w.block.path for w in policy.rule_for("", "Bash").when] == [
        "tools.Bash.when[0]",
        "tools.Bash.when[1]",
    ]
    assert [w.block.summary for w in policy.rule_for("acme", "Bash").when] == ['command starts with "make"']
    assert [w.block.path for w in policy.rule_for("acme", "Bash").when] == ["tenants.acme.tools.Bash.when[0]"]
    assert policy.rule_for("beta", "Bash").when == ()


def test_operations_take_no_when_blocks() -> None:
    text = (
        '[operations."order.refund"]\nurl = "https://orders.example/c"\nsecret_env = "S"\n'
        '[[operations."order.refund".when]]\nmatch = { a = { equals = 1 } }\nthen = "allow"\n'
    )
    [said] = problems(text)
    assert said.startswith('operations."order.refund".when: unknown key'), said


def test_the_example_files_check() -> None:
    root = Path(__file__).resolve().parents[2]
    for name in ("policy.example.toml", "examples/coding_agent_policy.toml"):
        load_policy_file(root / name)

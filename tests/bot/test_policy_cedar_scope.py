"""Cedar is given only the policies whose scope lets them apply to a call's tool and action:
its answer (decision, determining policies, errors) is the one the whole set gives."""

from __future__ import annotations

import itertools
from pathlib import Path

import cedarpy

from bot.policy.cedar import CedarSource
from bot.policy.cedar_entities import context_of, uid
from bot.policy.cedar_scope import Scopes
from tests.bot.test_policy_cedar import POLICIES, SCHEMA, write

MORE = """
@id("overflow-elsewhere")
forbid (principal, action, resource == Cosigner::Tool::"issue_credit")
when { context.parameters has amountCents && context.parameters.amountCents * 1000000000000 > 0 };

@id("overflow-everywhere")
forbid (principal, action == Cosigner::Action::"operation", resource)
when { context.parameters has amountCents && context.parameters.amountCents * 1000000000000 > 0 };

@id("any-tool")
permit (principal, action in [Cosigner::Action::"call"], resource is Cosigner::Tool);

@id("operations")
@approval("ask")
permit (principal, action == Cosigner::Action::"operation", resource in Cosigner::Tool::"issue_refund");
"""


def answer(result: cedarpy.AuthzResult) -> tuple[object, ...]:
    d = result.diagnostics
    return result.decision, sorted(d.reasons), sorted(d.errors)


def test_the_scoped_policies_answer_as_the_whole_set(tmp_path: Path) -> None:
    source = CedarSource.load(write(tmp_path, POLICIES + MORE, SCHEMA))
    files = source.files
    scopes = Scopes(files.bodies, files.policies)
    tools = ["issue_refund", "lookup_order", "issue_credit", "unnamed_tool"]
    amounts = [None, 5, 100_000, 10**9]
    agents = [("demo", "key_support"), ("other", "key_1")]
    for tool, action, amount, (tenant, agent), now in itertools.product(
        tools, ["call", "operation"], amounts, agents, [1_800_000_000.0, 2_100_000_000.0]
    ):
        parameters = {} if amount is None else {"amountCents": amount}
        request = {
            "principal": uid("Agent", agent),
            "action": uid("Action", action),
            "resource": uid("Tool", tool),
            "context": context_of(parameters, None, "slack", "slack:U0", now),
        }
        entities = source._entities.get(tenant, agent)
        whole = cedarpy.is_authorized(request, files.policies, entities, files.schema)
        scoped = cedarpy.is_authorized(request, scopes.policies(tool, action), entities, files.schema)
        assert answer(scoped) == answer(whole), (tool, action, amount, agent, now)


def test_a_policy_scoped_to_another_tool_or_action_is_left_out(tmp_path: Path) -> None:
    files = CedarSource.load(write(tmp_path, POLICIES + MORE, SCHEMA)).files
    scopes = Scopes(files.bodies, files.policies)
    names = {files.annotations[p].get("id"): p for p in files.bodies}

    def kept(tool: str, action: str) -> set[str]:
        text = str(scopes.policies(tool, action))
        return {n for n, p in names.items() if n is not None and f'@id("{n}")' in text}

    assert kept("issue_refund", "call") == {"refund-ask", "refund-cap", "any-tool"}
    assert kept("issue_refund", "operation") == {
        "refund-cap",
        "overflow-everywhere",
        "operations",
        "any-tool",
    }
    assert kept("unnamed_tool", "call") == {"any-tool"}
    # Every tool no scope names shares one set.
    assert scopes.policies("unnamed_tool", "call") is scopes.policies("another_one", "call")

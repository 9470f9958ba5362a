"""`policy check` on `step_up`: a passkey can confirm only an Approve a person is asked for.

Checked on the merged rules (a tenant's override may set or clear it), once the rest of the
file is valid: `step_up` on a handoff (done, never approved), on a tool that never asks a
person, or in mode `ask`, whose "Approve for this run" would let the run's later calls
through with no passkey at all.
"""

from __future__ import annotations

from collections.abc import Iterable

from bot.policy.tool_rule import ToolRule, outcomes
from contracts.enums import ApprovalMode


def step_up_problems(rules: Iterable[ToolRule]) -> list[str]:
    """Every `step_up = true` that could never confirm an Approve, naming the fix."""
    problems: list[str] = []
    for rule in rules:
        for r in outcomes(rule):
            if r.step_up:
                problems += _problems(r)
    return list(dict.fromkeys(problems))


def _problems(rule: ToolRule) -> list[str]:
    path = rule.origin("step_up")
    if rule.handoff is not None:
        return [
            f"{path}: a handoff is done or cancelled, never approved, "
            "so no passkey confirms it; remove step_up"
        ]
    if rule.deny:
        return []
    if rule.mode is ApprovalMode.NONE:
        return [
            f"{path}: {rule.name} never asks a person ({rule.describe()}), so there is no Approve to "
            'confirm with a passkey; set confirm = "always" or kind = "danger", or remove step_up'
        ]
    if rule.mode is ApprovalMode.ASK:
        return [
            f'{path}: {rule.name} is in mode ask, whose "Approve for this run" would let the run\'s '
            'later calls through with no passkey; set confirm = "always" (or kind = "danger")'
        ]
    return []


def step_up_paths(rules: Iterable[ToolRule]) -> list[str]:
    """The key path of every `step_up = true` a person could be asked under: where only the
    inbox can confirm an Approve (`cosigner serve` refuses to start without it)."""
    paths = (r.origin("step_up") for rule in rules for r in outcomes(rule) if r.step_up and not r.deny)
    return list(dict.fromkeys(paths))

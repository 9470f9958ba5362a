"""`policy check` on `editable`: an approver can edit only a call they are asked about and
can see.

Checked on the merged rules (a tenant's override may set or clear it), once the rest of the
file is valid.
"""

from __future__ import annotations

from collections.abc import Iterable

from bot.policy.redaction import is_secret_key, shows
from bot.policy.tool_rule import ToolRule, outcomes
from contracts.enums import ApprovalMode


def editable_problems(rules: Iterable[ToolRule]) -> list[str]:
    """`editable` where no edit can happen: a tool that never asks a person, a handoff, or a
    parameter that is hidden (redacted by the policy or by its secret-looking name), which an
    approver may never see and so never change."""
    problems: list[str] = []
    for rule in rules:
        problems += _editable_rule(rule)
    return list(dict.fromkeys(problems))


def _editable_rule(rule: ToolRule) -> list[str]:
    if rule.editable is False or rule.editable == ():
        return []
    path = rule.origin("editable")
    if rule.handoff is not None:
        return [f"{path}: a handoff is done or cancelled, never approved, so there is no call to edit"]
    if all(o.mode is ApprovalMode.NONE or o.deny for o in outcomes(rule)):
        return [
            f"{path}: {rule.name} never asks a person ({rule.describe()}), so nobody could edit a "
            "call; remove editable, or set confirm = true"
        ]
    if rule.editable is True:
        return []
    problems = []
    # A path hides its first segment's parameter, wholly or in part; `*` hides every one.
    hidden = {_normal(p.split(".")[0]) for p in rule.redact}
    for name in rule.editable:
        if _normal(name) in hidden or "*" in hidden:
            problems.append(
                f'{path}: "{name}" is hidden by {rule.origin("redact")}; a hidden value is never shown, '
                "so it can never be edited: remove it from one of them"
            )
        elif is_secret_key(name) and not shows(rule.show, name):
            problems.append(
                f'{path}: "{name}" names a secret (Cosigner hides any parameter named like a '
                "credential), so it is never shown and can never be edited; remove it"
            )
    return problems


def _normal(name: str) -> str:
    return "*" if name == "*" else "".join(ch for ch in name.casefold() if ch.isalnum())

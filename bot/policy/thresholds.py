"""The thresholds `deny_above` and `allow_below`: what their parameter holds, and what it means.

A threshold compares a number. A parameter sent as anything else (`"5000000"`, `true`,
`null`, an object) is ambiguous: an executor may read `"5000000"` as five million while
the threshold saw no number at all, so a `deny_above` would let it run. Such a call is
refused as invalid (`unreadable`), naming the parameter and the rule, unless the rule
declares `digits = true`: then a string of ASCII digits is compared as the number it
spells. A parameter sent only under another spelling of its name (`AmountCents` for
`amountCents`) is refused the same way: the threshold would see nothing where an executor
that folds case reads the amount. An absent parameter is not refused: `deny_above` does not stop it and
`allow_below` does not let it through.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.policy.paths import ambiguous, find, spelled_otherwise
from bot.policy.rules import Threshold, ToolRule

# ASCII only: int() also reads "５" and "٥", which an executor may read otherwise or not at all.
_DIGITS = re.compile(r"[0-9]+")
# More digits than any float holds (about 1.8e308) are above every limit whatever they are,
# and int() refuses strings of more than 4300 digits.
_MAX_DIGITS = 308


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A threshold parameter that holds no number the rule can compare: the call is invalid."""

    path: str  # the rule's key path, `tools.issue_refund.deny_above`
    parameter: str  # the parameter's dotted path, `amountCents`
    message: str  # what is wrong, and the fix


def number(value: Any, digits: bool) -> int | float | None:
    """The number a threshold parameter holds: a JSON number (a boolean is none), or with
    `digits` a string of digits 0-9; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    if digits and isinstance(value, str) and _DIGITS.fullmatch(value):
        return int(value) if len(value.lstrip("0")) <= _MAX_DIGITS else math.inf
    return None


def unreadable(rule: ToolRule, parameters: Mapping[str, Any]) -> Unreadable | None:
    """The first threshold whose parameter is sent but holds no number it can compare."""
    for key, limit in (("deny_above", rule.deny_above), ("allow_below", rule.allow_below)):
        if limit is None:
            continue
        path = rule.origin(key)
        otherwise = spelled_otherwise(parameters, limit.parameter)
        if otherwise is not None:
            return Unreadable(
                path,
                limit.parameter,
                f"parameters.{otherwise} differs from parameters.{limit.parameter}, which {path} "
                f"compares, only by case or width, so the call cannot be checked; send it as "
                f"{limit.parameter}",
            )
        present, value = find(parameters, limit.parameter)
        if present and number(value, limit.digits) is None:
            return Unreadable(path, limit.parameter, _says(path, limit, value))
    return None


def _says(path: str, limit: Threshold, value: Any) -> str:
    # The value itself is never quoted: an error body must not echo what may be a secret.
    sent = _KINDS.get(type(value), "not a number")
    if limit.digits and isinstance(value, str):
        sent = "a string that is not only digits 0-9"
    if limit.digits:
        want = f"a JSON number such as {limit.value:g}, or a string of digits 0-9 (no sign, point or spaces)"
    else:
        want = f"a JSON number such as {limit.value:g}"
    said = (
        f"parameters.{limit.parameter} is {sent}, but {path} compares it with {limit.value:g} as a "
        f"number, so the call cannot be checked; send it as {want}"
    )
    if isinstance(value, str) and not limit.digits:
        said += f" (a tool that takes it as a string of digits needs digits = true in {path})"
    return said


_KINDS: dict[type, str] = {
    str: "a string",
    bool: "a boolean (true and false are not numbers)",
    type(None): "null",
    dict: "an object",
    list: "a list",
}


def below(rule: ToolRule, parameters: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether `allow_below` lets the call through, and what its parameter held."""
    limit = rule.allow_below
    if limit is None:
        return False, ""
    if ambiguous(parameters, limit.parameter):
        return False, f"{limit.parameter} is ambiguous (keys differing only by case or width)"
    present, value = find(parameters, limit.parameter)
    amount = number(value, limit.digits)
    # Below the threshold but not negative: a negative amount is not a small one.
    if amount is not None:
        if 0 <= amount < limit.value:
            return True, f"{limit.parameter} {amount:g} < {limit.value:g}"
        return False, f"{limit.parameter} {amount:g} is not in [0, {limit.value:g})"
    return False, f"{limit.parameter} is {'not a number' if present else 'absent'}"


def above(rule: ToolRule, parameters: Mapping[str, Any]) -> tuple[bool, str]:
    """Whether `deny_above` refuses the call, and what its parameter held. Keys that differ only
    by case or width make it ambiguous, which refuses (fail closed)."""
    limit = rule.deny_above
    if limit is None:
        return False, ""
    if ambiguous(parameters, limit.parameter):
        return True, f"{limit.parameter} is ambiguous (keys differing only by case or width)"
    present, value = find(parameters, limit.parameter)
    amount = number(value, limit.digits)
    if amount is not None:
        if amount > limit.value:
            return True, f"{limit.parameter} {amount:g} > {limit.value:g}"
        return False, f"{limit.parameter} {amount:g} is not above {limit.value:g}"
    # Not reached for a call `unreadable` refused: only an absent parameter gets here.
    return False, f"{limit.parameter} is {'not a number' if present else 'absent'}"

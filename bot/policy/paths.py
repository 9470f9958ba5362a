"""Dotted parameter paths in a call: whether one is there, and whether its keys are spelled
so that a tool might read another value than the policy sees (keys differing only by case
or width). Read by the thresholds and by `when` blocks."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any


def find(parameters: Mapping[str, Any], path: str) -> tuple[bool, Any]:
    """Whether a dotted path is present (a `null` there is), and its value (None if not)."""
    value: Any = parameters
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return False, None
        value = value[part]
    return True, value


def ambiguous(parameters: Mapping[str, Any], path: str) -> bool:
    """True if a level of `path` has keys equal to its segment but for case or width
    (`amountCents` beside `AmountCents`): an executor might read the other one, so no
    threshold may approve on it."""
    value: Any = parameters
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return False
        wanted = unicodedata.normalize("NFKC", part).casefold()
        if sum(1 for k in value if unicodedata.normalize("NFKC", str(k)).casefold() == wanted) > 1:
            return True
        value = value.get(part)
    return False


def spelled_otherwise(parameters: Mapping[str, Any], path: str) -> str | None:
    """The dotted path the call sends in place of `path` when it spells one of its keys only
    otherwise (`AmountCents` where the rule names `amountCents`) and not as the rule does;
    None when the path is there as written or not at all. A threshold would see nothing
    while an executor that folds case would read the amount."""
    value: Any = parameters
    sent: list[str] = []
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        if part in value:
            sent.append(part)
            value = value[part]
            continue
        wanted = unicodedata.normalize("NFKC", part).casefold()
        other = next(
            (str(k) for k in value if unicodedata.normalize("NFKC", str(k)).casefold() == wanted), None
        )
        return ".".join([*sent, other]) if other is not None else None
    return None

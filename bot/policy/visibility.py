"""What `show` may un-hide: checked on the merged rules when the policy loads.

`show` names a key Cosigner hides for its secret-looking name (`key`, `token`, `pin`) that
a tool's parameters use for something that is not a secret. It never un-hides a `redact`
path, so a key named in both is a contradiction `policy check` refuses rather than guess
which was meant; and a `show` path whose last key Cosigner would not hide anyway changes
nothing, which is most often a misspelt name: refused too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from bot.policy.redaction import is_secret_key, spelling


class Shown(Protocol):
    """What the check reads of a merged rule (`bot.policy.rules.ToolRule`)."""

    @property
    def redact(self) -> tuple[str, ...]: ...

    @property
    def show(self) -> tuple[str, ...]: ...

    def origin(self, key: str) -> str: ...


def show_problems(rules: Iterable[Shown]) -> list[str]:
    """Every `show` path that a `redact` path also hides, or that names no hidden key."""
    problems: list[str] = []
    for rule in rules:
        for path in rule.show:
            said = _problem(rule, path)
            if said is not None:
                problems.append(f"{rule.origin('show')}: {said}")
    return list(dict.fromkeys(problems))


def _problem(rule: Shown, path: str) -> str | None:
    wanted = [spelling(s) for s in path.split(".")]
    for hidden in rule.redact:
        if _covers([spelling(s) for s in hidden.split(".")], wanted):
            return (
                f'"{path}" is also hidden by the redact path "{hidden}" (redact adds up over the '
                "tool's and the tenant's sections); show un-hides only a name Cosigner hides by "
                "itself, never a redact path, so which is meant is unclear: remove it from one of them"
            )
    last = path.split(".")[-1]
    if not is_secret_key(last):
        return (
            f'"{path}" names a key Cosigner shows anyway ("{last}" does not look like a secret), '
            "so show changes nothing; name a key Cosigner hides, such as key, token or pin, or remove it"
        )
    return None


def _covers(hidden: list[str], wanted: list[str]) -> bool:
    """Whether a redact path hides the key at `wanted`: it is that key or one it lies within."""
    return len(hidden) <= len(wanted) and all(h in ("*", w) for h, w in zip(hidden, wanted, strict=False))

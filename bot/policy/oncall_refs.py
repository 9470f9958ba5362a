"""On-call approvers in the policy: `oncall:pagerduty:SCHEDULE`, `oncall:pagerduty:POLICY:LEVEL`,
`oncall:opsgenie:SCHEDULE`.

Three parts name a schedule, four an escalation policy and one of its levels (PagerDuty only:
Opsgenie's on-call API answers per schedule). A PagerDuty schedule id and an escalation policy
id look alike, so the number of parts decides which one is meant; nothing is guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

PREFIX = "oncall:"
# PagerDuty ids are upper-case letters and digits; Opsgenie schedules are named or ids.
_TARGET = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
EXAMPLES = '"oncall:pagerduty:P1ABCD", "oncall:pagerduty:EP123:2" or "oncall:opsgenie:ops-primary"'


class OnCallProvider(StrEnum):
    """Where a rotation lives."""

    PAGERDUTY = "pagerduty"
    OPSGENIE = "opsgenie"


@dataclass(frozen=True, slots=True)
class OnCallRef:
    """One rotation: a schedule, or one level (1 = the first) of an escalation policy."""

    provider: OnCallProvider
    target: str
    level: int | None = None

    def __str__(self) -> str:
        tail = f":{self.level}" if self.level is not None else ""
        return f"{PREFIX}{self.provider.value}:{self.target}{tail}"

    @property
    def is_schedule(self) -> bool:
        """True for a schedule, False for a level of an escalation policy."""
        return self.level is None


def is_oncall(value: object) -> bool:
    """True for a string that means to name a rotation (it may still be malformed)."""
    return isinstance(value, str) and value.strip().lower().startswith(PREFIX)


def parse_oncall(text: str) -> OnCallRef:
    """The rotation `text` names; ValueError naming the fix if it names none."""
    parts = text.strip().split(":")
    if len(parts) not in (3, 4) or parts[0].lower() != PREFIX[:-1]:
        raise ValueError(f'"{text}" is not an on-call approver; write {EXAMPLES}')
    try:
        provider = OnCallProvider(parts[1].lower())
    except ValueError:
        raise ValueError(
            f'"{text}" names the on-call provider "{parts[1]}"; use "pagerduty" or "opsgenie"'
        ) from None
    target = parts[2]
    if not _TARGET.match(target):
        raise ValueError(f'"{text}": "{target}" is not a schedule or escalation policy id; write {EXAMPLES}')
    if len(parts) == 3:
        return OnCallRef(provider, target)
    if provider is OnCallProvider.OPSGENIE:
        raise ValueError(
            f'"{text}": Opsgenie rotations are named by schedule only ("oncall:opsgenie:{target}"); '
            "escalation levels are PagerDuty's (oncall:pagerduty:POLICY:LEVEL)"
        )
    if not parts[3].isdigit() or not 1 <= int(parts[3]) <= 20:
        raise ValueError(
            f'"{text}": the escalation level "{parts[3]}" must be a whole number from 1 '
            '(the first level), as in "oncall:pagerduty:EP123:2"'
        )
    return OnCallRef(provider, target, int(parts[3]))


# The settings each provider needs (`bot.settings`): its API token.
TOKEN_ENV = {
    OnCallProvider.PAGERDUTY: "COSIGNER_PAGERDUTY_TOKEN",
    OnCallProvider.OPSGENIE: "COSIGNER_OPSGENIE_TOKEN",
}


class HasRotations(Protocol):
    """A merged rule, as far as its rotations go (`bot.policy.tool_rule.ToolRule`)."""

    @property
    def source(self) -> str: ...
    @property
    def oncall(self) -> tuple[OnCallRef, ...]: ...
    @property
    def escalate(self) -> tuple[object, ...]: ...


def rotations(rule: HasRotations) -> list[OnCallRef]:
    """Every rotation a rule names: its approvers' and its escalation steps'."""
    steps = [getattr(s, "oncall", None) for s in rule.escalate]
    return [*rule.oncall, *(r for r in steps if isinstance(r, OnCallRef))]


def unconfigured(rules: Iterable[HasRotations], environ: Mapping[str, str]) -> list[str]:
    """A problem for each rule naming a rotation whose provider has no token on this server."""
    problems: list[str] = []
    for rule in rules:
        for ref in rotations(rule):
            env = TOKEN_ENV[ref.provider]
            if not environ.get(env):
                problems.append(
                    f"{rule.source}: names {ref}, but {env} is not set; set it to a "
                    f"{ref.provider.value} API token, or name other approvers"
                )
    return list(dict.fromkeys(problems))

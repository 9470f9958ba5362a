"""`cosigner policy suggest`: `when` blocks learned from the decisions on record, each proven by
replaying it against the same history before it is shown.

For each tool on record that is not `danger` (under the policy given, for every tenant the
record names), the candidate regions of `bot.policy.suggest_regions` are tried, widest
first. A candidate becomes a suggestion only if the policy with its block appended still
loads (so `cosigner policy check` passes), and replaying the tool's recorded requests under
that policy, beside a replay under the policy as it is, changes nothing but calls that a
person approved (or that said nothing either way) from asked to run unasked. The output is
TOML to review: comments saying why, then the blocks. Nothing is applied.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.policy.history import Call, Evidence
from bot.policy.replay import replay
from bot.policy.rules import Policy, load_policy
from bot.policy.suggest_regions import Region, regions
from bot.policy.suggest_thresholds import Thresholds
from contracts.enums import ToolKind
from contracts.errors import PolicyError

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_UNASKED = frozenset({"none", "deny", "invalid", "unsupported"})


@dataclass(frozen=True)
class Suggestion:
    """A `when` block proven on the record, and the replay figures that justify it."""

    tool: str
    region: Region
    block: str  # the TOML of the block
    calls: int  # the tool's requests replayed
    asked_before: int  # of them asked under the policy as it is
    asked_after: int  # of them asked with the block appended
    refused: int  # of them denied, expired, cancelled, refused by the policy or still waiting
    refused_allowed: int  # of those the block would let through (always 0 when shown)

    def text(self, period: str) -> str:
        """The suggestion as TOML: why in comments, then the block."""
        r = self.region
        n = len(r.covered)
        people = len(r.people)
        return (
            f"# {self.tool}: approved {n} of {n} asked with {r.said} {period}, "
            f"by {people} {_people(people)}.\n"
            f"# Replayed on the same {self.calls} requests: would have asked {self.asked_after} of "
            f"{self.calls} instead of {self.asked_before}; {self.refused_allowed} of the {self.refused} "
            "denied, expired, cancelled or unanswered would have been allowed.\n"
            f"{self.block.rstrip()}"
        )


@dataclass
class Suggested:
    """What `suggest` found: the suggestions, and a note for each tool it left alone."""

    suggestions: list[Suggestion]
    notes: list[str]
    unreadable: int = 0

    def text(self, period: str) -> str:
        """The whole report: TOML that can be appended to the policy file after review."""
        lines = ["# Suggested by `cosigner policy suggest`: review before adding to the policy."]
        if self.unreadable:
            lines.append(f"# ({self.unreadable} recorded requests could not be read and were skipped)")
        lines += [f"# {n}" for n in self.notes]
        if not self.suggestions:
            lines.append("# Nothing to suggest.")
        return "\n".join(lines) + "".join(f"\n\n{s.text(period)}" for s in self.suggestions) + "\n"


def _people(n: int) -> str:
    return "person" if n == 1 else "people"


def _key(name: str) -> str:
    return name if _BARE.fullmatch(name) else json.dumps(name, ensure_ascii=False)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, str):
        # A pattern as a literal string: its backslashes are RE2's, not TOML's.
        return f"'{value}'" if "\\" in value and "'" not in value else json.dumps(value, ensure_ascii=False)
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def block_toml(tool: str, region: Region) -> str:
    """The `[[tools.X.when]]` block allowing what `region` covers."""
    said = ", ".join(f"{k} = {_value(v)}" for k, v in region.conditions.items())
    return f'[[tools.{_key(tool)}.when]]\nmatch = {{ {_key(region.path)} = {{ {said} }} }}\nthen = "allow"\n'


def _labels(calls: list[Call], policy: Policy) -> dict[str, str]:
    """What `policy` decides for each call, by approval id (the replay machinery)."""
    found = replay((c.request for c in calls), policy, examples=len(calls))
    labels = {c.request.approval_id: c.decision for c in calls}
    for change in found.changes.values():
        for approval_id in change.examples:
            labels[approval_id] = change.after
    return labels


def _verified(
    tool: str, region: Region, calls: list[Call], policy: Policy, text: str, source: str, base: Path | None
) -> Suggestion | None:
    block = block_toml(tool, region)
    try:
        proposed = load_policy(f"{text.rstrip()}\n\n{block}", source, base)
    except PolicyError:
        return None  # the block would not pass `policy check` (shadowed, or a path the schema refuses)
    before, after = _labels(calls, policy), _labels(calls, proposed)
    by_id = {c.request.approval_id: c for c in calls}
    moved = [i for i in before if before[i] != after[i]]
    if not moved or any(after[i] != "none" or by_id[i].evidence is Evidence.REFUSED for i in moved):
        return None
    refused = [i for i, c in by_id.items() if c.evidence is Evidence.REFUSED]
    return Suggestion(
        tool=tool,
        region=region,
        block=block,
        calls=len(calls),
        asked_before=sum(v not in _UNASKED for v in before.values()),
        asked_after=sum(v not in _UNASKED for v in after.values()),
        refused=len(refused),
        refused_allowed=sum(after[i] == "none" and before[i] != "none" for i in refused),
    )


def suggest(
    calls: Iterable[Call],
    policy: Policy,
    text: str,
    *,
    thresholds: Thresholds | None = None,
    tool: str | None = None,
    base: Path | None = None,
) -> Suggested:
    """At most one proven `when` block per tool on record (`tool`: only that one)."""
    t = thresholds or Thresholds()
    by_tool: dict[str, list[Call]] = {}
    for call in calls:
        if tool is None or call.tool.casefold() == tool.casefold():
            by_tool.setdefault(call.tool, []).append(call)
    found = Suggested([], [])
    for name in sorted(by_tool):
        mine = by_tool[name]
        tenants = {c.request.tenant for c in mine} | {""}
        rules = [policy.rule_for(tenant, name) for tenant in sorted(tenants)]
        approved = [c for c in mine if c.evidence is Evidence.APPROVED]
        if not approved:
            continue
        if any(r.kind is ToolKind.DANGER for r in rules):
            found.notes.append(f"{name}: a danger tool (or one the policy does not name); never suggested.")
            continue
        people = set().union(*(c.people for c in approved))
        if len(approved) < t.min_approvals or len(people) < t.min_people:
            found.notes.append(
                f"{name}: {len(approved)} approvals by {len(people)} {_people(len(people))} on record; "
                f"a suggestion needs "
                f"at least {t.min_approvals} by {t.min_people} (--min-approvals, --min-people)."
            )
            continue
        for region in regions(mine, t):
            made = _verified(rules[0].name, region, mine, policy, text, policy.source, base)
            if made is not None:
                found.suggestions.append(made)
                break
        else:
            found.notes.append(
                f"{name}: no condition on its parameters covers at least {t.min_approvals} approvals by "
                f"{t.min_people} people without a denied, expired or unanswered call (or replay refused it)."
            )
    return found

"""Replaying the audit record through another policy: what would have been decided otherwise.

Every `requested` event is streamed from the database (never loaded whole), its call
decided again by `bot.policy.decision.rule_on` under the new policy, and compared with what was
decided when it arrived. Nothing is written. Changes that let calls run with nobody asked
that were asked before come first, marked as loosenings.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import ValidationError

from bot.policy.cases import ENABLED, assumed_sender, surface_of
from bot.policy.decision import rule_on
from bot.policy.paths import find
from bot.policy.redaction import REDACTED
from bot.policy.routing import SmsSender
from bot.policy.rules import Policy
from contracts.audit_events import Requested as RequestedEvent
from contracts.audit_events import parse_event
from contracts.enums import AuditEvent
from contracts.shown import MASK
from storage.audit import Requested

EXAMPLES = 3
# A stand-in sender, to tell a change the policy makes from one this environment makes: the
# server's senders come from its settings (its environment, or code in `cosigner dev`),
# which the replaying shell may not have. Only the decision's label is read, never the number.
_STAND_IN = "+10000000000"
# What each surface's sender is set by, as the server reads it.
LACKS = {
    "whatsapp": "TWILIO_WHATSAPP_FROM (the WhatsApp sender)",
    "sms": "TWILIO_FROM_NUMBER or TWILIO_MESSAGING_SERVICE_SID (the SMS sender)",
}


@dataclass
class Change:
    """One tool's requests that the new policy decides from `before` to `after`."""

    tool: str
    before: str
    after: str
    loosens: bool
    count: int = 0
    examples: list[str] = field(default_factory=list)


@dataclass
class Replay:
    """What a replay found: how many requests it read, and every change, loosenings first."""

    read: int = 0
    unreadable: int = 0
    hidden: int = 0  # requests a `when` block reads a redacted parameter of: skipped
    # Requests this environment cannot route as the server did, for want of a setting the
    # server had (a sender): left out of the comparison, counted by the setting.
    lacking: dict[str, int] = field(default_factory=dict)
    changes: dict[tuple[str, str, str], Change] = field(default_factory=dict)

    def ordered(self) -> list[Change]:
        """Loosenings first, then by how many requests each change touches."""
        return sorted(self.changes.values(), key=lambda c: (not c.loosens, -c.count, c.tool, c.before))

    @property
    def changed(self) -> int:
        """Requests the new policy decides otherwise."""
        return sum(c.count for c in self.changes.values())

    def table(self) -> str:
        """The report as text: a summary line, then one line per change."""
        lines = [f"replayed {self.read} requests: {self.changed} would be decided otherwise"]
        if self.unreadable:
            lines.append(f"  ({self.unreadable} recorded requests could not be read again and were skipped)")
        if self.hidden:
            lines.append(
                f"  ({self.hidden} recorded requests were skipped: a when block reads a parameter of "
                "theirs that the record keeps redacted, so what it would decide is unknown)"
            )
        for setting, n in sorted(self.lacking.items()):
            lines.append(
                f"  ({n} recorded requests were left out: the server routed them with {setting}, "
                "which is not set here; set it as the server has it to compare them)"
            )
        if self.changes:
            lines.append(f"{'':9}{'tool':<24} {'change':<40} {'requests':>8}  examples")
        for c in self.ordered():
            mark = "LOOSENS" if c.loosens else ""
            change = f"{c.before} → {c.after}"
            lines.append(f"{mark:<9}{c.tool:<24} {change:<40} {c.count:>8}  {', '.join(c.examples)}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The report for machines."""
        return {
            "read": self.read,
            "changed": self.changed,
            "unreadable": self.unreadable,
            "hidden": self.hidden,
            "lacking": dict(sorted(self.lacking.items())),
            "changes": [
                {
                    "tool": c.tool,
                    "from": c.before,
                    "to": c.after,
                    "loosens": c.loosens,
                    "count": c.count,
                    "examples": c.examples,
                }
                for c in self.ordered()
            ],
        }


def read_requested(text: str) -> RequestedEvent:
    """A `requested` event's stored data read through its model (contracts.audit_events);
    ValueError for data the model cannot read (an older or edited record): never guessed at."""
    stored = json.loads(text)
    event = parse_event(AuditEvent.REQUESTED, stored) if isinstance(stored, dict) else None
    if not isinstance(event, RequestedEvent):
        raise ValueError("not a readable requested event")
    return event


def recorded_label(data: RequestedEvent) -> str:
    """What was decided when the request arrived, in `Ruling.label`'s words.

    Requests recorded before the decision was kept on the audit record are compared by their
    mode and route alone."""
    if data.decision is not None:
        return data.decision
    mode, route = str(data.mode), data.route
    if mode == "none" or route is None:
        return mode
    return f"{mode}:{route.get('surface')}"


_RUNS_UNASKED = "none"


def unhidden(policy: Policy, tenant: str, tool: str, params: Any) -> Any:
    """The recorded parameters without a threshold parameter redaction replaced: its value is
    unknown, so it counts as absent (not met) rather than as a string the call never sent."""
    rule = policy.rule_for(tenant, tool)
    for limit in (rule.deny_above, rule.allow_below):
        if limit is None or not isinstance(params, dict):
            continue
        *parents, last = limit.parameter.split(".")
        present, holder = find(params, ".".join(parents)) if parents else (True, params)
        if present and isinstance(holder, dict) and holder.get(last) == REDACTED:
            params = copy.deepcopy(params)
            present, holder = find(params, ".".join(parents)) if parents else (True, params)
            del holder[last]
    return params


def hidden(policy: Policy, tenant: str, tool: str, params: Any) -> bool:
    """True when a `when` block of the tool reads a parameter the record keeps redacted
    (replaced whole, or with a credential masked inside): its value, and so the block's
    verdict, is unknown."""
    rule = policy.rule_for(tenant, tool)
    for w in rule.when:
        for test in w.block.tests:
            value: Any = params
            for part in test.path.split("."):
                if not isinstance(value, dict) or part not in value:
                    break
                value = value[part]
                if isinstance(value, str) and (value == REDACTED or MASK.search(value)):
                    return True
    return False


def replay(rows: Iterable[Requested], policy: Policy, examples: int = EXAMPLES) -> Replay:
    """Decide every recorded request again under `policy`; count what changes."""
    found = Replay()
    sender = assumed_sender()
    for row in rows:
        found.read += 1
        try:
            data = read_requested(row.data)
            surface = surface_of(data.surface)
            params = data.parameters or {}
            tool = data.toolName
        except (ValueError, KeyError, TypeError, ValidationError):
            found.unreadable += 1
            continue
        params = unhidden(policy, row.tenant, tool, params)
        if hidden(policy, row.tenant, tool, params):
            found.hidden += 1
            continue
        # At the time it was asked: a Cedar policy may read `context.time`.
        ruling = rule_on(policy, row.tenant, tool, params, surface, enabled=ENABLED, sms=sender, now=row.at)
        before, after = recorded_label(data), ruling.label
        if before == after:
            continue
        setting = _lacking(policy, row.tenant, tool, params, surface, sender, before, after)
        if setting is not None:
            found.lacking[setting] = found.lacking.get(setting, 0) + 1
            continue
        key = (tool, before, after)
        change = found.changes.get(key)
        if change is None:
            loosens = after == _RUNS_UNASKED and before != _RUNS_UNASKED
            change = found.changes[key] = Change(tool, before, after, loosens)
        change.count += 1
        if len(change.examples) < examples:
            change.examples.append(row.approval_id)
    return found


def _lacking(
    policy: Policy,
    tenant: str,
    tool: str,
    params: Any,
    surface: Any,
    sender: SmsSender,
    before: str,
    after: str,
) -> str | None:
    """The setting this environment lacks when it alone makes the change: a request the
    server routed by SMS or WhatsApp, which here has no sender, but would be decided as
    recorded with one."""
    on = before.partition(":")[2]
    if after != "unsupported" or on not in LACKS:
        return None
    if (on == "whatsapp" and sender.whatsapp_from) or (
        on == "sms" and (sender.from_number or sender.messaging_service_sid)
    ):
        return None
    provisioned = replace(
        sender,
        from_number=sender.from_number or (None if sender.messaging_service_sid else _STAND_IN),
        whatsapp_from=sender.whatsapp_from or _STAND_IN,
    )
    again = rule_on(policy, tenant, tool, params, surface, enabled=ENABLED, sms=provisioned)
    return LACKS[on] if again.label == before else None

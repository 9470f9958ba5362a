"""What the policy decides for one call (`Ruling`, made by `bot.policy.decision.rule_on`),
the steps that led there, how it is printed and recorded, and how two rulings differ (the
shadow policy, `policy replay`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.policy.follow_up_plan import Plan
from bot.policy.rules import ToolRule
from bot.policy.thresholds import Unreadable
from contracts.enums import ApprovalMode, ApproverKind
from contracts.errors import ApprovalModeUnsupported
from contracts.ports import Route, SlackRoute, SmsRoute, TeamsRoute


@dataclass(frozen=True, slots=True)
class PathStep:
    """One step of an explanation: the key path that spoke, and what it said."""

    path: str
    says: str


@dataclass(frozen=True, slots=True)
class Ruling:
    """What the policy decides for one call, with the steps that led there.

    `mode` is the mode in effect: `none` when a threshold lets the call through although
    the tool's rule would ask. `decided_by` is the key path of the rule that decided.
    """

    tenant: str
    tool: str
    rule: ToolRule
    mode: ApprovalMode
    deny: bool
    decided_by: str
    steps: tuple[PathStep, ...]
    route: Route | ApprovalModeUnsupported | None
    threshold: str | None  # decidedBy.rule when allow_below lets the call through
    timeout: float | None
    kinds: tuple[ApproverKind, ...] = ()  # who the route asks: the tool's approvers or headless
    quorum: int = 1  # distinct approvers who must approve (the rule's `quorum`)
    separate_duties: bool = False  # the requester never counts toward the quorum
    follow_ups: Plan | None = None  # the reminder and escalations while nobody answers
    # A threshold parameter holding no number: the request is refused as invalid (400).
    invalid: Unreadable | None = None
    # Why the `when` block that decided (`rule.block`) could not be evaluated, if it could not.
    unevaluable: str | None = None

    @property
    def runs_unasked(self) -> bool:
        """True when the call runs with nobody asked."""
        return not self.deny and self.invalid is None and self.mode is ApprovalMode.NONE

    @property
    def unsupported(self) -> bool:
        """True when a person is needed and none can be reached: the call is refused."""
        return not self.runs_unasked and isinstance(self.route, ApprovalModeUnsupported)

    @property
    def approvers(self) -> tuple[str, ...]:
        """The identities that would be asked (none when the call runs unasked)."""
        return self.route.approvers if isinstance(self.route, Route) and not self.runs_unasked else ()

    @property
    def label(self) -> str:
        """The decision in a word or two: `deny`, `invalid`, `none`, `unsupported`, or `MODE:SURFACE`."""
        if self.deny:
            return "deny"
        if self.invalid is not None:
            return "invalid"
        if self.runs_unasked:
            return "none"
        if self.unsupported:
            return "unsupported"
        if isinstance(self.route, Route):
            return f"{self.mode.value}:{self.route.surface.value}"
        return self.mode.value

    def to_json(self) -> dict[str, Any]:
        """The ruling as `--json` prints it and the audit record keeps it."""
        return {
            "tenant": self.tenant,
            "tool": self.tool,
            "decision": {"deny": "deny", "invalid": "invalid", "none": "none", "unsupported": "refused"}.get(
                self.label, "person"
            ),
            "mode": self.mode.value,
            "rule": self.decided_by,
            "route": where(self.route) if isinstance(self.route, Route) and self.approvers else None,
            "approvers": list(self.approvers),
            "approverKinds": [k.value for k in self.kinds],
            "refused": (
                self.route.message
                if self.unsupported and isinstance(self.route, ApprovalModeUnsupported)
                else self.invalid.message
                if self.invalid is not None
                else None
            ),
            "timeoutSeconds": self.timeout,
            "redact": list(self.rule.redact),
            "show": list(self.rule.show),
            "quorum": self.quorum,
            "separateDuties": self.separate_duties,
            "stepUp": self.rule.step_up and not self.runs_unasked and not self.deny,
            "block": self.rule.block,
            **({"unevaluable": self.unevaluable} if self.unevaluable is not None else {}),
            "steps": [{"path": s.path, "says": s.says} for s in self.steps],
            **({"followUps": self._follow_ups_json()} if self.follow_ups is not None else {}),
        }

    def _follow_ups_json(self) -> dict[str, Any]:
        assert self.follow_ups is not None
        return {
            "remindAfterSeconds": self.follow_ups.remind_after,
            "escalate": [
                {"step": s.step, "afterSeconds": s.after, "to": s.to.value, "route": where(s.route)}
                for s in self.follow_ups.steps
            ],
        }

    def explain(self) -> str:
        """The explanation as text, one step a line."""
        head = {
            "deny": "denied",
            "invalid": "refused as invalid (400 INVALID_REQUEST)",
            "none": "runs with nobody asked",
            "unsupported": "refused",
        }
        verdict = head.get(self.label, f"a person decides ({self.mode.value})")
        lines = [f"{self.tool} for tenant {self.tenant or '(none)'}: {verdict}, by {self.decided_by}"]
        lines += [f"  {i}. [{s.path}] {s.says}" for i, s in enumerate(self.steps, 1)]
        return "\n".join(lines)


def where(route: Route) -> str:
    """Where a route delivers: `slack T0ACME/C0OPS`, `sms +1555…`, `dashboard`."""
    if isinstance(route, SlackRoute):
        return f"slack {route.team_id}/{route.channel_id}"
    if isinstance(route, SmsRoute):
        return f"{route.surface} {route.from_number or route.messaging_service_sid}"
    if isinstance(route, TeamsRoute):
        return f"teams {route.tenant_id}/{route.conversation_id}"
    return "dashboard"


def differences(live: Ruling, shadow: Ruling) -> dict[str, Any] | None:
    """What the shadow would decide otherwise (mode, deny, route, approvers), or None."""
    changed = {
        key: {"from": a, "to": b}
        for key, a, b in (
            ("deny", live.deny, shadow.deny),
            ("mode", live.mode.value, shadow.mode.value),
            ("route", _route_of(live), _route_of(shadow)),
            ("approvers", list(live.approvers), list(shadow.approvers)),
            ("invalid", live.invalid is not None, shadow.invalid is not None),
        )
        if a != b
    }
    if not changed:
        return None
    return {
        "from": live.label,
        "to": shadow.label,
        "rule": shadow.decided_by,
        "loosens": loosens(live, shadow),
        "changed": changed,
    }


def _route_of(ruling: Ruling) -> str | None:
    if isinstance(ruling.route, ApprovalModeUnsupported):
        return "unsupported"
    return where(ruling.route) if ruling.route is not None and not ruling.runs_unasked else None


def loosens(before: Ruling, after: Ruling) -> bool:
    """True when a call asked (or refused) before would now run with nobody asked."""
    return after.runs_unasked and not before.runs_unasked

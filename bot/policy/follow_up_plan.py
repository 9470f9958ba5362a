"""What a pending request will do while nobody answers: one reminder, then each escalation.

`plan` is asked by `bot.policy.decision.rule_on` when a rule has `remind_after` or `escalate`, so
`policy explain` says it and the intake queues it: each step is a job due at its time
(`jobs`), run by `bot.workers.follow_ups` if the request is still pending then. A step's route is
worked out here, when the request arrives: a `to` that cannot be reached for this tenant
refuses the request (fail closed), naming the key; a step at or after this request's own
timeout (an agent may ask for less time) is left out and the explanation says so.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from bot.policy.durations import format_duration
from bot.policy.oncall_refs import OnCallRef
from bot.policy.routing import SmsSender, route_to
from bot.policy.rules import Policy, ToolRule
from contracts.enums import ApproverKind, JobKind
from contracts.errors import ApprovalModeUnsupported
from contracts.ports import Route
from storage.jobs import EscalationStep, Queued


@dataclass(frozen=True)
class Planned:
    """One escalation step of a request: its index in `escalate`, when, to whom, where."""

    step: int
    after: float
    to: ApproverKind
    route: Route
    # A rotation: whoever is on call when the step falls due is asked (`bot.workers.follow_ups`),
    # `route` (to `to`, the tenant's admins) only if nobody on call can be reached then.
    oncall: OnCallRef | None = None


@dataclass(frozen=True)
class Plan:
    """A request's follow-ups: the reminder's delay (None: none) and the escalation steps."""

    remind_after: float | None
    steps: tuple[Planned, ...]
    said: tuple[tuple[str, str], ...]  # (key path, what it means here), for the explanation

    def jobs(self, now: float, expires_at: float) -> list[Queued]:
        """The jobs that carry it out, each due at its time and pointless after the expiry."""
        queued = []
        if self.remind_after is not None:
            queued.append(Queued(JobKind.REMIND, now + self.remind_after, expires_at))
        for s in self.steps:
            step = EscalationStep(s.step, s.to, s.route, str(s.oncall) if s.oncall is not None else None)
            queued.append(Queued(JobKind.ESCALATE, now + s.after, expires_at, step))
        return queued


def plan(
    policy: Policy,
    tenant: str,
    rule: ToolRule,
    surface: object,
    route: Route,
    timeout: float,
    *,
    enabled: Collection[str],
    sms: SmsSender,
) -> Plan | ApprovalModeUnsupported:
    """The follow-ups of one request asked on `route` with `timeout` seconds to answer."""
    said: list[tuple[str, str]] = []
    remind = rule.remind_after
    if remind is not None:
        path = rule.origin("remind_after")
        if remind < timeout:
            said.append((path, f"{format_duration(remind)}: one reminder to whoever has not answered yet"))
        else:
            said.append((path, _too_late(remind, timeout)))
            remind = None
    steps: list[Planned] = []
    for i, step in enumerate(rule.escalate):
        path = f"{rule.origin('escalate')}[{i}]"
        found = route_to(policy, tenant, step.to, surface, enabled, sms)
        if not isinstance(found, Route):
            return ApprovalModeUnsupported(
                f"{path}.to names {step.to.value}, who cannot be reached for this request: "
                + "; ".join(found)
                + "; add them to the policy or remove the step",
                policy=f"{path}.to",
                surface=str(getattr(surface, "type", "unknown")),
                tool=rule.name,
            )
        if step.after >= timeout:
            said.append((path, _too_late(step.after, timeout)))
        elif step.oncall is not None:
            said.append(
                (
                    path,
                    f"after {format_duration(step.after)} still pending: also to whoever is on call then "
                    f"for {step.oncall} ({step.to.value} if nobody on call can be reached)",
                )
            )
            steps.append(Planned(i, step.after, step.to, found, step.oncall))
        elif found == route:
            said.append((path, f"{step.to.value} is where the request is asked already: nothing to add"))
        else:
            who = ", ".join(found.approvers)
            said.append(
                (path, f"after {format_duration(step.after)} still pending: also to {step.to.value} ({who})")
            )
            steps.append(Planned(i, step.after, step.to, found))
    return Plan(remind, tuple(steps), tuple(said))


def _too_late(after: float, timeout: float) -> str:
    return (
        f"{format_duration(after)} is not before this request's timeout ({format_duration(timeout)}): "
        "not taken (expiry means deny)"
    )

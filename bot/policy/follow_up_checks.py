"""The policy checks of `remind_after` and `escalate`, each problem with its key path.

They read the merged rules (a tenant's override over the tool's or operation's section), so
they run once the rest of the file is valid: a step must come before every timeout the
request can have (the tool's own, else the one of each surface its approvers may be asked
on: `sms_timeout` is not `timeout`), steps go in the order they happen, a step's `to` must
be a route the tenant has, and a section whose follow-ups can never run (a tool that never
asks a person, or is always denied) is refused.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from bot.policy.durations import format_duration
from bot.policy.oncall_refs import OnCallRef
from bot.policy.schema import Defaults, EscalateStep, HandoffSection, StaffPolicy, TenantPolicy
from contracts.enums import ApprovalMode, ApproverKind, SurfaceType


class MergedRule(Protocol):
    """What the checks read of a merged tool or operation rule (`bot.policy.rules.ToolRule`)."""

    @property
    def name(self) -> str: ...
    @property
    def deny(self) -> bool: ...
    @property
    def mode(self) -> ApprovalMode: ...
    @property
    def handoff(self) -> HandoffSection | None: ...
    @property
    def approvers(self) -> tuple[ApproverKind, ...]: ...
    @property
    def oncall(self) -> tuple[OnCallRef, ...]: ...
    @property
    def timeout(self) -> float | None: ...
    @property
    def remind_after(self) -> float | None: ...
    @property
    def escalate(self) -> tuple[EscalateStep, ...]: ...
    @property
    def origins(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def when(self) -> tuple[object, ...]: ...
    def origin(self, key: str) -> str: ...


class LoadedPolicy(Protocol):
    """What the checks read of a loaded policy (`bot.policy.rules.Policy`, which runs them as
    it loads: named here as a protocol so that this module needs nothing of that one)."""

    @property
    def defaults(self) -> Defaults: ...
    @property
    def staff(self) -> StaffPolicy | None: ...
    @property
    def tenants(self) -> Mapping[str, TenantPolicy]: ...
    def tenant(self, name: str) -> TenantPolicy: ...
    def rules_of(self, tenant: str) -> Sequence[MergedRule]: ...


_REQUESTER_SURFACES = (
    SurfaceType.SLACK,
    SurfaceType.SMS,
    SurfaceType.DASHBOARD,
    SurfaceType.TEAMS,
    SurfaceType.WHATSAPP,
)


@dataclass(frozen=True)
class FollowUpRule:
    """What the checks read of one merged tool or operation rule, for one tenant ("" none)."""

    tenant: str
    name: str
    asks: bool  # a person is asked (not `none`, not denied)
    handoff: bool
    approvers: tuple[ApproverKind, ...]
    oncall: tuple[OnCallRef, ...]
    timeout: float | None
    timeout_path: str
    remind_after: float | None
    escalate: tuple[EscalateStep, ...]
    remind_path: str
    escalate_path: str


def follow_up_problems(policy: LoadedPolicy) -> list[str]:
    """Every problem of the follow-ups in `policy`, once each."""
    problems: list[str] = []
    applies: dict[str, bool] = {}
    for rule in _rules(policy):
        for path, present in ((rule.remind_path, rule.remind_after), (rule.escalate_path, rule.escalate)):
            if present:
                applies[path] = applies.get(path, False) or rule.asks
        if not rule.asks:
            continue
        problems += _timing(policy, rule)
        problems += _steps(policy, rule)
    for path, asks in applies.items():
        if not asks:
            problems.append(
                f"{path}: can never run, because this tool never asks a person (its mode is "
                "none, or deny = true refuses every call); remove it, or make the tool ask"
            )
    return list(dict.fromkeys(problems))


def _rules(policy: LoadedPolicy) -> Iterator[FollowUpRule]:
    """The merged rules with follow-ups: the file's own, and each named tenant's."""
    tenants: list[tuple[str, TenantPolicy | None]] = [("", None), *policy.tenants.items()]
    for tenant, section in tenants:
        for rule in policy.rules_of(tenant):
            if rule.remind_after is None and not rule.escalate:
                continue
            timeout_path = rule.origin("timeout")
            if rule.handoff is not None and "timeout" not in dict(rule.origins):
                timeout_path = rule.origin("handoff") + ".timeout"
            yield FollowUpRule(
                tenant=tenant,
                name=rule.name,
                # A `when` block asks whatever the tool's own mode (a call it cannot evaluate too).
                asks=not rule.deny and (rule.mode is not ApprovalMode.NONE or bool(rule.when)),
                handoff=rule.handoff is not None,
                approvers=_asked(rule.approvers, section),
                oncall=rule.oncall,
                timeout=rule.timeout,
                timeout_path=timeout_path,
                remind_after=rule.remind_after,
                escalate=rule.escalate,
                remind_path=rule.origin("remind_after"),
                escalate_path=rule.origin("escalate"),
            )


def _asked(approvers: tuple[ApproverKind, ...], section: TenantPolicy | None) -> tuple[ApproverKind, ...]:
    """The approver kinds a request may be asked of: the rule's, and the headless route."""
    headless = section.headless_route if section is not None else None
    return tuple(dict.fromkeys([*approvers, *([headless] if headless else [])]))


def _timing(policy: LoadedPolicy, rule: FollowUpRule) -> list[str]:
    """Each follow-up must come before the shortest timeout the request can have."""
    shortest = _shortest_timeout(policy, rule)
    if shortest is None:
        return []  # nobody can be asked here: the request is refused when it arrives
    limit, where = shortest
    timed = [(rule.remind_path, rule.remind_after)] if rule.remind_after is not None else []
    timed += [(f"{rule.escalate_path}[{i}].after", s.after) for i, s in enumerate(rule.escalate)]
    return [
        f"{path}: {format_duration(at)} is not before the request's timeout of "
        f"{format_duration(limit)} ({where}); a step at or after the timeout never runs "
        "(expiry means deny): move it earlier, or give the tool a longer timeout"
        for path, at in timed
        if at >= limit
    ]


def _shortest_timeout(policy: LoadedPolicy, rule: FollowUpRule) -> tuple[float, str] | None:
    """The shortest timeout a request of this rule can get from the policy, and where it is set."""
    if rule.timeout is not None:
        return rule.timeout, rule.timeout_path
    d = policy.defaults
    own = {SurfaceType.SMS: "sms_timeout", SurfaceType.SLACK: "slack_timeout"}
    own[SurfaceType.DASHBOARD] = "dashboard_timeout"
    found: list[tuple[float, str]] = []
    for surface in _surfaces(policy, rule):
        key = own.get(surface)
        path = f"defaults.{key}" if key and getattr(d, key) else "defaults.timeout"
        found.append((d.timeout_on(surface), f"{path}, on {surface.value}"))
    return min(found, default=None)


def _surfaces(policy: LoadedPolicy, rule: FollowUpRule) -> set[SurfaceType]:
    """Where the request may be asked: any person surface for the requester, the routes of
    admins and staff as configured."""
    out: set[SurfaceType] = set()
    tenant = policy.tenant(rule.tenant)
    for kind in rule.approvers:
        if kind is ApproverKind.REQUESTER:
            out.update(_REQUESTER_SURFACES)
        elif kind is ApproverKind.TENANT_ADMINS:
            out.update(_admin_surfaces(tenant))
        elif kind is ApproverKind.EMAIL:
            out.add(SurfaceType.DASHBOARD)
        else:
            out.update(_staff_surfaces(policy.staff))
    return out


def _admin_surfaces(tenant: TenantPolicy) -> set[SurfaceType]:
    a = tenant.admins
    out: set[SurfaceType] = set()
    if a.slack and tenant.admin_channel and (tenant.slack_team or tenant.slack_enterprise):
        out.add(SurfaceType.SLACK)
    if a.sms:
        out.add(SurfaceType.SMS)
    if a.dashboard or a.email:
        out.add(SurfaceType.DASHBOARD)
    return out


def _staff_surfaces(staff: StaffPolicy | None) -> set[SurfaceType]:
    out: set[SurfaceType] = set()
    if staff is None:
        return out
    if staff.users and staff.channel and (staff.slack_team or staff.slack_enterprise):
        out.add(SurfaceType.SLACK)
    if staff.sms:
        out.add(SurfaceType.SMS)
    if staff.email:
        out.add(SurfaceType.DASHBOARD)
    return out


def _steps(policy: LoadedPolicy, rule: FollowUpRule) -> list[str]:
    """Order, repeats, handoffs and routes that cannot exist."""
    problems: list[str] = []
    path = rule.escalate_path
    if rule.escalate and rule.handoff:
        problems.append(
            f"{path}: a handoff is a step its own person does; it cannot be escalated to "
            "others: remove escalate or the handoff section"
        )
        return problems
    seen: dict[ApproverKind, int] = {}
    for i, step in enumerate(rule.escalate):
        if i and step.after <= rule.escalate[i - 1].after:
            problems.append(
                f"{path}[{i}].after: {format_duration(step.after)} is not after the step before it "
                f"({format_duration(rule.escalate[i - 1].after)}); list the steps in the order they happen"
            )
        if step.oncall is not None:
            # Whoever is on call then; the tenant's admins (`to`) only if nobody can be reached.
            if str(step.oncall) in map(str, rule.oncall) and len(rule.oncall) == 1:
                problems.append(
                    f"{path}[{i}].to: the request is asked of {step.oncall} already; escalate to the "
                    "next level of its escalation policy (oncall:pagerduty:POLICY:LEVEL) or to someone else"
                )
            missing = _unreachable(policy, rule.tenant, step.to)
            if missing:
                problems.append(f"{path}[{i}].to: {missing} (asked when nobody on call can be reached)")
            continue
        if step.to in seen:
            problems.append(
                f"{path}[{i}].to: {step.to.value} is escalated to already by {path}[{seen[step.to]}]; "
                "a route is asked once: remove one of the steps"
            )
        seen.setdefault(step.to, i)
        if rule.approvers == (step.to,) and not rule.oncall:
            problems.append(
                f"{path}[{i}].to: the request is asked of {step.to.value} already; escalate to "
                "someone else (tenant_admins or staff)"
            )
        missing = _unreachable(policy, rule.tenant, step.to)
        if missing:
            problems.append(f"{path}[{i}].to: {missing}")
    return problems


def _unreachable(policy: LoadedPolicy, tenant: str, to: ApproverKind) -> str | None:
    """Why `to` can never be reached for this tenant, or None. A tenant without a section of
    its own is checked when its request arrives (it is refused then, naming this key)."""
    if to is ApproverKind.STAFF:
        if policy.staff is None:
            return 'names "staff" but there is no [staff] section; add one with channel and users, or sms'
        if not _staff_surfaces(policy.staff):
            return "[staff] has no reachable users; set slack_team, channel and users, sms, or email"
        return None
    if not tenant or to is ApproverKind.EMAIL:
        return None  # email: `bot.policy.email_approvers` names a tenant without addresses
    if not _admin_surfaces(policy.tenant(tenant)):
        return (
            f"tenant {tenant} lists no reachable admins; set tenants.{tenant}.admins "
            "(slack with admin_channel and slack_team, sms or dashboard)"
        )
    return None

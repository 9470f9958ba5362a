"""The policy's one decision path: what it decides for a call, and why, step by step.

`rule_on` is what `Engine.create` asks before its transaction, and what `cosigner policy
explain`, `policy test`, `policy replay` and the shadow policy ask: one function, so an
explanation cannot drift from the decision it explains. What only the database knows (an
approver's standing deny, the per-run cap, an earlier "approve for this run") is checked
after it, in `bot.approvals.intake`, and the explanation says so.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from bot.policy.cedar_decision import cedar_rule
from bot.policy.durations import format_duration
from bot.policy.follow_up_plan import plan
from bot.policy.quorum import check_route
from bot.policy.redaction import REDACTED, redact
from bot.policy.routing import SmsSender, is_headless, route_for
from bot.policy.rules import Policy, ToolRule
from bot.policy.ruling import PathStep, Ruling, differences, loosens, where
from bot.policy.thresholds import above, below, unreadable
from bot.policy.tool_rule import first_block
from contracts.enums import ApprovalMode, ApproverKind, SurfaceType, ToolKind
from contracts.errors import ApprovalModeUnsupported
from contracts.ports import Route

RUN_TIME = "(at run time)"


def rule_on(
    policy: Policy,
    tenant: str,
    tool: str,
    parameters: Mapping[str, Any],
    surface: object | None,
    *,
    enabled: Collection[str],
    sms: SmsSender | None = None,
    requested_timeout: int | None = None,
    rule: ToolRule | None = None,
    oncall: Route | None = None,
    annotations: Mapping[str, Any] | None = None,
    agent: str = "",
    now: float | None = None,
) -> Ruling:
    """Decide a call by the policy alone; `surface` None leaves the route out. `oncall`: the
    route to whoever is on call now (`bot.oncall`), where the rule names a rotation and its
    people were found; without it such a rule asks its other approvers. `annotations` are an
    MCP tool's hints, which `when` blocks may ask or refuse by. `agent` (the agent key's id)
    and `now` are what a Cedar policy may read besides the call."""
    unevaluable = None
    if rule is None and policy.cedar is not None:
        base = policy.rule_for(tenant, tool)
        rule, cedar_said, unevaluable = cedar_rule(
            policy.cedar, base, tenant, parameters, surface, agent, now
        )
        steps = [PathStep(path, says) for path, says in cedar_said]
    else:
        rule = rule or policy.rule_for(tenant, tool)
        steps = [_found(rule, tool)]

    def ruling(**kw: Any) -> Ruling:
        assert rule is not None  # set above; a `when` block may replace it
        return Ruling(tenant=tenant, tool=tool, rule=rule, steps=tuple(steps), **kw)

    if rule.deny:
        path = rule.block or rule.origin("deny")
        said = "forbid: the call is refused" if rule.block else "true: every call is refused"
        steps.append(PathStep(path, f"{said} ({rule.deny_reason or 'no reason given'})"))
        return ruling(mode=rule.mode, deny=True, decided_by=path, route=None, threshold=None, timeout=None)
    bad = unreadable(rule, parameters)
    if bad is not None:
        steps.append(PathStep(bad.path, f"refused as invalid: {bad.message}"))
        return ruling(
            mode=rule.mode,
            deny=False,
            decided_by=bad.path,
            route=None,
            threshold=None,
            timeout=None,
            invalid=bad,
        )
    over, said = above(rule, parameters)
    if rule.deny_above is not None:
        path = rule.origin("deny_above")
        steps.append(PathStep(path, said + (": the call is refused" if over else ": not refused by it")))
        if over:
            return ruling(
                mode=rule.mode, deny=True, decided_by=path, route=None, threshold=None, timeout=None
            )
    if rule.when:
        rule, tried, unevaluable = first_block(rule, parameters, annotations)
        steps += [PathStep(path, says) for path, says in tried]
        if rule.deny:
            by = rule.block or rule.origin("when")
            return ruling(mode=rule.mode, deny=True, decided_by=by, route=None, threshold=None, timeout=None)
    mode_path = _mode(rule, tenant, steps)
    if rule.mode is ApprovalMode.NONE:
        _redaction(rule, parameters, steps)
        return ruling(
            mode=rule.mode, deny=False, decided_by=mode_path, route=None, threshold=None, timeout=None
        )
    threshold = _threshold(rule, parameters, steps)
    route: Route | ApprovalModeUnsupported | None = None
    kinds: tuple[ApproverKind, ...] = ()
    if surface is None:
        steps.append(PathStep("(route)", "no surface given: the route and its approvers depend on it"))
    else:
        try:
            route = route_for(policy, tenant, rule, surface, enabled, sms or SmsSender(), oncall)
        except ApprovalModeUnsupported as exc:
            route = exc  # refused only if no threshold decides the call
        if isinstance(route, Route) and (rule.quorum > 1 or rule.separate_duties):
            short = check_route(
                route,
                _fields(surface),
                rule.quorum,
                rule.separate_duties,
                rule.origin("quorum"),
                rule.name,
                policy.people,
            )
            route = short or route
        step, kinds = _route_step(policy, tenant, rule, surface, route)
        if threshold is None:
            steps.append(step)
    if threshold is None and (rule.quorum > 1 or rule.separate_duties):
        steps.append(_quorum_step(rule))
    if threshold is None and rule.step_up:
        steps.append(PathStep(rule.origin("step_up"), STEP_UP_SAYS))
    timeout = None
    if threshold is None and surface is not None and not isinstance(route, ApprovalModeUnsupported):
        on = route.surface if route is not None else SurfaceType(getattr(surface, "type", "api"))
        timeout, source = policy.timeout_with_source(rule, on, requested_timeout)
        steps.append(
            PathStep(source, f"a person has {format_duration(timeout)} to answer; expiry means deny")
        )
    follow_ups = None
    if isinstance(route, Route) and timeout is not None and (rule.remind_after is not None or rule.escalate):
        planned = plan(policy, tenant, rule, surface, route, timeout, enabled=enabled, sms=sms or SmsSender())
        if isinstance(planned, ApprovalModeUnsupported):
            route = planned
            steps.append(PathStep(str(planned.details["policy"]), f"refused, {planned.message}"))
        else:
            follow_ups = planned
            steps += [PathStep(path, says) for path, says in planned.said]
    _redaction(rule, parameters, steps)
    if threshold is None:
        steps.append(
            PathStep(
                RUN_TIME,
                "before anyone is asked the database is checked for an approver's standing deny "
                f"and the per-run cap ({policy.max_gated_calls(tenant)})"
                + (
                    "; an earlier 'approve for this run' lets the call through"
                    if rule.mode is ApprovalMode.ASK
                    else ""
                )
                + "; "
                + _quorum_says(rule),
            )
        )
    decided_by = rule.origin("allow_below") if threshold is not None else mode_path
    mode = ApprovalMode.NONE if threshold is not None else rule.mode
    return ruling(
        quorum=rule.quorum,
        separate_duties=rule.separate_duties,
        mode=mode,
        deny=False,
        decided_by=decided_by,
        route=route,
        threshold=threshold,
        timeout=timeout,
        kinds=() if threshold is not None else kinds,
        follow_ups=follow_ups,
        unevaluable=unevaluable,
    )


STEP_UP_SAYS = (
    "true: an Approve counts only once the approver confirms it with a passkey in the inbox "
    "(WebAuthn, user verification required); Slack, Teams and texts link to the inbox instead "
    "of offering Approve, and a Deny still counts anywhere"
)


def _fields(surface: object) -> Mapping[str, Any]:
    dump = getattr(surface, "model_dump", None)
    return dump(mode="json") if callable(dump) else {}


def _quorum_says(rule: ToolRule) -> str:
    if rule.quorum <= 1:
        return "one answer decides"
    return "each approver's Approve is counted once, as it comes"


def _quorum_step(rule: ToolRule) -> PathStep:
    """Who must approve: a quorum of distinct approvers, and whether the requester counts."""
    apart = ", never the requester (separate_duties)" if rule.separate_duties else ""
    if rule.quorum > 1:
        says = f"{rule.quorum} distinct approvers must approve{apart}; one Deny vetoes"
        return PathStep(rule.origin("quorum"), says)
    return PathStep(rule.origin("separate_duties"), "true: one approver decides, never the requester")


def _found(rule: ToolRule, tool: str) -> PathStep:
    if "kind" not in dict(rule.origins):
        return PathStep(f"tools.{tool}", 'not in the policy: treated as kind = "danger"')
    sections = list(dict.fromkeys(path for _key, path in rule.origins))
    if len(sections) == 1:
        return PathStep(rule.source, f"the rule of [{sections[0]}]")
    return PathStep(rule.source, f"[{sections[0]}], overridden key by key by [{sections[1]}]")


def _mode(rule: ToolRule, tenant: str, steps: list[PathStep]) -> str:
    """Append the step that set the mode; return its key path."""
    if rule.block is not None:
        # `_when` said the block's step; only gate_all may raise a block's allow.
        if rule.gate_all and rule.mode is ApprovalMode.ASK:
            path = f"tenants.{tenant}.gate_all"
            steps.append(PathStep(path, "true: none is raised to ask"))
            return path
        return rule.block
    if rule.handoff is not None:
        path, says = rule.origin("handoff"), "a handoff: a person does the step (Done / Cancel)"
    elif rule.confirm == "always":
        path, says = rule.origin("confirm"), 'confirm = "always" → ask_always'
    elif rule.kind is ToolKind.DANGER and rule.confirm is not False:
        path = rule.origin("kind")
        says = 'kind = "danger" → ask_always'
    elif rule.confirm is True:
        path, says = rule.origin("confirm"), "confirm = true → ask"
    elif rule.confirm is False:
        path, says = rule.origin("confirm"), "confirm = false → none"
    else:
        path, says = rule.origin("kind"), f'kind = "{rule.kind.value}" → none'
    steps.append(PathStep(path, says))
    if rule.gate_all and rule.mode is ApprovalMode.ASK and says.endswith("→ none"):
        path = f"tenants.{tenant}.gate_all"
        steps.append(PathStep(path, "true: none is raised to ask"))
    return path


def _threshold(rule: ToolRule, parameters: Mapping[str, Any], steps: list[PathStep]) -> str | None:
    if rule.allow_below is None:
        return None
    passes, says = below(rule, parameters)
    path = rule.origin("allow_below")
    steps.append(PathStep(path, says + (": nobody is asked" if passes else ": the mode stands")))
    if not passes:
        return None
    return f"{path} ({rule.allow_below.parameter} < {rule.allow_below.value:g})"


def _route_step(
    policy: Policy, tenant: str, rule: ToolRule, surface: object, route: Route | ApprovalModeUnsupported
) -> tuple[PathStep, tuple[ApproverKind, ...]]:
    """The step naming who is asked and where, and the approver kinds asked."""
    headless = policy.tenant(tenant).headless_route
    kinds: tuple[ApproverKind, ...] = rule.approvers
    if is_headless(surface):
        path = f"tenants.{tenant}.headless.route"
        kinds = (headless,) if headless is not None else ()
        named = headless.value if headless is not None else "not set"
    else:
        path = rule.origin("approvers")
        named = ", ".join(k.value for k in rule.approvers)
        if "approvers" not in dict(rule.origins):
            named += " (the default)"
    if rule.oncall:
        path = rule.origin("approvers")
        rotations = ", ".join(map(str, rule.oncall))
        named = (
            f"whoever is on call for {rotations} (asked of the provider when a call arrives); "
            f"if nobody on call can be reached, {named}"
        )
    if isinstance(route, ApprovalModeUnsupported):
        return PathStep(path, f"{named}: refused, {route.message}"), kinds
    who = ", ".join(route.approvers)
    return PathStep(path, f"{named} via {where(route)}: {who} may answer"), kinds


def _redaction(rule: ToolRule, parameters: Mapping[str, Any], steps: list[PathStep]) -> None:
    named = ", ".join(rule.redact) if rule.redact else "no paths named"
    hidden = _hidden(parameters, redact(dict(parameters), rule.redact, rule.show))
    shown = f"; of these parameters: {', '.join(hidden)}" if hidden else ""
    # Redaction adds up over the tool's and the tenant's sections, so the rule's section speaks.
    steps.append(PathStep(rule.origin("redact"), f"{named}, and any value that looks like a secret{shown}"))
    if rule.show:
        steps.append(
            PathStep(rule.origin("show"), f"{', '.join(rule.show)} shown although named like a secret")
        )


def _hidden(given: Any, shown: Any, prefix: str = "") -> list[str]:
    """The dotted paths of `given` that redaction replaced in `shown`."""
    if shown == REDACTED and given != REDACTED:
        return [prefix.rstrip(".") or "(all)"]
    if isinstance(given, dict) and isinstance(shown, dict):
        return [p for k in given for p in _hidden(given[k], shown.get(k), f"{prefix}{k}.")]
    if isinstance(given, list) and isinstance(shown, list):
        return [p for i, v in enumerate(given) for p in _hidden(v, shown[i], f"{prefix}{i}.")]
    return []


__all__ = [
    "RUN_TIME",
    "PathStep",
    "Ruling",
    "above",
    "below",
    "differences",
    "loosens",
    "rule_on",
    "where",
]

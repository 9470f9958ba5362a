"""The TOML policy: tool kinds, approval modes, approvers, redaction, timeouts, tenants.

`load_policy(text)` validates the whole file (raising `PolicyError` listing every problem
with its key path) and works out every tool rule once: `[tools.X]` merged with each
tenant's `[tenants.T.tools.X]`, field by field. `Policy.rule_for(tenant, tool)` is then a
lookup, and is what every decision reads.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path

from bot.policy.allow_for import allow_for_of
from bot.policy.allow_for import problems as allow_for_problems
from bot.policy.cedar import CedarSource
from bot.policy.cedar_policy import refused_keys, source_of
from bot.policy.editable_checks import editable_problems
from bot.policy.email_approvers import email_problems, notify_problems
from bot.policy.follow_up_checks import follow_up_problems
from bot.policy.merge import Layers
from bot.policy.notify import notified
from bot.policy.oncall_refs import OnCallRef, unconfigured
from bot.policy.operation_rules import OperationRule, missing_secrets, operation_rules
from bot.policy.people import People
from bot.policy.quorum import problem as quorum_problem
from bot.policy.schema import (
    Admins,
    Defaults,
    HandoffSection,
    OperationSection,
    PolicyFile,
    StaffPolicy,
    TenantPolicy,
    ToolSection,
)
from bot.policy.step_up_checks import step_up_problems
from bot.policy.tool_rule import Confirm, Threshold, ToolRule, mode_of, outcomes, with_when
from bot.policy.validation import handoff_secrets, read_policy
from bot.policy.visibility import show_problems
from bot.policy.when_checks import schema_types, when_problems
from contracts.enums import ApprovalMode, ApproverKind, SurfaceType, ToolKind
from contracts.errors import PolicyError
from contracts.names import fold

__all__ = [
    "Admins",
    "Defaults",
    "Policy",
    "StaffPolicy",
    "TenantPolicy",
    "Threshold",
    "ToolRule",
    "load_policy",
    "load_policy_file",
    "mode_of",
]


def _rule(
    name: str,
    base: ToolSection | None,
    override: ToolSection | None,
    gate_all: bool,
    source: str,
    override_path: str = "",
) -> ToolRule:
    """Merge a tool section with a tenant's override of it, key by key."""

    layers = Layers((override, override_path), (base, f"tools.{name}"))
    pick = layers.pick
    kind: ToolKind = pick("kind", None) or ToolKind.DANGER
    confirm: Confirm = pick("confirm", None)
    allow = pick("allow_below", None)
    deny_above = pick("deny_above", None)
    handoff: HandoffSection | None = pick("handoff", None)
    timeout = pick("timeout", None)
    quorum: int = pick("quorum", 1)
    separate: bool | None = pick("separate_duties", None)
    when = pick("when", ())
    listed = pick("approvers", (ApproverKind.REQUESTER,))
    oncall = tuple(a for a in listed if isinstance(a, OnCallRef))
    kinds = tuple(a for a in listed if isinstance(a, ApproverKind))
    rule = ToolRule(
        name=name,
        kind=kind,
        confirm=confirm,
        # Nobody on call who can be reached: the other kinds listed, else the tenant's admins.
        approvers=kinds or (ApproverKind.TENANT_ADMINS,),
        oncall=oncall,
        # Redaction adds up: a tenant can hide more, never less.
        redact=layers.joined("redact"),
        show=tuple(pick("show", ())),
        timeout=timeout if timeout is not None or handoff is None else handoff.timeout,
        deny=pick("deny", False),
        deny_reason=pick("deny_reason", None),
        allow_below=Threshold(allow.parameter, allow.value, allow.digits) if allow is not None else None,
        deny_above=(
            Threshold(deny_above.parameter, deny_above.value, deny_above.digits)
            if deny_above is not None
            else None
        ),
        editable=pick("editable", False),
        gate_all=gate_all,
        source=source,
        mode=mode_of(kind, confirm, gate_all, handoff is not None),
        handoff=handoff,
        remind_after=pick("remind_after", None),
        escalate=tuple(pick("escalate", ())),
        notify=notified(pick("notify", ())),
        quorum=quorum,
        separate_duties=separate if separate is not None else quorum > 1,
        step_up=bool(pick("step_up", False)),
        parameters_schema=pick("parameters_schema", None),
        audience=pick("audience", None),
        allow_for=allow_for_of(pick),
        origins=tuple(layers.origins.items()),
    )
    return with_when(rule, when, rule.origin("when"))


def _rules(file: PolicyFile, tenant: str, section: TenantPolicy | None) -> dict[str, ToolRule]:
    """Every tool's merged rule, keyed by its folded name (`policy check` refuses two names
    that fold alike, so each key has one section in the file and one in the tenant's)."""
    overrides = {fold(n): (n, s) for n, s in (section.tools if section is not None else {}).items()}
    bases = {fold(n): (n, s) for n, s in file.tools.items()}
    gate_all = section.gate_all if section is not None else False
    rules = {}
    for key in [*bases, *overrides]:
        base_name, base = bases.get(key, (None, None))
        over_name, over = overrides.get(key, (None, None))
        name = base_name or over_name or key
        override_path = f"tenants.{tenant}.tools.{over_name or name}"
        source = override_path if over is not None else f"tools.{name}"
        rules[key] = _rule(name, base, over, gate_all, source, override_path)
    return rules


class Policy:
    """A validated policy with every tool rule, per tenant, worked out when it is loaded."""

    __slots__ = (
        "_default_rules",
        "_operations",
        "_orgs",
        "_rules",
        "_tenant_operations",
        "cedar",
        "defaults",
        "operations",
        "people",
        "source",
        "staff",
        "tenants",
        "tools",
    )

    def __init__(self, file: PolicyFile, source: str = "policy") -> None:
        self.defaults: Defaults = file.defaults
        self.tools: Mapping[str, ToolSection] = file.tools
        self.operations: Mapping[str, OperationSection] = file.operations
        self.tenants: Mapping[str, TenantPolicy] = {n: t.named(n) for n, t in file.tenants.items()}
        self.staff: StaffPolicy | None = file.staff
        self.people = People(file.people)  # which ids are one person ([people])
        self.source = source
        # Set when Cedar decides each call (bot.policy.cedar_policy); the rules then hold
        # only what a card shows and what happens while nobody answers.
        self.cedar: CedarSource | None = None
        self._default_rules = _rules(file, "", None)
        self._rules = {n: _rules(file, n, t) for n, t in self.tenants.items()}
        self._operations, self._tenant_operations = operation_rules(file, self.tenants)
        self._orgs: dict[tuple[SurfaceType, str], str] = {}
        for n, t in self.tenants.items():
            for surface, org in (
                (SurfaceType.SLACK, t.slack_team),
                (SurfaceType.SLACK, t.slack_enterprise),
                (SurfaceType.SMS, t.sms_from),
                (SurfaceType.SMS, t.sms_messaging_service),
                (SurfaceType.WHATSAPP, t.whatsapp_from and f"whatsapp:{t.whatsapp_from}"),
                (SurfaceType.TEAMS, t.teams_tenant),
            ):
                if org is not None:
                    self._orgs[(surface, org)] = n

    def quorum_problems(self) -> list[str]:
        """Every quorum that could never be met: on a handoff, or above the approvers its
        route can reach (per tenant; a tool's own section where no tenant is involved)."""
        staff = staff_ids(self.staff)
        found: list[str] = []
        contexts: list[tuple[TenantPolicy | None, Mapping[str, ToolRule], Mapping[str, OperationRule]]] = [
            (None, self._default_rules, self._operations)
        ]
        contexts += [
            (self.tenants[n], self._rules[n], self._tenant_operations.get(n, {})) for n in self.tenants
        ]
        for tenant, rules, operations in contexts:
            for r in (o for rule in rules.values() for o in outcomes(rule)):
                if r.mode is ApprovalMode.NONE and r.handoff is None:
                    continue
                # Where no tenant is named, tenant_admins (and email) depend on the tenant: not counted.
                if tenant is None and _per_tenant(r.approvers) and r.handoff is None:
                    continue
                handoff = r.origin("handoff") if r.handoff is not None else None
                # Only tenant_admins and email differ by tenant: otherwise one problem, said once.
                whose = tenant if _per_tenant(r.approvers) else None
                said = quorum_problem(
                    r.origin("quorum"),
                    r.quorum,
                    r.approvers,
                    whose,
                    staff,
                    r.separate_duties,
                    handoff,
                    self.people,
                    r.name,
                )
                if said is not None:
                    found.append(said)
            for o in operations.values():
                if tenant is None and _per_tenant(o.approvers):
                    continue
                path = dict(o.origins).get("quorum", o.source) + ".quorum"
                whose = tenant if _per_tenant(o.approvers) else None
                said = quorum_problem(
                    path, o.quorum, o.approvers, whose, staff, o.separate_duties, None, self.people, o.name
                )
                if said is not None:
                    found.append(said)
        return list(dict.fromkeys(found))

    def tenant(self, name: str) -> TenantPolicy:
        """The tenant's section, or an empty one: a tenant without a section gets defaults."""
        found = self.tenants.get(name)
        return found if found is not None else TenantPolicy().named(name)

    def knows(self, tenant: str, tool: str) -> bool:
        """Whether a section of the policy names this tool (in any case) for this tenant."""
        return fold(tool) in self._rules.get(tenant, self._default_rules)

    def rule_for(self, tenant: str, tool: str) -> ToolRule:
        """The merged rule of `[tools.X]` and `[tenants.T.tools.X]`; unknown tools are danger."""
        rule = self._rules.get(tenant, self._default_rules).get(fold(tool))
        if rule is not None:
            return rule
        section = self.tenants.get(tenant)
        gate_all = section.gate_all if section is not None else False
        return _rule(tool, None, None, gate_all, f"unknown tool {tool} (treated as danger)")

    def tool_rules(self) -> list[ToolRule]:
        """Every tool's rule, of each tenant and of a tenant without a section."""
        return [r for rules in (self._default_rules, *self._rules.values()) for r in rules.values()]

    def rules_of(self, tenant: str) -> list[ToolRule]:
        """Every rule one tenant ("": a tenant without a section) has: each tool's, and each
        operation's in the form a tool's is read (`operation_tool_rule`)."""
        section = self.tenants.get(tenant)
        gate_all = section.gate_all if section is not None else False
        ops = self._tenant_operations.get(tenant, self._operations)
        return [
            *self._rules.get(tenant, self._default_rules).values(),
            *(operation_tool_rule(op, gate_all) for op in ops.values()),
        ]

    def operation_rule(self, tenant: str, name: str) -> OperationRule | None:
        """The merged rule of `[operations.X]` and `[tenants.T.operations.X]`; None if unknown."""
        return self._tenant_operations.get(tenant, self._operations).get(fold(name))

    def operation_problems(self, environ: Mapping[str, str] | None = None) -> list[str]:
        """Every setting the policy needs from the environment that is not set: an operation's
        `secret_env`, the token of each on-call provider a rule names."""
        problems = missing_secrets(self._operations, self._tenant_operations, environ)
        rules = [r for t in ("", *self.tenants) for r in self.rules_of(t)]
        return problems + unconfigured(rules, os.environ if environ is None else environ)

    def max_gated_calls(self, tenant: str) -> int:
        """The per-execution cap for this tenant."""
        section = self.tenants.get(tenant)
        if section is not None and section.max_gated_calls_per_execution is not None:
            return section.max_gated_calls_per_execution
        return self.defaults.max_gated_calls_per_execution

    def timeout_for(self, rule: ToolRule, surface: SurfaceType, requested: int | None) -> float:
        """Seconds a person has: the tool's, else the surface's, else the default; an
        agent's `timeoutSeconds` is honoured up to `max_timeout`."""
        return self.timeout_with_source(rule, surface, requested)[0]

    def timeout_with_source(
        self, rule: ToolRule, surface: SurfaceType, requested: int | None
    ) -> tuple[float, str]:
        """`timeout_for`, with the key path (or request field) the seconds came from."""
        if requested is not None:
            return float(
                min(requested, self.defaults.max_timeout)
            ), "timeoutSeconds (up to defaults.max_timeout)"
        if rule.timeout is not None:
            taken = dict(rule.origins)
            path = rule.origin("timeout") if "timeout" in taken else rule.origin("handoff") + ".timeout"
            return rule.timeout, path
        own = {
            SurfaceType.SMS: "sms_timeout",
            SurfaceType.SLACK: "slack_timeout",
            SurfaceType.DASHBOARD: "dashboard_timeout",
        }.get(surface)
        if own is not None and getattr(self.defaults, own):
            return self.defaults.timeout_on(surface), f"defaults.{own}"
        return self.defaults.timeout_on(surface), "defaults.timeout"

    def tenant_for_org(self, surface: SurfaceType, org: str) -> str | None:
        """The tenant whose section names this Slack team/enterprise, SMS number/service,
        WhatsApp sender (`whatsapp:+1555…`) or Entra tenant."""
        return self._orgs.get((surface, org))


def _per_tenant(approvers: tuple[ApproverKind, ...]) -> bool:
    """Whether who these approvers are depends on the tenant (its admins, its addresses)."""
    return ApproverKind.TENANT_ADMINS in approvers or ApproverKind.EMAIL in approvers


def operation_tool_rule(rule: OperationRule, gate_all: bool) -> ToolRule:
    """An operation's approval rule in the form routing and intake read for tools."""
    return ToolRule(
        name=rule.name,
        kind=rule.kind,
        confirm=rule.confirm,
        approvers=rule.approvers,
        redact=rule.redact,
        show=rule.show,
        timeout=rule.timeout,
        deny=rule.deny,
        deny_reason=None,
        allow_below=None,
        gate_all=gate_all,
        source=rule.source,
        mode=mode_of(rule.kind, rule.confirm, gate_all),
        remind_after=rule.remind_after,
        escalate=rule.escalate,
        quorum=rule.quorum,
        separate_duties=rule.separate_duties,
        step_up=rule.step_up,
        origins=rule.origins,
    )


def staff_ids(staff: StaffPolicy | None) -> dict[SurfaceType, tuple[str, ...]]:
    """The ids of the operator's people who can answer on each surface."""
    if staff is None:
        return {}
    slack = staff.users if staff.channel and (staff.slack_team or staff.slack_enterprise) else ()
    return {SurfaceType.SLACK: slack, SurfaceType.SMS: staff.sms, SurfaceType.DASHBOARD: staff.dashboard}


def load_policy_file(
    path: str | Path, environ: Mapping[str, str] | None = None, *, check_secrets: bool = True
) -> Policy:
    """Read and validate a policy file for running: each handoff's `secret_env` must be set
    (unless `check_secrets` is False: the policy is only read, never run)."""
    p = Path(path)
    if p.suffix == ".cedar":
        policy = load_policy("", source=str(p))
        policy.cedar = CedarSource.load(p)
        return policy
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(
            [f"{p}: cannot read the file ({exc.strerror}); check COSIGNER_POLICY"], str(p)
        ) from exc
    except UnicodeDecodeError as exc:
        raise PolicyError([f"{p}: not UTF-8 text; save the policy as UTF-8 TOML"], str(p)) from exc
    policy = load_policy(text, source=str(p), base=p.parent)
    if not check_secrets:
        return policy
    env = os.environ if environ is None else environ
    # Every variable at once, handoffs' and operations', so that one run names them all.
    problems = handoff_secrets(policy.tools, policy.tenants, env) + policy.operation_problems(env)
    if problems:
        raise PolicyError(problems, str(p))
    return policy


def load_policy(text: str, source: str = "policy", base: Path | None = None) -> Policy:
    """Parse and validate policy TOML; raise `PolicyError` listing every problem. `base` is the
    folder a `parameters_schema` file is read from (the policy file's; else the current one)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError([f"not valid TOML: {exc}"], source) from exc
    file = read_policy(data, source)
    if file.cedar is not None and (refused := refused_keys(file)):
        raise PolicyError(refused, source)  # before the checks of keys Cedar now decides
    policy = Policy(file, source)
    # The follow-ups, the quorum, `editable` and `show` are checked on the merged rules, so
    # once the rest of the file is valid.
    problems = follow_up_problems(policy) + policy.quorum_problems() + editable_problems(policy.tool_rules())
    problems += show_problems(r for t in ("", *policy.tenants) for r in policy.rules_of(t))
    problems += when_problems((r for t in ("", *policy.tenants) for r in policy.rules_of(t)), base)
    problems += step_up_problems(r for t in ("", *policy.tenants) for r in policy.rules_of(t))
    problems += allow_for_problems(
        (r for t in ("", *policy.tenants) for r in policy.rules_of(t)),
        lambda rule, path: schema_types(rule, path, base),
    )
    problems += notify_problems(
        o for t in ("", *policy.tenants) for r in policy.rules_of(t) for o in outcomes(r)
    )
    problems += email_problems(
        ((s, (o for r in policy.rules_of(t) for o in outcomes(r))) for t, s in policy.tenants.items()),
        policy.tenants.values(),
    )
    if problems:
        raise PolicyError(problems, source)
    policy.cedar = source_of(file, base, source)
    return policy

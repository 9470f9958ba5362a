"""The TOML policy: tool kinds, approval modes, approvers, redaction, timeouts, tenants.

`load_policy(text)` validates the whole file and raises `PolicyError` listing every
problem with its key path; `Policy.rule_for(tenant, tool)` merges a tool section with the
tenant's override of it, field by field, and is what every decision reads.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from bot.durations import parse_duration
from contracts.enums import ApprovalMode, ApproverKind, ToolKind
from contracts.errors import PolicyError

Confirm = bool | Literal["always"] | None

_DEFAULT_KEYS = {
    "timeout": "default time a person has to answer",
    "sms_timeout": "time an SMS approver has",
    "slack_timeout": "time a Slack approver has",
    "dashboard_timeout": "time a dashboard approver has",
    "max_timeout": "longest timeoutSeconds an agent may ask for",
    "max_gated_calls_per_execution": "gated calls one executionId may make",
    "grant_ttl": "lifetime of a grant token",
    "callback_retry_window": "how long a callback is retried",
}
_TOOL_KEYS = {"kind", "confirm", "approvers", "redact", "timeout", "deny", "deny_reason",
              "allow_below", "description"}
_TENANT_KEYS = {"slack_team", "slack_enterprise", "sms_from", "sms_messaging_service",
                "admins", "admin_channel", "tools", "headless", "gate_all",
                "max_gated_calls_per_execution", "display_name"}
_STAFF_KEYS = {"slack_team", "slack_enterprise", "channel", "users", "sms", "dashboard"}
_TOP_KEYS = {"defaults", "tools", "tenants", "staff"}


@dataclass(frozen=True)
class Threshold:
    """`allow_below`: no person is needed while `parameter` is a number below `value`."""

    parameter: str
    value: float


@dataclass(frozen=True)
class ToolRule:
    """A tool's effective rule for one tenant, with `source` naming where it came from."""

    name: str
    kind: ToolKind
    confirm: Confirm
    approvers: tuple[ApproverKind, ...]
    redact: tuple[str, ...]
    timeout: float | None
    deny: bool
    deny_reason: str | None
    allow_below: Threshold | None
    gate_all: bool
    source: str

    @property
    def mode(self) -> ApprovalMode:
        """The approval mode of DESIGN.md, raised to `ask` by a tenant's gate_all."""
        if self.confirm == "always" or (self.kind is ToolKind.DANGER and self.confirm is not False):
            mode = ApprovalMode.ASK_ALWAYS
        elif self.confirm is True:
            mode = ApprovalMode.ASK
        else:
            mode = ApprovalMode.NONE
        if self.gate_all and mode is ApprovalMode.NONE:
            return ApprovalMode.ASK
        return mode

    def describe(self) -> str:
        """One line for cards and errors: where the rule lives and what it means."""
        return f"{self.source}: {self.kind.value} → {self.mode.value}"


@dataclass(frozen=True)
class Admins:
    """Approver identities per surface."""

    slack: tuple[str, ...] = ()
    sms: tuple[str, ...] = ()
    dashboard: tuple[str, ...] = ()


@dataclass(frozen=True)
class TenantPolicy:
    """One tenant's section."""

    name: str
    slack_team: str | None = None
    slack_enterprise: str | None = None
    sms_from: str | None = None
    sms_messaging_service: str | None = None
    admins: Admins = Admins()
    admin_channel: str | None = None
    gate_all: bool = False
    headless_route: ApproverKind | None = None
    max_gated_calls: int | None = None
    tools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class StaffPolicy:
    """The operator's own approvers."""

    slack_team: str | None = None
    slack_enterprise: str | None = None
    channel: str | None = None
    users: tuple[str, ...] = ()
    sms: tuple[str, ...] = ()
    dashboard: tuple[str, ...] = ()


@dataclass(frozen=True)
class Defaults:
    """The `[defaults]` section, in seconds where it is a duration."""

    timeout: float = 300.0
    surface_timeouts: Mapping[str, float] = field(default_factory=lambda: {"sms": 3600.0})
    max_timeout: float = 86400.0
    max_gated_calls: int = 20
    grant_ttl: float = 300.0
    callback_retry_window: float = 86400.0


@dataclass(frozen=True)
class Policy:
    """A validated policy file."""

    defaults: Defaults
    tools: Mapping[str, Mapping[str, Any]]
    tenants: Mapping[str, TenantPolicy]
    staff: StaffPolicy | None
    source: str = "policy"

    def tenant(self, name: str) -> TenantPolicy:
        """The tenant's section, or an empty one: a tenant without a section gets defaults."""
        return self.tenants.get(name) or TenantPolicy(name=name)

    def rule_for(self, tenant: str, tool: str) -> ToolRule:
        """Merge `[tools.X]` and `[tenants.T.tools.X]` field by field; unknown tools are danger."""
        base = self.tools.get(tool)
        tpol = self.tenant(tenant)
        override = tpol.tools.get(tool)
        merged: dict[str, Any] = dict(base or {})
        merged.update(override or {})
        if override is not None:
            source = f"tenants.{tenant}.tools.{tool}"
        elif base is not None:
            source = f"tools.{tool}"
        else:
            source = f"unknown tool {tool} (treated as danger)"
        kind = ToolKind(merged["kind"]) if "kind" in merged else ToolKind.DANGER
        raw_allow = merged.get("allow_below")
        allow = Threshold(str(raw_allow["parameter"]), float(raw_allow["value"])) if raw_allow else None
        redact = tuple(base.get("redact", ()) if base else ()) + tuple(
            override.get("redact", ()) if override else ()
        )
        timeout = merged.get("timeout")
        return ToolRule(
            name=tool,
            kind=kind,
            confirm=merged.get("confirm"),
            approvers=tuple(ApproverKind(a) for a in merged.get("approvers", ["requester"])),
            redact=redact,
            timeout=parse_duration(timeout) if timeout is not None else None,
            deny=bool(merged.get("deny", False)),
            deny_reason=merged.get("deny_reason"),
            allow_below=allow,
            gate_all=tpol.gate_all,
            source=source,
        )

    def max_gated_calls(self, tenant: str) -> int:
        """The per-execution cap for this tenant."""
        tpol = self.tenant(tenant)
        return tpol.max_gated_calls if tpol.max_gated_calls is not None else self.defaults.max_gated_calls

    def timeout_for(self, rule: ToolRule, surface: str, requested: int | None) -> float:
        """Seconds a person has: the tool's, else the surface's, else the default; an
        agent's `timeoutSeconds` is honoured up to `max_timeout`."""
        if requested is not None:
            return float(min(requested, self.defaults.max_timeout))
        if rule.timeout is not None:
            return rule.timeout
        return self.defaults.surface_timeouts.get(surface, self.defaults.timeout)

    def tenant_for_org(self, surface: str, org: str) -> str | None:
        """The tenant whose section names this Slack team/enterprise or SMS number/service."""
        for t in self.tenants.values():
            if surface == "slack" and org in (t.slack_team, t.slack_enterprise):
                return t.name
            if surface == "sms" and org in (t.sms_from, t.sms_messaging_service):
                return t.name
        return None


def load_policy_file(path: str | Path) -> Policy:
    """Read and validate a policy file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError([f"{p}: cannot read the file ({exc.strerror}); check COSIGNER_POLICY"],
                          str(p)) from exc
    return load_policy(text, source=str(p))


def load_policy(text: str, source: str = "policy") -> Policy:
    """Parse and validate policy TOML; raise `PolicyError` listing every problem."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError([f"not valid TOML: {exc}"], source) from exc
    v = _Validator()
    policy = v.policy(data, source)
    if v.problems:
        raise PolicyError(v.problems, source)
    return policy


class _Validator:
    """Collects every problem instead of stopping at the first."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def bad(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    def table(self, value: Any, path: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.bad(path, "must be a table")
            return {}
        return value

    def keys(self, table: Mapping[str, Any], allowed: set[str] | Mapping[str, str], path: str) -> None:
        for key in table:
            if key not in allowed and not key.startswith("x_"):
                names = ", ".join(sorted(allowed))
                self.bad(f"{path}.{key}" if path else key,
                         f"unknown key; expected one of {names} (prefix your own fields with x_)")

    def duration(self, value: Any, path: str) -> float | None:
        try:
            return parse_duration(value)
        except ValueError as exc:
            self.bad(path, str(exc))
            return None

    def strings(self, value: Any, path: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(x, str) and x for x in value):
            self.bad(path, 'must be a list of non-empty strings, e.g. ["U0ADMIN"]')
            return ()
        return tuple(value)

    def phones(self, value: Any, path: str) -> tuple[str, ...]:
        numbers = self.strings(value, path)
        for n in numbers:
            if not _is_e164(n):
                self.bad(path, f'"{n}" is not an E.164 number; write it as "+15550000002"')
        return numbers

    def text(self, value: Any, path: str) -> str | None:
        if not isinstance(value, str) or not value:
            self.bad(path, "must be a non-empty string")
            return None
        return value

    def policy(self, data: dict[str, Any], source: str) -> Policy:
        self.keys(data, _TOP_KEYS, "")
        defaults = self.defaults(self.table(data.get("defaults", {}), "defaults"))
        tools: dict[str, Mapping[str, Any]] = {}
        for name, section in self.table(data.get("tools", {}), "tools").items():
            tools[name] = self.tool(section, f"tools.{name}", require_kind=True)
        staff = None
        if "staff" in data:
            staff = self.staff(self.table(data["staff"], "staff"))
        tenants: dict[str, TenantPolicy] = {}
        for name, section in self.table(data.get("tenants", {}), "tenants").items():
            tenants[name] = self.tenant(name, self.table(section, f"tenants.{name}"), tools)
        self.cross_check(tools, tenants, staff)
        return Policy(defaults=defaults, tools=tools, tenants=tenants, staff=staff, source=source)

    def defaults(self, d: dict[str, Any]) -> Defaults:
        self.keys(d, _DEFAULT_KEYS, "defaults")
        out = Defaults()
        surface: dict[str, float] = dict(out.surface_timeouts)
        values: dict[str, Any] = {}
        for key in ("timeout", "max_timeout", "grant_ttl", "callback_retry_window"):
            if key in d:
                seconds = self.duration(d[key], f"defaults.{key}")
                if seconds is not None:
                    values[key] = seconds
        for name in ("sms", "slack", "dashboard"):
            key = f"{name}_timeout"
            if key in d:
                seconds = self.duration(d[key], f"defaults.{key}")
                if seconds is not None:
                    surface[name] = seconds
        cap = d.get("max_gated_calls_per_execution", out.max_gated_calls)
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            self.bad("defaults.max_gated_calls_per_execution", "must be a whole number ≥ 1")
            cap = out.max_gated_calls
        return Defaults(
            timeout=values.get("timeout", out.timeout),
            surface_timeouts=surface,
            max_timeout=values.get("max_timeout", out.max_timeout),
            max_gated_calls=cap,
            grant_ttl=values.get("grant_ttl", out.grant_ttl),
            callback_retry_window=values.get("callback_retry_window", out.callback_retry_window),
        )

    def tool(self, section: Any, path: str, *, require_kind: bool) -> Mapping[str, Any]:
        t = self.table(section, path)
        self.keys(t, _TOOL_KEYS, path)
        if "kind" in t:
            # A list here is a typo, not a kind; check the type before the set lookup.
            if not isinstance(t["kind"], str) or t["kind"] not in {k.value for k in ToolKind}:
                self.bad(f"{path}.kind", f'"{t["kind"]}" is not a kind; use "read", "write" or "danger"')
        elif require_kind:
            self.bad(f"{path}.kind", 'missing; set kind = "read", "write" or "danger"')
        # `1 in (True, False)` is true in Python, so compare types, not just values: a
        # confirm = 1 must not load and then silently mean mode none.
        if "confirm" in t and not (isinstance(t["confirm"], bool) or t["confirm"] == "always"):
            self.bad(f"{path}.confirm", 'must be true, false or "always"')
        if "approvers" in t:
            approvers = self.strings(t["approvers"], f"{path}.approvers")
            valid = {a.value for a in ApproverKind}
            for a in approvers:
                if a not in valid:
                    self.bad(f"{path}.approvers", f'"{a}" is not an approver; use "requester", '
                             '"tenant_admins" or "staff"')
            if "approvers" in t and not approvers:
                self.bad(f"{path}.approvers", "must name at least one approver")
        if "redact" in t:
            for p in self.strings(t["redact"], f"{path}.redact"):
                if any(not part for part in p.split(".")):
                    self.bad(f"{path}.redact", f'"{p}" is not a dotted path such as "customer.email"')
        if "timeout" in t:
            self.duration(t["timeout"], f"{path}.timeout")
        if "deny" in t and not isinstance(t["deny"], bool):
            self.bad(f"{path}.deny", "must be true or false")
        for key in ("deny_reason", "description"):
            if key in t:
                self.text(t[key], f"{path}.{key}")
        if "allow_below" in t:
            a = t["allow_below"]
            ok = (isinstance(a, dict) and set(a) == {"parameter", "value"}
                  and isinstance(a["parameter"], str) and a["parameter"]
                  and isinstance(a["value"], (int, float)) and not isinstance(a["value"], bool))
            if not ok:
                self.bad(f"{path}.allow_below",
                         'must be { parameter = "amountCents", value = 5000 } with a numeric value')
        return t

    def staff(self, s: dict[str, Any]) -> StaffPolicy:
        self.keys(s, _STAFF_KEYS, "staff")
        return StaffPolicy(
            slack_team=self.text(s["slack_team"], "staff.slack_team") if "slack_team" in s else None,
            slack_enterprise=(self.text(s["slack_enterprise"], "staff.slack_enterprise")
                              if "slack_enterprise" in s else None),
            channel=self.text(s["channel"], "staff.channel") if "channel" in s else None,
            users=self.strings(s["users"], "staff.users") if "users" in s else (),
            sms=self.phones(s["sms"], "staff.sms") if "sms" in s else (),
            dashboard=self.strings(s["dashboard"], "staff.dashboard") if "dashboard" in s else (),
        )

    def tenant(self, name: str, t: dict[str, Any], tools: Mapping[str, Any]) -> TenantPolicy:
        path = f"tenants.{name}"
        self.keys(t, _TENANT_KEYS, path)
        admins = Admins()
        if "admins" in t:
            a = self.table(t["admins"], f"{path}.admins")
            self.keys(a, {"slack", "sms", "dashboard"}, f"{path}.admins")
            admins = Admins(
                slack=self.strings(a["slack"], f"{path}.admins.slack") if "slack" in a else (),
                sms=self.phones(a["sms"], f"{path}.admins.sms") if "sms" in a else (),
                dashboard=(self.strings(a["dashboard"], f"{path}.admins.dashboard")
                           if "dashboard" in a else ()),
            )
        overrides: dict[str, Mapping[str, Any]] = {}
        for tool, section in self.table(t.get("tools", {}), f"{path}.tools").items():
            overrides[tool] = self.tool(section, f"{path}.tools.{tool}", require_kind=tool not in tools)
        route: ApproverKind | None = None
        if "headless" in t:
            h = self.table(t["headless"], f"{path}.headless")
            self.keys(h, {"route"}, f"{path}.headless")
            if h.get("route") in ("tenant_admins", "staff"):
                route = ApproverKind(h["route"])
            else:
                self.bad(f"{path}.headless.route", 'must be "tenant_admins" or "staff"')
        if "gate_all" in t and not isinstance(t["gate_all"], bool):
            self.bad(f"{path}.gate_all", "must be true or false")
        cap = t.get("max_gated_calls_per_execution")
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            self.bad(f"{path}.max_gated_calls_per_execution", "must be a whole number ≥ 1")
            cap = None
        sms_from = t.get("sms_from")
        if sms_from is not None and not (isinstance(sms_from, str) and _is_e164(sms_from)):
            self.bad(f"{path}.sms_from", 'must be an E.164 number such as "+15550000001"')
        for key in ("slack_team", "slack_enterprise", "admin_channel", "sms_messaging_service",
                    "display_name"):
            if key in t:
                self.text(t[key], f"{path}.{key}")
        return TenantPolicy(
            name=name,
            slack_team=t.get("slack_team"),
            slack_enterprise=t.get("slack_enterprise"),
            sms_from=sms_from,
            sms_messaging_service=t.get("sms_messaging_service"),
            admins=admins,
            admin_channel=t.get("admin_channel"),
            gate_all=bool(t.get("gate_all", False)),
            headless_route=route,
            max_gated_calls=cap,
            tools=overrides,
        )

    def cross_check(self, tools: Mapping[str, Mapping[str, Any]],
                    tenants: Mapping[str, TenantPolicy], staff: StaffPolicy | None) -> None:
        uses_staff = [f"tools.{n}.approvers" for n, t in tools.items() if _names_staff(t)]
        uses_staff += [f"tenants.{tn}.tools.{n}.approvers" for tn, t in tenants.items()
                       for n, o in t.tools.items() if _names_staff(o)]
        uses_staff += [f"tenants.{tn}.headless.route" for tn, t in tenants.items()
                       if t.headless_route is ApproverKind.STAFF]
        if uses_staff and staff is None:
            for path in uses_staff:
                self.bad(path, 'names "staff" but there is no [staff] section; add one with users')
        seen: dict[str, str] = {}
        for tn, t in tenants.items():
            for key in (t.slack_team, t.slack_enterprise, t.sms_from, t.sms_messaging_service):
                # Wrongly typed values were reported already and may not be hashable.
                if not isinstance(key, str):
                    continue
                if key in seen and seen[key] != tn:
                    self.bad(f"tenants.{tn}", f'"{key}" is also claimed by tenants.{seen[key]}; '
                             "a workspace or number belongs to one tenant")
                seen[key] = tn


def _names_staff(section: Mapping[str, Any]) -> bool:
    approvers = section.get("approvers")
    return isinstance(approvers, list) and "staff" in approvers


def _is_e164(number: str) -> bool:
    return len(number) >= 8 and len(number) <= 16 and number[0] == "+" and number[1:].isdigit() \
        and number[1] != "0"

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
_TOOL_KEYS = {
    "kind",
    "confirm",
    "approvers",
    "redact",
    "timeout",
    "deny",
    "deny_reason",
    "allow_below",
    "description",
}
_TENANT_KEYS = {
    "slack_team",
    "slack_enterprise",
    "sms_from",
    "sms_messaging_service",
    "admins",
    "admin_channel",
    "tools",
    "headless",
    "gate_all",
    "max_gated_calls_per_execution",
    "display_name",
}
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
        raise PolicyError(
            [f"{p}: cannot read the file ({exc.strerror}); check COSIGNER_POLICY"], str(p)
        ) from exc
    except UnicodeDecodeError as exc:
        raise PolicyError([f"{p}: not UTF-8 text; save the policy as UTF-8 TOML"], str(p)) from exc
    return load_policy(text, source=str(p))


def load_policy(text: str, source: str = "policy") -> Policy:
    """Parse and validate policy TOML; raise `PolicyError` listing every problem."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError([f"not valid TOML: {exc}"], source) from exc
    from bot.policy_file import Validator  # the validator builds this module's classes

    v = Validator()
    policy = v.policy(data, source)
    if v.problems:
        raise PolicyError(v.problems, source)
    return policy

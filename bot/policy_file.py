"""Validation of a parsed policy file: every problem, each with its key path.

`bot.policy.load_policy` parses the TOML and hands the data to `Validator`, which builds
the `Policy` and lists what is wrong in words that say how to fix it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.durations import parse_duration
from bot.policy import (
    _DEFAULT_KEYS,
    _STAFF_KEYS,
    _TENANT_KEYS,
    _TOOL_KEYS,
    _TOP_KEYS,
    Admins,
    Defaults,
    Policy,
    StaffPolicy,
    TenantPolicy,
)
from contracts.enums import ApproverKind, ToolKind


class Validator:
    """Collects every problem in a parsed policy instead of stopping at the first."""

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
                self.bad(
                    f"{path}.{key}" if path else key,
                    f"unknown key; expected one of {names} (prefix your own fields with x_)",
                )

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
                    self.bad(
                        f"{path}.approvers",
                        f'"{a}" is not an approver; use "requester", "tenant_admins" or "staff"',
                    )
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
            ok = (
                isinstance(a, dict)
                and set(a) == {"parameter", "value"}
                and isinstance(a["parameter"], str)
                and a["parameter"]
                and isinstance(a["value"], (int, float))
                and not isinstance(a["value"], bool)
            )
            if not ok:
                self.bad(
                    f"{path}.allow_below",
                    'must be { parameter = "amountCents", value = 5000 } with a numeric value',
                )
        return t

    def staff(self, s: dict[str, Any]) -> StaffPolicy:
        self.keys(s, _STAFF_KEYS, "staff")
        return StaffPolicy(
            slack_team=self.text(s["slack_team"], "staff.slack_team") if "slack_team" in s else None,
            slack_enterprise=(
                self.text(s["slack_enterprise"], "staff.slack_enterprise")
                if "slack_enterprise" in s
                else None
            ),
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
                dashboard=(
                    self.strings(a["dashboard"], f"{path}.admins.dashboard") if "dashboard" in a else ()
                ),
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
        for key in (
            "slack_team",
            "slack_enterprise",
            "admin_channel",
            "sms_messaging_service",
            "display_name",
        ):
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

    def cross_check(
        self,
        tools: Mapping[str, Mapping[str, Any]],
        tenants: Mapping[str, TenantPolicy],
        staff: StaffPolicy | None,
    ) -> None:
        uses_staff = [f"tools.{n}.approvers" for n, t in tools.items() if _names_staff(t)]
        uses_staff += [
            f"tenants.{tn}.tools.{n}.approvers"
            for tn, t in tenants.items()
            for n, o in t.tools.items()
            if _names_staff(o)
        ]
        uses_staff += [
            f"tenants.{tn}.headless.route"
            for tn, t in tenants.items()
            if t.headless_route is ApproverKind.STAFF
        ]
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
                    self.bad(
                        f"tenants.{tn}",
                        f'"{key}" is also claimed by tenants.{seen[key]}; '
                        "a workspace or number belongs to one tenant",
                    )
                seen[key] = tn


def _names_staff(section: Mapping[str, Any]) -> bool:
    approvers = section.get("approvers")
    return isinstance(approvers, list) and "staff" in approvers


def _is_e164(number: str) -> bool:
    return (
        len(number) >= 8
        and len(number) <= 16
        and number[0] == "+"
        and number[1:].isdigit()
        and number[1] != "0"
    )

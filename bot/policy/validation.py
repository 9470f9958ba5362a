"""Validation of a parsed policy document: every problem at once, each with its key path.

The models in `bot.policy.schema` check each value; the checks here span sections (a tenant
override of a tool the file does not define, `staff` named without a `[staff]` section, a
workspace claimed by two tenants, a threshold a standing deny makes unreachable).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

from pydantic import ValidationError

from bot.policy.people import people_problems
from bot.policy.schema import (
    Admins,
    AllowBelow,
    Defaults,
    DenyAbove,
    EscalateStep,
    Expect,
    HandoffSection,
    Headless,
    OperationOverride,
    OperationSection,
    PolicyFile,
    StaffPolicy,
    TenantPolicy,
    ToolOverride,
    ToolSection,
)
from bot.policy.schema_types import Table
from bot.policy.when_schema import Conditions, WhenBlock
from contracts.enums import ApproverKind
from contracts.errors import PolicyError
from contracts.names import fold

T = TypeVar("T")


def read_policy(data: dict[str, Any], source: str) -> PolicyFile:
    """Validate a parsed document; raise `PolicyError` listing every problem."""
    parsed: PolicyFile | None = None
    try:
        parsed = PolicyFile.model_validate(data)
        problems: list[str] = []
    except ValidationError as exc:
        problems = [_describe(e) for e in exc.errors(include_url=False)]
    problems += cross_check(parsed or _partial(data), set(_table(data.get("tools"))))
    if problems or parsed is None:
        raise PolicyError(list(dict.fromkeys(problems)), source)
    return parsed


def cross_check(policy: PolicyFile, tool_names: Collection[str]) -> list[str]:
    """Problems that span sections; `tool_names` are the `[tools.…]` keys, valid or not."""
    problems: list[str] = _case_clashes(policy)
    folded_tools = {fold(n) for n in tool_names}
    for tn, tenant in policy.tenants.items():
        for name, override in tenant.tools.items():
            if fold(name) not in folded_tools and override.kind is None:
                problems.append(
                    f"{key_path('tenants', tn, 'tools', name, 'kind')}: missing; there is no "
                    f"[{key_path('tools', name)}], so this "
                    'section defines the tool: set kind = "read", "write" or "danger"'
                )
    if policy.staff is None:
        for path in _staff_paths(policy):
            problems.append(f'{path}: names "staff" but there is no [staff] section; add one with users')
    seen: dict[str, str] = {}
    for tn, t in policy.tenants.items():
        whatsapp = f"whatsapp:{t.whatsapp_from}" if t.whatsapp_from else None
        for key in (t.slack_team, t.slack_enterprise, t.sms_from, t.sms_messaging_service, whatsapp):
            if key is None:
                continue
            if key in seen and seen[key] != tn:
                problems.append(
                    f'{key_path("tenants", tn)}: "{key}" is also claimed by '
                    f"{key_path('tenants', seen[key])}; "
                    "a workspace or number belongs to one tenant"
                )
            seen[key] = tn
    for tn, tenant in policy.tenants.items():
        for name in tenant.operations:
            if fold(name) not in {fold(n) for n in policy.operations}:
                problems.append(
                    f"{key_path('tenants', tn, 'operations', name)}: there is no "
                    f"[{key_path('operations', name)}]; define the operation there first"
                )
    problems += people_problems(policy.people)
    return problems + _unreachable_thresholds(policy) + _stacked_handoffs(policy)


def _named(table: Mapping[str, T], name: str) -> T | None:
    """The section of `table` whose name folds like `name` (names match case-insensitively)."""
    key = fold(name)
    return next((v for n, v in table.items() if fold(n) == key), None)


def _case_clashes(policy: PolicyFile) -> list[str]:
    """Two sections whose names differ only by case: names match case-insensitively, so both
    would claim the same calls and one would silently lose."""
    tables: list[tuple[tuple[str, ...], Collection[str]]] = [
        (("tools",), policy.tools),
        (("operations",), policy.operations),
    ]
    for tn, tenant in policy.tenants.items():
        tables += [
            (("tenants", tn, "tools"), tenant.tools),
            (("tenants", tn, "operations"), tenant.operations),
        ]
    problems: list[str] = []
    for prefix, names in tables:
        first: dict[str, str] = {}
        for name in names:
            taken = first.setdefault(fold(name), name)
            if taken != name:
                problems.append(
                    f"{key_path(*prefix, name)}: names the same {prefix[-1][:-1]} as "
                    f"{key_path(*prefix, taken)} (names match case-insensitively); keep one section"
                )
    return problems


def _stacked_handoffs(policy: PolicyFile) -> list[str]:
    """A handoff with `confirm` or `allow_below`: a handoff is never approved, only done."""
    problems: list[str] = []
    sections: list[tuple[tuple[str, ...], ToolSection, ToolSection | None]] = [
        (("tools", n), t, None) for n, t in policy.tools.items()
    ]
    for tn, tenant in policy.tenants.items():
        sections += [
            (("tenants", tn, "tools", n), o, _named(policy.tools, n)) for n, o in tenant.tools.items()
        ]
    for path, section, base in sections:
        handoff = section.handoff or (
            base.handoff if base and "handoff" not in section.model_fields_set else None
        )
        if handoff is None:
            continue
        for key in ("confirm", "allow_below"):
            if key in section.model_fields_set or (base is not None and key in base.model_fields_set):
                where = (
                    key_path(*path, key) if key in section.model_fields_set else key_path(*path, "handoff")
                )
                problems.append(
                    f"{where}: {key} cannot be set together with a handoff; a handoff is never "
                    f"approved, only done and checked: remove {key} or the handoff section"
                )
    return problems


def handoff_secrets(
    tools: Mapping[str, ToolSection], tenants: Mapping[str, TenantPolicy], environ: Mapping[str, str]
) -> list[str]:
    """Handoffs whose `expect.secret_env` names a variable that is not set (or empty)."""
    problems: list[str] = []
    sections: list[tuple[tuple[str, ...], ToolSection]] = [(("tools", n), t) for n, t in tools.items()]
    for tn, tenant in tenants.items():
        sections += [(("tenants", tn, "tools", n), o) for n, o in tenant.tools.items()]
    for path, section in sections:
        if section.handoff is not None and not environ.get(section.handoff.expect.secret_env):
            name = section.handoff.expect.secret_env
            problems.append(
                f"{key_path(*path, 'handoff', 'expect', 'secret_env')}: the variable {name} is not set; "
                f"set {name} to the secret the application checks the expect call's signature with"
            )
    return problems


def _staff_paths(policy: PolicyFile) -> list[str]:
    paths = [
        key_path("tools", n, "approvers")
        for n, t in policy.tools.items()
        if ApproverKind.STAFF in t.approvers
    ]
    paths += [
        key_path("operations", n, "approvers")
        for n, o in policy.operations.items()
        if ApproverKind.STAFF in o.approvers
    ]
    for tn, tenant in policy.tenants.items():
        paths += [
            key_path("tenants", tn, "tools", n, "approvers")
            for n, o in tenant.tools.items()
            if ApproverKind.STAFF in o.approvers
        ]
        paths += [
            key_path("tenants", tn, "operations", n, "approvers")
            for n, o in tenant.operations.items()
            if o.approvers is not None and ApproverKind.STAFF in o.approvers
        ]
        if tenant.headless_route is ApproverKind.STAFF:
            paths.append(key_path("tenants", tn, "headless", "route"))
    sections: list[tuple[tuple[str, ...], ToolSection]] = [(("tools", n), t) for n, t in policy.tools.items()]
    for tn, tenant in policy.tenants.items():
        sections += [(("tenants", tn, "tools", n), o) for n, o in tenant.tools.items()]
    for prefix, section in sections:
        paths += [
            f"{key_path(*prefix, 'when')}[{i}].approvers"
            for i, block in enumerate(section.when)
            if block.approvers is not None and ApproverKind.STAFF in block.approvers
        ]
    return paths


def _unreachable_thresholds(policy: PolicyFile) -> list[str]:
    """`allow_below` where every rule that takes it also has `deny = true`: deny wins."""
    problems: list[str] = []
    for name, tool in policy.tools.items():
        if tool.allow_below is None:
            continue
        # The tool section's own rule applies to every tenant without an override.
        denies = [tool.deny]
        for tenant in policy.tenants.values():
            o = _named(tenant.tools, name)
            if o is not None and "allow_below" not in o.model_fields_set:
                denies.append(o.deny if "deny" in o.model_fields_set else tool.deny)
        if all(denies):
            problems.append(_deny_wins(key_path("tools", name)))
    for tn, tenant in policy.tenants.items():
        for name, o in tenant.tools.items():
            base = _named(policy.tools, name)
            deny = o.deny if "deny" in o.model_fields_set else (base.deny if base else False)
            if o.allow_below is not None and deny:
                problems.append(_deny_wins(key_path("tenants", tn, "tools", name)))
    return problems


def _deny_wins(path: str) -> str:
    return (
        f"{path}.allow_below: can never apply, because deny = true refuses every call first; "
        "remove one of them"
    )


def _table(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}


def _partial(data: dict[str, Any]) -> PolicyFile:
    """The sections that are valid on their own, so cross-section checks still run."""

    def each(table: Any, model: Callable[[Any], Any]) -> dict[str, Any]:
        out = {}
        for key, value in _table(table).items():
            try:
                out[str(key)] = model(value)
            except ValidationError:
                continue  # reported already
        return out

    staff = None
    if "staff" in data:
        try:
            staff = StaffPolicy.model_validate(data["staff"])
        except ValidationError:
            staff = StaffPolicy()  # present but broken: reported already
    # A person's ids as written, where they are a list of strings (anything else is reported).
    people = {
        str(name): tuple(ids)
        for name, ids in _table(data.get("people")).items()
        if isinstance(ids, list) and all(isinstance(i, str) for i in ids)
    }
    return PolicyFile.model_construct(
        defaults=Defaults(),
        tools=each(data.get("tools"), ToolSection.model_validate),
        operations=each(data.get("operations"), OperationSection.model_validate),
        tenants=each(data.get("tenants"), TenantPolicy.model_validate),
        staff=staff,
        people=people,
    )


_TABLES: Mapping[tuple[str, ...], type[Table]] = {
    (): PolicyFile,
    ("defaults",): Defaults,
    ("tools", "*"): ToolSection,
    ("tools", "*", "allow_below"): AllowBelow,
    ("tools", "*", "deny_above"): DenyAbove,
    ("tools", "*", "handoff"): HandoffSection,
    ("tools", "*", "handoff", "expect"): Expect,
    ("tenants", "*"): TenantPolicy,
    ("tenants", "*", "admins"): Admins,
    ("tenants", "*", "headless"): Headless,
    ("tenants", "*", "tools", "*"): ToolOverride,
    ("tenants", "*", "tools", "*", "allow_below"): AllowBelow,
    ("tenants", "*", "tools", "*", "deny_above"): DenyAbove,
    ("operations", "*"): OperationSection,
    ("tenants", "*", "operations", "*"): OperationOverride,
    ("tenants", "*", "tools", "*", "handoff"): HandoffSection,
    ("tenants", "*", "tools", "*", "handoff", "expect"): Expect,
    ("staff",): StaffPolicy,
    ("tools", "*", "escalate"): EscalateStep,
    ("tenants", "*", "tools", "*", "escalate"): EscalateStep,
    ("operations", "*", "escalate"): EscalateStep,
    ("tenants", "*", "operations", "*", "escalate"): EscalateStep,
    ("tools", "*", "when"): WhenBlock,
    ("tenants", "*", "tools", "*", "when"): WhenBlock,
    ("tools", "*", "when", "match", "*"): Conditions,
    ("tenants", "*", "tools", "*", "when", "match", "*"): Conditions,
}
_BARE = re.compile(r"[A-Za-z0-9_-]+")
_EXAMPLE = 'write allow_below = { parameter = "amountCents", value = 5000 }'
_MISSING = {
    "kind": 'missing; set kind = "read", "write" or "danger"',
    "route": 'missing; set route = "tenant_admins" or "staff"',
    "parameter": f"missing; {_EXAMPLE}",
    "value": f"missing; {_EXAMPLE}",
    "reason": 'missing; say why a person must do this, e.g. reason = "Publishing needs the owner\'s code"',
    "steps": 'missing; list what the person does, e.g. steps = ["Open Settings", "Enter the code"]',
    "expect": 'missing; write expect = { url = "https://app.example/expect", secret_env = "APP_SECRET" }',
    "url": "missing; set url = \"https://…\" (the application's endpoint: an operation's contract "
    "endpoint, or the URL a handoff's Done is checked at)",
    "secret_env": 'missing; set secret_env = "NAME_OF_THE_VARIABLE" holding the signing secret',
    "after": 'missing; write escalate = [{ after = "10m", to = "tenant_admins" }]',
    "to": 'missing; write escalate = [{ after = "10m", to = "tenant_admins" }]',
    "match": "missing; name the parameters and their conditions, e.g. "
    'match = { command = { prefix = "ls" } }',
    "then": 'missing; set then = "allow", "ask" or "deny"',
}


def _shape(loc: tuple[str, ...]) -> tuple[str, ...]:
    """The key path with tool, tenant and parameter names replaced by `*`."""
    wild = {1} if loc[:1] in (("tools",), ("tenants",), ("operations",)) else set()
    if loc[:1] == ("tenants",) and loc[2:3] in (("tools",), ("operations",)):
        wild.add(3)
    # A `when` block's `match` is keyed by parameter paths.
    wild |= {i + 1 for i, part in enumerate(loc) if part == "match" and i and loc[i - 1] == "when"}
    return tuple("*" if i in wild else part for i, part in enumerate(loc))


def _describe(error: Any) -> str:
    """One problem line; list positions are dropped because the message names the value, but
    a `when` block's position is its name (`tools.Bash.when[1]`)."""
    keys: list[str] = []
    index: dict[int, int] = {}
    for part in error["loc"]:
        if isinstance(part, int):
            if keys[-1:] == ["when"]:
                index[len(keys) - 1] = part
            continue
        keys.append(str(part))
    if keys[-1:] == ["[key]"]:
        keys.pop()
    loc = tuple(keys)
    kind = error["type"]
    if kind == "extra_forbidden":
        table = _TABLES.get(_shape(loc[:-1]))
        names = (
            # A field set from another key (`exclude`, as `escalate`'s rotation) is not one to write.
            ", ".join(sorted(f.alias or n for n, f in table.model_fields.items() if not f.exclude))
            if table
            else ""
        )
        message = f"unknown key; expected one of {names} (prefix your own fields with x_)"
        if table is Conditions:
            message += (
                '; a dotted parameter path is written in quotes: "refund.amountCents" = { below = 5000 }'
            )
    elif kind == "missing":
        message = _MISSING.get(loc[-1], "missing")
    elif kind in ("model_type", "dict_type"):
        message = "must be a table"
        if loc[-1:] == ("allow_below",):
            message += ' such as { parameter = "amountCents", value = 5000 }'
    else:
        message = str(error["msg"])
    shown = ".".join(
        (k if _BARE.fullmatch(k) else json.dumps(k)) + (f"[{index[i]}]" if i in index else "")
        for i, k in enumerate(loc)
    )
    return f"{shown or '(top level)'}: {message}"


def key_path(*keys: str) -> str:
    """`tools."issue refund".kind`: keys joined by dots, quoted where TOML needs quotes."""
    return ".".join(k if _BARE.fullmatch(k) else json.dumps(k) for k in keys)

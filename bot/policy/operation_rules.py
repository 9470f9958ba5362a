"""Operation rules: `[operations.NAME]` merged with each tenant's override, worked out once.

An operation is approved like a tool (kind, confirm, approvers, timeout), and names the
application that prepares and executes it (`url`, and `secret_env`, the variable holding
the secret its calls are signed with).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from bot.policy.merge import Layers
from bot.policy.schema import EscalateStep, OperationOverride, OperationSection, PolicyFile, TenantPolicy
from bot.policy.validation import key_path
from contracts.enums import ApproverKind, ToolKind
from contracts.names import fold


@dataclass(frozen=True, slots=True)
class OperationRule:
    """One tenant's effective operation section; `source` names where it came from."""

    name: str
    url: str
    secret_env: str
    kind: ToolKind
    confirm: bool | Literal["always"] | None
    approvers: tuple[ApproverKind, ...]
    redact: tuple[str, ...]
    timeout: float | None
    execute_timeout: float
    prepare_timeout: float
    deny: bool
    source: str
    remind_after: float | None = None
    escalate: tuple[EscalateStep, ...] = ()
    # Which section set each follow-up key (`remind_after`, `escalate`), as for tools.
    quorum: int = 1
    separate_duties: bool = False
    step_up: bool = False  # an Approve counts only once confirmed with a passkey
    origins: tuple[tuple[str, str], ...] = ()
    show: tuple[str, ...] = ()  # secret-looking names shown all the same (`redact` still wins)


def _merge(name: str, base: OperationSection, over: OperationOverride | None, source: str) -> OperationRule:
    layers = Layers((over, source), (base, key_path("operations", name)))

    def pick(key: str) -> Any:
        # An operation section's own defaults (its model's) stand where neither sets the key.
        return layers.pick(key, getattr(base, key))

    quorum = layers.pick("quorum", 1)
    separate = layers.pick("separate_duties", None)
    return OperationRule(
        name=name,
        url=pick("url"),
        secret_env=pick("secret_env"),
        kind=pick("kind"),
        confirm=pick("confirm"),
        approvers=tuple(pick("approvers")),
        redact=layers.joined("redact"),
        show=tuple(pick("show")),
        timeout=pick("timeout"),
        execute_timeout=pick("execute_timeout"),
        prepare_timeout=pick("prepare_timeout"),
        deny=over.deny if over is not None else False,
        source=source,
        remind_after=pick("remind_after"),
        escalate=tuple(pick("escalate") or ()),
        origins=tuple(
            (k, v)
            for k, v in layers.origins.items()
            if k in ("remind_after", "escalate", "timeout", "quorum", "separate_duties", "show", "step_up")
        ),
        quorum=quorum,
        separate_duties=separate if separate is not None else quorum > 1,
        step_up=bool(layers.pick("step_up", False)),
    )


def operation_rules(
    file: PolicyFile, tenants: Mapping[str, TenantPolicy]
) -> tuple[dict[str, OperationRule], dict[str, dict[str, OperationRule]]]:
    """The default rules, and each tenant's, of every operation in the file."""
    # Keyed by the folded name: operation names match case-insensitively.
    defaults = {fold(n): _merge(n, s, None, key_path("operations", n)) for n, s in file.operations.items()}
    bases = {fold(n): (n, s) for n, s in file.operations.items()}
    per_tenant: dict[str, dict[str, OperationRule]] = {}
    for tn, tenant in tenants.items():
        rules = dict(defaults)
        for name, over in tenant.operations.items():
            base_name, base = bases.get(fold(name), (name, None))
            if base is not None:
                rules[fold(name)] = _merge(base_name, base, over, key_path("tenants", tn, "operations", name))
        per_tenant[tn] = rules
    return defaults, per_tenant


def missing_secrets(
    rules: Mapping[str, OperationRule],
    per_tenant: Mapping[str, Mapping[str, OperationRule]],
    environ: Mapping[str, str] | None = None,
) -> list[str]:
    """Problems for every `secret_env` that names an unset (or empty) variable."""
    env = os.environ if environ is None else environ
    problems: dict[str, str] = {}
    for rule in [*rules.values(), *(r for t in per_tenant.values() for r in t.values())]:
        if not env.get(rule.secret_env) and rule.secret_env not in problems:
            problems[rule.secret_env] = (
                f"{rule.source}.secret_env: the variable {rule.secret_env} is not set; "
                "set it to the secret the application checks signatures with"
            )
    return list(problems.values())

"""The Cedar source's rule for one call, from what `rule_on` is given: the surface as Cedar's
context reads it (its type, and the requester that triggered the run)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from bot.policy.cedar import CedarSource, Ruled
from bot.policy.tool_rule import ToolRule
from contracts.denials import requester_of


def _fields(surface: object | None) -> Mapping[str, Any]:
    if isinstance(surface, Mapping):
        return surface
    # A wire model's fields as they are (its type, userId, phone): cheaper than a dump.
    fields = getattr(surface, "__dict__", None)
    return fields if isinstance(fields, dict) else {}


def cedar_rule(
    source: CedarSource,
    base: ToolRule,
    tenant: str,
    parameters: Mapping[str, Any],
    surface: object | None,
    agent: str,
    now: float | None,
    action: str = "call",
) -> Ruled:
    """The rule Cedar decides the call by, its steps, and why it was asked as unknown (if so).
    `surface` None (an explanation without one) is the empty string in `context.surface`;
    a run with nobody behind it (a schedule, a batch) has the empty string as requester."""
    fields = _fields(surface)
    kind = fields.get("type")
    requester = requester_of(fields) or ""
    when = time.time() if now is None else now
    surface_type = kind if isinstance(kind, str) else ""
    return source.rule(base, tenant, agent, parameters, surface_type, requester, when, action)

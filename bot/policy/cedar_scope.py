"""Which of a Cedar source's policies can apply to a call, worked out once per policy load.

A policy whose scope names another tool (`resource == Cosigner::Tool::"other"`) or another
action (`action == Cosigner::Action::"operation"`) can never be satisfied by this call, and
cannot fail on it either: Cedar reads the scope before the conditions and stops there. So
Cedar is given only the policies that can apply, under their own ids (`policy3`), and
answers the same as with the whole set, in less time. Policies scoped otherwise (`in`, `is`,
or not at all) are always kept.

Every tool no scope names gets the same policies (the unscoped ones), so the sets are made
per named tool and action, plus one for the rest: bounded by the policy file, not by callers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import cedarpy

from bot.policy.cedar_entities import NAMESPACE, reads

Reads = tuple[frozenset[str] | None, frozenset[str] | None]


def _named(scope: Any) -> tuple[Any, Any] | None:
    """The (type, id) a `==` scope names, or None if the scope is not of that form."""
    if not isinstance(scope, Mapping) or scope.get("op") != "==":
        return None
    entity = scope.get("entity")
    if isinstance(entity, Mapping) and "__entity" in entity:
        entity = entity["__entity"]
    if not isinstance(entity, Mapping):
        return None
    return entity.get("type"), entity.get("id")


def _for_tool(body: Mapping[str, Any], tool: str | None) -> bool:
    """Whether the policy's resource scope lets it apply to `tool` (None: one no scope names)."""
    named = _named(body.get("resource"))
    return named is None or (tool is not None and named == (f"{NAMESPACE}::Tool", tool))


def _applies(body: Mapping[str, Any], tool: str | None, action: str | None) -> bool:
    """Whether the policy's scope lets it apply to `tool` called as `action`."""
    named = _named(body.get("action"))
    ok = named is None or (action is not None and named == (f"{NAMESPACE}::Action", action))
    return ok and _for_tool(body, tool)


def _ids(bodies: Mapping[str, Any], part: str, kind: str) -> set[str]:
    """The ids of `kind` that some policy's `part` scope names with `==`."""
    named = (_named(b.get(part)) for b in bodies.values())
    return {n[1] for n in named if n is not None and n[0] == f"{NAMESPACE}::{kind}" and isinstance(n[1], str)}


class Scopes:
    """The policies that can apply to a tool (and an action): as a Cedar policy set, and what
    they read of the context (`cedar_entities.reads`)."""

    __slots__ = ("_actions", "_bodies", "_reads", "_sets", "_tools", "_whole")

    def __init__(self, bodies: Mapping[str, Any], whole: cedarpy.PolicySet) -> None:
        self._bodies = dict(bodies)
        self._whole = whole
        self._tools = _ids(bodies, "resource", "Tool")
        self._actions = _ids(bodies, "action", "Action")
        self._sets: dict[tuple[str | None, str | None], cedarpy.PolicySet] = {}
        self._reads: dict[str | None, Reads] = {}

    def _tool(self, tool: str) -> str | None:
        return tool if tool in self._tools else None

    def reads(self, tool: str) -> Reads:
        """What the policies that can apply to `tool` (whatever the action) read of the context."""
        key = self._tool(tool)
        found = self._reads.get(key)
        if found is None:
            found = reads({p: b for p, b in self._bodies.items() if _for_tool(b, key)})
            self._reads[key] = found
        return found

    def policies(self, tool: str, action: str) -> cedarpy.PolicySet:
        """The policies that can apply to `tool` called as `action`, under their own ids."""
        key = (self._tool(tool), action if action in self._actions else None)
        found = self._sets.get(key)
        if found is None:
            chosen = {p: b for p, b in self._bodies.items() if _applies(b, *key)}
            document = {"staticPolicies": chosen, "templates": {}, "templateLinks": []}
            try:
                found = cedarpy.PolicySet.from_json_str(json.dumps(document))
            except ValueError:  # Cedar's JSON form did not read back: the whole set answers the same
                found = self._whole
            self._sets[key] = found
        return found

"""The Cedar request for a call: the entities (the agent in its tenant), the action, the tool,
and the context, typed as Cedar values.

The entity model (docs/cedar.md) is stable: principal `Cosigner::Agent::"<agent>"`, a member
of `Cosigner::Tenant::"<tenant>"`; action `Cosigner::Action::"call"` (or `"operation"`);
resource `Cosigner::Tool::"<tool>"`; context `{parameters, surface, requester, time}`.

Only the parameters some policy reads reach Cedar: a validated policy can read no other, so
the rest cannot change a decision, and leaving them out lets the schema declare just those.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

import cedarpy

NAMESPACE = "Cosigner"
_DECIMAL_MAX = Decimal("922337203685477.5807")
CONTEXT_KEYS = ("parameters", "surface", "requester", "time")


class Untypable(ValueError):
    """A parameter holds a value Cedar has no type for (a fraction, null, a huge number)."""


def _walk(node: Any) -> Iterator[Any]:
    yield node
    if isinstance(node, dict):
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _is_var(node: Any, name: str) -> bool:
    return isinstance(node, dict) and node.get("Var") == name


def _is_parameters(node: Any) -> bool:
    inner = node.get(".") if isinstance(node, dict) else None
    return (
        isinstance(inner, dict)
        and _is_var(inner.get("left"), "context")
        and inner.get("attr") == "parameters"
    )


def reads(bodies: Mapping[str, Any]) -> tuple[frozenset[str] | None, frozenset[str] | None]:
    """What the policies read of the context: (its top-level keys, the parameters by name);
    None for either where a policy reads it whole (`context == …`, `context.parameters == …`)."""
    keys: set[str] = set()
    names: set[str] = set()
    whole_context = whole_parameters = False
    for body in bodies.values():
        nodes = list(_walk(body))
        context_uses = sum(1 for n in nodes if _is_var(n, "context"))
        attr_uses = 0
        parameter_uses = sum(1 for n in nodes if _is_parameters(n))
        named_uses = 0
        for n in nodes:
            if not isinstance(n, dict):
                continue
            for op in (".", "has"):
                inner = n.get(op)
                if not isinstance(inner, dict) or "attr" not in inner:
                    continue
                left = inner.get("left")
                if _is_var(left, "context"):
                    attr_uses += 1
                    keys.add(inner["attr"])
                elif _is_parameters(left):
                    named_uses += 1
                    names.add(inner["attr"])
        whole_context |= context_uses > attr_uses
        # `context has parameters` is counted as a use of `context`, not of the parameters.
        whole_parameters |= parameter_uses > named_uses
    return (None if whole_context else frozenset(keys)), (
        None if whole_context or whole_parameters else frozenset(names)
    )


def cedar_value(value: Any, path: str) -> Any:
    """A JSON value as Cedar's JSON form; `Untypable` naming the path where Cedar has no type."""
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise Untypable(f"parameters.{path} is outside Cedar's 64-bit Long")
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 2**63:
            return int(value)
        raise Untypable(f"parameters.{path} is a fraction; Cedar compares whole numbers (Long) only")
    if value is None:
        raise Untypable(f"parameters.{path} is null; Cedar has no null: leave the parameter out instead")
    if isinstance(value, list):
        return [cedar_value(v, f"{path}.{i}") for i, v in enumerate(value)]
    if isinstance(value, dict):
        if "__entity" in value or "__extn" in value:
            raise Untypable(f"parameters.{path} holds a key Cedar reserves (__entity, __extn)")
        return {k: cedar_value(v, f"{path}.{k}") for k, v in value.items()}
    raise Untypable(f"parameters.{path} is not a JSON value")


def hints(schema: Any) -> dict[str, str]:
    """The Cedar extension type a tool's `parameters_schema` gives each top-level parameter:
    `decimal` for a JSON Schema `number`, `datetime` for a `date-time` string, `ipaddr`
    for an `ipv4` or `ipv6` one. Other parameters take the type their JSON value has."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    found: dict[str, str] = {}
    for name, spec in (props if isinstance(props, Mapping) else {}).items():
        if not isinstance(spec, Mapping):
            continue
        kind, form = spec.get("type"), spec.get("format")
        if kind == "number":
            found[name] = "decimal"
        elif kind == "string" and form == "date-time":
            found[name] = "datetime"
        elif kind == "string" and form in ("ipv4", "ipv6"):
            found[name] = "ipaddr"
    return found


def _decimal(value: Any, path: str) -> dict[str, Any]:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Untypable(f"parameters.{path} is not a number, but the tool's parameters_schema says it is")
    try:
        exact = Decimal(str(value))
    except InvalidOperation as exc:
        raise Untypable(f"parameters.{path} is not a finite number") from exc
    if not exact.is_finite() or exact != exact.quantize(Decimal("0.0001")) or abs(exact) >= _DECIMAL_MAX:
        raise Untypable(
            f"parameters.{path} has more than 4 decimal places or is too large for Cedar's decimal"
        )
    return {"__extn": {"fn": "decimal", "arg": f"{exact:.4f}"}}


def _extension(value: Any, path: str, hint: str) -> Any:
    if hint == "decimal":
        return _decimal(value, path)
    if not isinstance(value, str):
        raise Untypable(f"parameters.{path} is not a string, but the tool's parameters_schema says it is")
    return {"__extn": {"fn": "datetime" if hint == "datetime" else "ip", "arg": value}}


def context_of(
    parameters: Mapping[str, Any],
    names: frozenset[str] | None,
    surface: str,
    requester: str,
    now: float,
    typed: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The request's context: the parameters the policies read (typed by `typed`, see
    `hints`), the surface, the requester, the time."""
    chosen = parameters if names is None else {k: v for k, v in parameters.items() if k in names}
    typed = typed or {}
    return {
        "parameters": {
            k: _extension(v, k, typed[k]) if k in typed else cedar_value(v, k) for k, v in chosen.items()
        },
        "surface": surface,
        "requester": requester,
        "time": int(now),
    }


def uid(kind: str, ident: str) -> dict[str, str]:
    """An entity uid in Cedar's JSON form."""
    return {"type": f"{NAMESPACE}::{kind}", "id": ident}


class EntityCache:
    """The entities of each (tenant, agent) pair, parsed once per policy load."""

    __slots__ = ("_made", "_schema")

    def __init__(self, schema: cedarpy.Schema) -> None:
        self._schema = schema
        self._made: dict[tuple[str, str], cedarpy.Entities] = {}

    def get(self, tenant: str, agent: str) -> cedarpy.Entities:
        """The agent, a member of its tenant, as a Cedar entity set."""
        key = (tenant, agent)
        found = self._made.get(key)
        if found is None:
            document = [
                {"uid": uid("Tenant", tenant), "attrs": {}, "parents": []},
                {"uid": uid("Agent", agent), "attrs": {}, "parents": [uid("Tenant", tenant)]},
            ]
            found = cedarpy.Entities.from_json_str(json.dumps(document), self._schema)
            if len(self._made) > 4096:
                self._made.clear()  # bounded: agents' names are chosen by callers
            self._made[key] = found
        return found

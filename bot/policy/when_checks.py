"""`policy check` on `when` blocks, on the merged rules: a block that can never match, a path
the tool's `parameters_schema` rules out, and blocks where they cannot apply.

A later block can never match when every call it matches is decided first by an earlier
one: the earlier block names no path the later one does not, and on each of its paths
whatever meets the later block's conditions meets the earlier one's too (or is a value of
a type the earlier one cannot evaluate, so the call is asked there). This is decided
soundly for `equals`, `in`, `prefix`, `below` and `above`, and for `matches` only when the
pattern is the same; anything else is let through (the check is conservative: it never
refuses a block that could match).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from jsonschema.exceptions import SchemaError
from jsonschema.validators import Draft202012Validator, validator_for

from bot.policy.tool_rule import ToolRule
from bot.policy.when import Block, Test
from bot.policy.when_schema import ValueKind

_TYPES = {
    ValueKind.STRING: {"string"},
    ValueKind.NUMBER: {"number", "integer"},
    ValueKind.BOOLEAN: {"boolean"},
}
_DEPTH = 32  # `$ref`s followed before a path's type is taken as unknown


def when_problems(rules: Iterable[ToolRule], base: Path | None = None) -> list[str]:
    """Every problem of the `when` blocks of `rules`; `base` is the folder a
    `parameters_schema` file is read from (the policy file's)."""
    problems: list[str] = []
    by_origin: dict[str, list[ToolRule]] = {}
    schemas: dict[str, tuple[Any, str | None]] = {}
    for rule in rules:
        if not rule.when:
            continue
        by_origin.setdefault(rule.origin("when"), []).append(rule)
        if rule.handoff is not None:
            problems.append(
                f"{rule.origin('when')}: {rule.name} has a handoff ({rule.origin('handoff')}), which a "
                "person does whatever the arguments; remove the when blocks or the handoff"
            )
        if rule.parameters_schema is not None:
            path = rule.origin("parameters_schema")
            if path not in schemas:
                schemas[path] = _load(rule.parameters_schema, base)
            schema, said = schemas[path]
            if said is not None:
                problems.append(f"{path}: {said}")
            else:
                problems += _paths(rule, schema, path)
        problems += _never(rule)
    for origin, taking in by_origin.items():
        # A standing deny refuses every call before any block is tried, for every tenant taking them.
        if all(r.deny for r in taking):
            problems.append(
                f"{origin}: can never apply, because {taking[0].origin('deny')} = true refuses every "
                "call first; remove the blocks or the deny"
            )
    return list(dict.fromkeys(problems))


def _load(source: dict[str, Any] | str, base: Path | None) -> tuple[Any, str | None]:
    """The schema and None, or None and what is wrong with it."""
    if isinstance(source, str):
        file = (base or Path.cwd()) / source
        try:
            schema = json.loads(file.read_text(encoding="utf-8"))
        except OSError as exc:
            return None, f"cannot read {file} ({exc.strerror}); the path is relative to the policy file"
        except ValueError as exc:
            return None, f"{file} is not JSON ({exc})"
    else:
        schema = source
    if not isinstance(schema, dict):
        return None, "must be a JSON Schema object describing the tool's parameters"
    try:
        validator_for(schema, default=Draft202012Validator).check_schema(schema)
    except SchemaError as exc:
        return None, f"is not a valid JSON Schema: {exc.message[:300]}"
    return schema, None


def _paths(rule: ToolRule, schema: dict[str, Any], schema_path: str) -> list[str]:
    """Conditions on a path the schema says cannot exist, or cannot hold the type they read."""
    problems = []
    for w in rule.when:
        for test in w.block.tests:
            types = _types(schema, test.path.split("."), schema, 0)
            where = f"{w.block.path}.match.{_key(test.path)}"
            if types is not None and not types:
                problems.append(
                    f"{where}: {schema_path} says parameters.{test.path} cannot exist, so the block "
                    "could never match; correct the parameter path"
                )
            elif types is not None and not types & _TYPES[test.kind]:
                problems.append(
                    f"{where}: {schema_path} says parameters.{test.path} is {' or '.join(sorted(types))}, "
                    f"but its conditions read {test.kind.value}, so every call would be asked there; "
                    "correct the path or the conditions"
                )
    return problems


def schema_types(rule: ToolRule, path: str, base: Path | None = None) -> frozenset[str] | None:
    """The JSON types the tool's `parameters_schema` allows at a dotted parameter path: None
    when any, unknown, or the tool has no (readable) schema; empty when it cannot exist."""
    if rule.parameters_schema is None:
        return None
    schema, said = _load(rule.parameters_schema, base)
    if said is not None or not isinstance(schema, dict):
        return None
    return _types(schema, path.split("."), schema, 0)


def _key(path: str) -> str:
    return path if re.fullmatch(r"[A-Za-z0-9_-]+", path) else json.dumps(path)


def _types(schema: Any, parts: list[str], root: dict[str, Any], depth: int) -> frozenset[str] | None:
    """The JSON types a value at `parts` may have under `schema`: None when any (or unknown),
    empty when there can be none. Only what the schema says for certain narrows it."""
    if schema is False:
        return frozenset()
    if not isinstance(schema, dict) or depth > _DEPTH:
        return None
    found: frozenset[str] | None = None
    ref = schema.get("$ref")
    if isinstance(ref, str):
        found = _meet(found, _types(_pointer(root, ref), parts, root, depth + 1))
    for sub in _list(schema.get("allOf")):
        found = _meet(found, _types(sub, parts, root, depth + 1))
    for key in ("anyOf", "oneOf"):
        subs = _list(schema.get(key))
        if subs:
            union: frozenset[str] | None = frozenset()
            for sub in subs:
                one = _types(sub, parts, root, depth + 1)
                union = None if union is None or one is None else union | one
            found = _meet(found, union)
    declared = schema.get("type")
    declared_types = None
    if isinstance(declared, str):
        declared_types = frozenset({declared})
    elif isinstance(declared, list):
        declared_types = frozenset(t for t in declared if isinstance(t, str))
    if declared_types is not None and "number" in declared_types:
        declared_types |= {"integer"}
    if not parts:
        return _meet(found, declared_types)
    if declared_types is not None and "object" not in declared_types:
        return frozenset()
    return _meet(found, _types(_property(schema, parts[0]), parts[1:], root, depth + 1))


def _property(schema: dict[str, Any], key: str) -> Any:
    """The schema a property `key` is held to (True: anything, False: it cannot exist)."""
    properties = schema.get("properties")
    if isinstance(properties, dict) and key in properties:
        return properties[key]
    patterns = schema.get("patternProperties")
    if isinstance(patterns, dict):
        for pattern in patterns:
            try:
                if re.search(pattern, key):
                    return True
            except re.error:
                return True
    extra = schema.get("additionalProperties", True)
    return extra if isinstance(extra, dict | bool) else True


def _pointer(root: dict[str, Any], ref: str) -> Any:
    """The schema a local `$ref` (`#/$defs/x`) points to; True (anything) for any other."""
    if not ref.startswith("#"):
        return True
    node: Any = root
    for token in [t for t in ref[1:].split("/") if t]:
        token = unquote(token).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return True
    return node


def _meet(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    if a is None:
        return b
    if b is None:
        return a
    return a & b  # "number" stands with "integer" in both (`_types`), so an integer meets it


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# --- blocks that can never match ---------------------------------------------------


def _never(rule: ToolRule) -> list[str]:
    problems = []
    blocks = [w.block for w in rule.when]
    for j, later in enumerate(blocks):
        empty = next((t for t in later.tests if _empty(t)), None)
        if empty is not None:
            problems.append(
                f"{later.path}: can never match: no value of {empty.path} meets all of {empty.summary}; "
                "correct its conditions"
            )
            continue
        for earlier in blocks[:j]:
            if _shadows(earlier, later):
                problems.append(
                    f"{later.path}: can never match: every call it matches is decided first by "
                    f"{earlier.path} ({_how(earlier, later)}); a block is tried only when none before "
                    "it matched, so put the narrower block first, or remove one"
                )
                break
    return problems


def _how(earlier: Block, later: Block) -> str:
    mine = {t.path: t for t in later.tests}
    other = next((t for t in earlier.tests if t.kind is not mine[t.path].kind), None)
    if other is not None:
        return (
            f"it reads {other.path} as {other.kind.value}, so a call with {mine[other.path].kind.value} "
            "there cannot be evaluated and is asked"
        )
    return f"{earlier.summary}, which {later.summary} implies"


def _shadows(earlier: Block, later: Block) -> bool:
    """True when every call `later` matches stops at `earlier` (matched or asked)."""
    mine = {t.path: t for t in later.tests}
    # An annotation the earlier block reads stops only the calls whose tool carries it too.
    hinted = set(earlier.hints) <= set(later.hints)
    return hinted and all(t.path in mine and _implies(mine[t.path], t) for t in earlier.tests)


def _finite(test: Test) -> list[Any] | None:
    if test.equals is not None:
        return [test.equals]
    if test.one_of is not None:
        return list(test.one_of)
    if test.kind is ValueKind.BOOLEAN:
        return [True, False]
    return None


def _empty(test: Test) -> bool:
    """True when no value meets every condition of `test` (decided where it is sure)."""
    values = _finite(test)
    if values is not None:
        return not any(test.holds(v) for v in values)
    return test.below is not None and test.above is not None and test.below <= test.above


def _implies(mine: Test, theirs: Test) -> bool:
    """True when every value meeting `mine` meets `theirs`, or is one `theirs` cannot evaluate."""
    if mine.kind is not theirs.kind:
        return True
    values = _finite(mine)
    if values is not None:
        return all(theirs.holds(v) for v in values if mine.holds(v))
    if theirs.equals is not None or theirs.one_of is not None:
        return False
    if theirs.prefix is not None and not (mine.prefix or "").startswith(theirs.prefix):
        return False
    if theirs.pattern is not None and mine.pattern != theirs.pattern:
        return False
    if theirs.below is not None and not (mine.below is not None and mine.below <= theirs.below):
        return False
    return theirs.above is None or (mine.above is not None and mine.above >= theirs.above)

"""An edited call checked against the agent's `parametersSchema`, in bounded work, with
messages that name the place and the rule and never a value.

jsonschema's own `pattern`, `patternProperties`, `additionalProperties` and
`unevaluatedProperties` match with Python's backtracking `re`; here they match with RE2
(`bot.approvals.agent_schema.regex`), whose time is linear in the text. Every keyword
evaluated counts against `MAX_STEPS`, and past it (or past `DEADLINE_SECONDS`) the check
stops itself, so a schema whose combinators multiply the work cannot hold the worker thread
it runs on (`agent_schema.off_loop`). A schema is checked with `agent_schema.check` first,
also one stored before these rules: its `$ref`s stay within it and never recurse.

A message is built from the failed keyword and the schema's own figure (`maxLength 10`),
at the path of the offending value as far as the approver is shown it: a value's text, and
a key inside a hidden value, never appear (the call holds hidden values the approver must
not learn, and errors reach Slack, the inbox and the API).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from jsonschema import ValidationError, validators
from jsonschema.exceptions import UnknownType
from jsonschema.protocols import Validator
from referencing import Registry
from referencing.exceptions import Unresolvable

from bot.approvals import agent_schema
from bot.approvals.agent_schema import Overdue, regex
from contracts.digest import member
from contracts.errors import InvalidRequest

MAX_STEPS = 20_000
"""Keyword evaluations allowed to check one edited call (a tool's schema takes tens to hundreds)."""
DEADLINE_SECONDS = 2.0
"""How long one check may take, on the worker thread and for the request waiting for it."""
MAX_PROBLEMS = 10
MAX_CACHED = 1024
_VALIDATORS: dict[str, Validator] = {}
"""A validator per schema (by its canonical JSON), built once; bounded, cleared when full."""


class Exhausted(Exception):
    """A check that used up its budget of steps or time."""


@dataclass
class _Budget:
    steps: int
    until: float
    root: Any

    def spend(self) -> None:
        self.steps -= 1
        if self.steps < 0 or (self.steps % 512 == 0 and time.monotonic() > self.until):
            raise Exhausted


_BUDGET: ContextVar[_Budget | None] = ContextVar("cosigner_schema_budget", default=None)


async def problems(
    schema: dict[str, Any], call: dict[str, Any], shown: Mapping[str, Any], changed: Sequence[str]
) -> list[dict[str, str]]:
    """What is wrong with `call` (unredacted) under `schema`, as `{"field", "message"}` each
    under the first changed field it concerns; `shown` is the call as the approver sees it."""
    try:
        return await agent_schema.off_loop(lambda: _problems(schema, call, shown, changed), DEADLINE_SECONDS)
    except Overdue:
        said = f"checking the edit against the tool's schema took over {DEADLINE_SECONDS:g} s"
    except Exhausted:
        said = f"checking the edit against the tool's schema takes over {MAX_STEPS} steps"
    except InvalidRequest as exc:
        said = f"the tool's schema is not one Cosigner applies ({exc.message[:300]})"
    except RecursionError:
        said = "the tool's schema nests too deeply to be applied"
    except (Unresolvable, UnknownType):
        said = "the tool's schema could not be applied"
    return [
        {"field": changed[0], "message": f"{said}; no edit is possible: approve or deny the call as it is"}
    ]


def _problems(
    schema: dict[str, Any], call: dict[str, Any], shown: Mapping[str, Any], changed: Sequence[str]
) -> list[dict[str, str]]:
    validator = _validator(schema)
    token = _BUDGET.set(_Budget(MAX_STEPS, time.monotonic() + DEADLINE_SECONDS, schema))
    try:
        errors = sorted(
            validator.iter_errors(call), key=lambda e: [(isinstance(t, int), str(t)) for t in e.absolute_path]
        )
    finally:
        _BUDGET.reset(token)
    out = []
    for error in errors[:MAX_PROBLEMS]:
        path = _shown_path(list(error.absolute_path), shown)
        field = str(path[0]) if path and str(path[0]) in changed else changed[0]
        rule = _rule(error)
        where = _path(path)
        out.append({"field": field, "message": rule if where == field else f"{where} {rule}"})
    return out


def _validator(schema: dict[str, Any]) -> Validator:
    key = json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    validator = _VALIDATORS.get(key)
    if validator is None:
        cls = agent_schema.check(schema)  # also a schema stored before today's rules
        # No retrieval: every $ref was checked to point within the schema.
        validator = _bounded(cls)(schema, registry=Registry())
        if len(_VALIDATORS) >= MAX_CACHED:
            _VALIDATORS.clear()
        _VALIDATORS[key] = validator
    return validator


_CLASSES: dict[type[Validator], type[Validator]] = {}


def _bounded(cls: type[Validator]) -> type[Validator]:
    """`cls` with RE2 for every regex and each keyword counted against the budget."""
    if cls not in _CLASSES:
        own: dict[str, Callable[..., Any]] = {
            "pattern": _pattern,
            "patternProperties": _pattern_properties,
            "additionalProperties": _additional_properties,
            "unevaluatedProperties": _unevaluated_properties,
        }
        keywords = {k: _counted(own.get(k, fn)) for k, fn in cls.VALIDATORS.items()}
        _CLASSES[cls] = validators.extend(cls, keywords)
    return _CLASSES[cls]


def _counted(fn: Callable[..., Any]) -> Callable[..., Any]:
    def keyword(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        budget = _BUDGET.get()
        if budget is None:
            raise Exhausted  # only ever run inside `_problems`, which sets one
        budget.spend()
        return fn(validator, value, instance, schema)

    return keyword


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and regex(pattern).search(instance) is None:
        yield ValidationError("does not match")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        compiled = regex(pattern)
        for name, value in instance.items():
            if compiled.search(name) is not None:
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _extras(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    patterns = [regex(p) for p in schema.get("patternProperties", {})]
    return [
        name
        for name in instance
        if name not in properties and not any(p.search(name) is not None for p in patterns)
    ]


def _additional_properties(
    validator: Any, allowed: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    extras = _extras(instance, schema)
    if validator.is_type(allowed, "object"):
        for name in extras:
            yield from validator.descend(instance[name], allowed, path=name)
    elif not allowed and extras:
        yield ValidationError("additional properties")


def _unevaluated_properties(
    validator: Any, allowed: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    evaluated = _evaluated(validator, instance, schema)
    for name in instance:
        if name not in evaluated and _fails(validator.descend(instance[name], allowed, path=name)):
            yield ValidationError("unevaluated properties")
            return


def _fails(errors: Iterator[ValidationError]) -> bool:
    return next(errors, None) is not None


def _evaluated(validator: Any, instance: Mapping[str, Any], schema: Any) -> set[str]:
    """The properties some keyword of `schema` evaluates (jsonschema's own walk for
    `unevaluatedProperties`, with RE2 and the checked `$ref`s)."""
    if not isinstance(schema, dict):
        return set()
    budget = _BUDGET.get()
    if budget is None:
        raise Exhausted
    budget.spend()
    out: set[str] = set()
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = agent_schema.resolve(budget.root, ref)
        out |= _evaluated(validator.evolve(schema=target), instance, target)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        out |= properties.keys() & instance.keys()
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        if (sub := schema.get(keyword)) is not None:
            out |= {k for k, v in instance.items() if not _fails(validator.descend(v, sub))}
    patterns = schema.get("patternProperties")
    if isinstance(patterns, dict):
        compiled = [regex(p) for p in patterns]
        out |= {k for k in instance if any(p.search(k) is not None for p in compiled)}
    dependent = schema.get("dependentSchemas")
    if isinstance(dependent, dict):
        for name, sub in dependent.items():
            if name in instance:
                out |= _evaluated(validator, instance, sub)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for sub in schema.get(keyword, []):
            if not _fails(validator.descend(instance, sub)):
                out |= _evaluated(validator, instance, sub)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            out |= _evaluated(validator, instance, schema["if"])
            if "then" in schema:
                out |= _evaluated(validator, instance, schema["then"])
        elif "else" in schema:
            out |= _evaluated(validator, instance, schema["else"])
    return out


def _shown_path(path: list[Any], shown: Mapping[str, Any]) -> list[Any]:
    """`path` as far as the approver is shown the call: never into a hidden value."""
    out: list[Any] = []
    here: Any = shown
    for token in path:
        if isinstance(here, dict) and isinstance(token, str) and token in here:
            here = here[token]
        elif isinstance(here, list) and isinstance(token, int) and 0 <= token < len(here):
            here = here[token]
        else:
            break
        out.append(token)
    return out


def _path(path: list[Any]) -> str:
    if not path:
        return "the call"
    out = str(path[0])
    for token in path[1:]:
        out = f"{out}[{token}]" if isinstance(token, int) else member(out, str(token))
    return out


def _rule(error: ValidationError) -> str:
    """What the failed keyword asks, in the schema's own figures; never the value."""
    keyword, value = str(error.validator), error.validator_value
    plain = isinstance(value, int | float) and not isinstance(value, bool)
    if keyword == "type":
        # Draft 3 also lists schemas among the types: those are "another type".
        named = value if isinstance(value, list) else [value]
        kinds = [_KINDS.get(k, "of another type") if isinstance(k, str) else "of another type" for k in named]
        return f"must be {' or '.join(dict.fromkeys(kinds)) or 'of another type'} (type)"
    if plain and keyword in ("minimum", "maximum") and isinstance(error.schema, dict):
        if error.schema.get(f"exclusive{keyword.capitalize()}") is True:  # draft 4's flag
            keyword = f"exclusive{keyword.capitalize()}"
    if plain and keyword in _FIGURES:
        return _FIGURES[keyword].format(value)
    if keyword == "pattern" and isinstance(value, str):
        return f"must match the pattern {json.dumps(value[:100], ensure_ascii=False)} (pattern)"
    if keyword == "required" and isinstance(value, list) and isinstance(error.instance, dict):
        missing = [n for n in value if isinstance(n, str) and n not in error.instance][:5]
        return f"must have {', '.join(missing)} (required)"
    return _WORDS.get(keyword, f"does not satisfy the tool's schema ({keyword[:40]})")


_KINDS = {
    "integer": "a whole number",
    "number": "a number",
    "string": "text",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}
_FIGURES = {
    "minimum": "must be at least {} (minimum)",
    "maximum": "must be at most {} (maximum)",
    "exclusiveMinimum": "must be more than {} (exclusiveMinimum)",
    "exclusiveMaximum": "must be less than {} (exclusiveMaximum)",
    "multipleOf": "must be a multiple of {} (multipleOf)",
    "minLength": "must be at least {} characters long (minLength)",
    "maxLength": "must be at most {} characters long (maxLength)",
    "minItems": "must hold at least {} items (minItems)",
    "maxItems": "must hold at most {} items (maxItems)",
    "minProperties": "must hold at least {} properties (minProperties)",
    "maxProperties": "must hold at most {} properties (maxProperties)",
    "minContains": "must hold at least {} matching items (minContains)",
    "maxContains": "must hold at most {} matching items (maxContains)",
}
_WORDS = {
    "enum": "must be one of the values the tool's schema lists (enum)",
    "const": "must be the one value the tool's schema allows (const)",
    "uniqueItems": "must not repeat an item (uniqueItems)",
    "additionalProperties": "holds a property the tool's schema does not allow (additionalProperties)",
    "unevaluatedProperties": "holds a property the tool's schema does not allow (unevaluatedProperties)",
    "unevaluatedItems": "holds an item the tool's schema does not allow (unevaluatedItems)",
    "anyOf": "matches none of the forms the tool's schema allows (anyOf)",
    "oneOf": "must match exactly one of the forms the tool's schema allows (oneOf)",
    "not": "matches a form the tool's schema forbids (not)",
    "contains": "holds no item the tool's schema asks for (contains)",
    "dependentRequired": "lacks a property the tool's schema requires alongside another (dependentRequired)",
    "dependencies": "lacks a property the tool's schema requires alongside another (dependencies)",
    # A `false` subschema: jsonschema gives its error no path, so it is said of the call.
    "None": "holds a value the tool's schema does not allow (false)",
}

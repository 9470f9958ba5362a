"""An agent's `parametersSchema`, checked once at create: untrusted input, so only what can be
applied to an edited call in bounded work is taken.

A schema is refused (`400 INVALID_REQUEST`, `field: "parametersSchema"`, the message naming
the place) when it is over `MAX_SCHEMA_BYTES`, names a `$schema` that is not a draft Cosigner
knows (or is not a string), is not valid against its draft's meta-schema, holds a regular
expression RE2 cannot compile (`pattern`, a `patternProperties` name, and so a
`propertyNames` pattern too: RE2 matches in time linear in the text, and has no lookaround
or backreference), has a `$ref` that leaves the document or leads back to a schema it is
part of, a `$dynamicRef`/`$recursiveRef`, or an `$id` below the root (which would change
what a `$ref` means), or grows past `MAX_EXPANDED` subschemas once its `$ref`s are
followed.

The checks run on a worker thread (`off_loop`) with a deadline, never on the event loop.
A thread cannot be stopped from outside, so the deadline only frees the request: what
bounds the thread's own work is the size limit, RE2, the `$ref` rules above and, when an
edit is applied, the step budget of `bot.approvals.schema_rules`.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar
from urllib.parse import unquote

import re2
from jsonschema import FormatChecker, SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import Draft3Validator, Draft4Validator, Draft202012Validator, validator_for
from referencing import Registry

from contracts.digest import CanonicalFormError, canonical_json, member
from contracts.edits import MAX_SCHEMA_BYTES
from contracts.errors import InvalidRequest

FIELD = "parametersSchema"
MAX_EXPANDED = 10_000
"""The most subschemas a schema may hold once each `$ref` is replaced by what it points to."""
DEADLINE_SECONDS = 2.0
"""How long a request waits for a schema check on the worker thread (queueing included)."""
MAX_CACHED = 1024
_VALID: set[bytes] = set()
"""Schemas (their RFC 8785 bytes) that passed `check`; bounded, cleared when full."""
_WORKERS = 2
"""Threads for schema work: a few, so a burst of it queues (and meets its deadline) instead of
taking every core or the loop's default executor (which also resolves host names)."""
_pool: ThreadPoolExecutor | None = None
_T = TypeVar("_T")

# Keywords whose value is a schema, a list of schemas or a map of names to schemas, in any
# draft jsonschema knows (a union: walking more than a draft evaluates only refuses more).
_ONE = frozenset(
    "additionalItems additionalProperties contains contentSchema else if items not "
    "propertyNames then unevaluatedItems unevaluatedProperties extends".split()
)
_MANY = frozenset("allOf anyOf oneOf prefixItems items extends disallow type".split())
_NAMED = frozenset("$defs definitions dependentSchemas dependencies patternProperties properties".split())


class Overdue(Exception):
    """Schema work that did not finish within its deadline."""


def regex(pattern: str) -> re2._Regexp[str]:
    """`pattern` compiled by RE2 (linear-time matching); `re2.error` when RE2 cannot take it."""
    return _compiled(pattern)


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # RE2 would print the refused pattern to stderr
    options.max_mem = 1 << 20  # per pattern: its program and the matcher's cache
    return options


_OPTIONS = _options()


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str) -> re2._Regexp[str]:
    return re2.compile(pattern, _OPTIONS)


async def off_loop(work: Callable[[], _T], seconds: float) -> _T:
    """`work()` on a schema worker thread; `Overdue` when it has not finished in `seconds`
    (it is then cancelled if it had not started)."""
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(_WORKERS, thread_name_prefix="cosigner-schema")
    future = asyncio.get_running_loop().run_in_executor(_pool, work)
    try:
        return await asyncio.wait_for(future, seconds)
    except TimeoutError:
        raise Overdue from None


async def check_schema(schema: dict[str, Any] | None) -> None:
    """Refuse a `parametersSchema` Cosigner cannot apply in bounded work (module docstring);
    a schema seen before is known at once, a new one is checked on a worker thread."""
    if schema is None:
        return
    try:
        canonical = canonical_json(schema, FIELD)
    except CanonicalFormError as exc:
        raise InvalidRequest(str(exc), field=FIELD) from exc
    if canonical in _VALID:
        return  # an agent sends its tool's one schema with every call: checked once
    try:
        await off_loop(lambda: check(schema, canonical), DEADLINE_SECONDS)
    except Overdue:
        raise InvalidRequest(
            f"parametersSchema could not be checked within {DEADLINE_SECONDS:g} s; send a smaller schema "
            "(or retry: the server may be busy)",
            field=FIELD,
        ) from None


def check(schema: dict[str, Any], canonical: bytes | None = None) -> type[Validator]:
    """Check `schema` (on the calling thread) and return its draft's validator class;
    raises `InvalidRequest` naming the place and the fix."""
    canonical = canonical_json(schema, FIELD) if canonical is None else canonical
    size = len(canonical)
    if size > MAX_SCHEMA_BYTES:
        raise _refused(
            f"parametersSchema is {size} bytes; the limit is {MAX_SCHEMA_BYTES}: send the tool's own "
            "schema without descriptions or examples"
        )
    cls = draft(schema)
    try:
        cls.check_schema(schema, format_checker=_meta_formats(cls))
    except SchemaError as exc:
        where = _where(exc.absolute_path)
        raise _refused(
            f"parametersSchema is not a valid JSON Schema at {where}: {exc.message[:300]}"
        ) from None
    except RecursionError:
        raise _refused("parametersSchema nests too deeply to be checked; flatten it") from None
    _Walk(schema, cls).run()
    try:
        cls(schema, registry=Registry())  # no retrieval: every $ref points within the schema
    except Exception as exc:  # whatever jsonschema or referencing raise, the agent's schema is at fault
        raise _refused(f"parametersSchema cannot be made a validator ({type(exc).__name__})") from None
    if len(_VALID) >= MAX_CACHED:
        _VALID.clear()
    _VALID.add(canonical)
    return cls


def draft(schema: dict[str, Any]) -> type[Validator]:
    """The validator class of the draft `schema` names (2020-12 when it names none)."""
    if "$schema" not in schema:
        latest: type[Validator] = Draft202012Validator
        return latest
    named = schema["$schema"]
    # jsonschema looks `$schema` up as a dict key: a list would be a TypeError there.
    known: type[Validator] | None = validator_for(schema, default=None) if isinstance(named, str) else None
    if known is None:
        shown = json.dumps(named, ensure_ascii=False)[:200]
        raise _refused(
            f"parametersSchema names $schema {shown}, which is not a JSON Schema draft Cosigner knows; "
            'use "https://json-schema.org/draft/2020-12/schema" or leave $schema out'
        )
    return known


def _meta_formats(cls: type[Validator]) -> FormatChecker:
    # The meta-schema's own formats, without `regex`: Python's `re` would compile the agent's
    # patterns (a deep nesting of groups is a RecursionError there); RE2 compiles them below.
    checker = FormatChecker(formats=())
    checker.checkers = {k: v for k, v in cls.FORMAT_CHECKER.checkers.items() if k != "regex"}
    return checker


def _refused(message: str) -> InvalidRequest:
    return InvalidRequest(message, field=FIELD)


def _where(path: Any) -> str:
    out = FIELD
    for token in path:
        out = f"{out}[{token}]" if isinstance(token, int) else member(out, str(token))
    return out


class _Walk:
    """The schema with every `$ref` replaced by what it points to, walked depth first and at
    most `MAX_EXPANDED` subschemas far: the patterns, `$id`s and references on the way."""

    def __init__(self, root: dict[str, Any], cls: type[Validator]) -> None:
        self.root = root
        self.ids = ("$id", "id") if cls in (Draft3Validator, Draft4Validator) else ("$id",)

    def run(self) -> None:
        # The `$ref` targets being expanded (the root always is): meeting one again inside
        # itself is a recursion. Each stack entry is a subschema to visit, or the end of a
        # target's expansion (`None` with the target), which takes it out of `inside`.
        inside = {"#"}
        stack: list[tuple[Any, tuple[str | int, ...], str]] = [(self.root, (), "")]
        visited = 0
        while stack:
            node, path, leaving = stack.pop()
            if leaving:
                inside.discard(leaving)
                continue
            visited += 1
            if visited > MAX_EXPANDED:
                raise _refused(
                    f"parametersSchema holds over {MAX_EXPANDED} subschemas once its $refs are "
                    "followed; send a smaller schema (a $ref used in many places counts each time)"
                )
            if not isinstance(node, dict):
                continue
            self._check(node, path)
            stack += _children(node, path)
            ref = node.get("$ref")
            if isinstance(ref, str):
                at = _where((*path, "$ref"))
                target = _fragment(ref, at)
                if target in inside:
                    raise _refused(
                        f"{at} ({ref[:100]}) leads back to a schema that contains it; Cosigner takes "
                        "no recursive schema: spell the nested levels out"
                    )
                inside.add(target)
                stack.append((None, (), target))
                stack.append((_resolve(self.root, target, at), tuple(_tokens(target)), ""))

    def _check(self, node: dict[str, Any], path: tuple[str | int, ...]) -> None:
        for key in self.ids:
            if path and isinstance(node.get(key), str):
                raise _refused(
                    f"{_where((*path, key))}: an $id below the root changes what its $refs point to; "
                    "remove it (refer to the part with #/$defs/…)"
                )
        for key in ("$dynamicRef", "$recursiveRef"):
            if key in node:
                raise _refused(f"{_where((*path, key))} is not supported; use $ref to #/$defs/…")
        if isinstance(node.get("pattern"), str):
            _regex_at(node["pattern"], (*path, "pattern"))
        names = node.get("patternProperties")
        if isinstance(names, dict):
            for name in names:
                _regex_at(name, (*path, "patternProperties", name))


def _children(
    node: dict[str, Any], path: tuple[str | int, ...]
) -> list[tuple[Any, tuple[str | int, ...], str]]:
    """The subschemas directly under `node`, each with its path."""
    out: list[tuple[Any, tuple[str | int, ...], str]] = []
    for key, value in node.items():
        if key in _ONE and isinstance(value, dict | bool):
            out.append((value, (*path, key), ""))
        if key in _MANY and isinstance(value, list):
            out += [(v, (*path, key, i), "") for i, v in enumerate(value) if isinstance(v, dict | bool)]
        if key in _NAMED and isinstance(value, dict):
            out += [(v, (*path, key, n), "") for n, v in value.items() if isinstance(v, dict | bool)]
    return out


def _regex_at(pattern: str, path: tuple[str | int, ...]) -> None:
    try:
        regex(pattern)
    except re2.error as exc:
        said = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else exc
        raise _refused(
            f"{_where(path)} is not a regular expression Cosigner can match in linear time (RE2: {said}); "
            "lookarounds, backreferences and repetitions over 1000 are not supported"
        ) from None


def _fragment(ref: str, at: str) -> str:
    """The JSON pointer of a `$ref` within this document ("#" or "#/…"), else a refusal."""
    if ref == "#" or ref.startswith("#/"):
        return ref
    raise _refused(
        f"{at} ({ref[:100]}) does not point within this schema; Cosigner follows only references "
        'such as "#/$defs/name" and never fetches one'
    )


def _tokens(target: str) -> Iterator[str]:
    for token in target[2:].split("/") if target != "#" else ():
        yield unquote(token).replace("~1", "/").replace("~0", "~")


def resolve(root: Any, target: str) -> Any:
    """What a checked `$ref` ("#" or "#/…") points to in `root`; `LookupError` if nothing."""
    node = root
    for token in _tokens(target):
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            raise LookupError(target)
    return node


def _resolve(root: Any, target: str, at: str) -> Any:
    try:
        found = resolve(root, target)
    except LookupError:
        raise _refused(f"{at} ({target[:100]}) points to nothing in this schema") from None
    if not isinstance(found, dict | bool):
        raise _refused(f"{at} ({target[:100]}) points to a {type(found).__name__}, not a schema")
    return found

"""The shape of `[[tools.NAME.when]]` blocks: rules on a call's arguments, first match wins.

A block names parameter paths and the conditions each must meet (all of them), and an
outcome: `then = "allow" | "ask" | "deny"`, with `approvers`, `quorum` and
`separate_duties` for a block that asks and `reason` for one that denies. Each path's
conditions read one JSON type: `prefix` and `matches` a string, `below` and `above` a
number, `equals` and `in` the type of their value. `matches` is an RE2 pattern (linear
time, no backreferences or lookaround) that must match the whole value. Nothing is
coerced: `true` is not a number. What a block means for a call is `bot.policy.when`.
"""

from __future__ import annotations

import functools
import math
from enum import StrEnum
from typing import Annotated, Any

import re2
from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainValidator,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from bot.policy.schema_types import Approvers, Count, Flag, Table, Text, say


class Then(StrEnum):
    """What a matching block decides."""

    ALLOW = "allow"  # nobody is asked
    ASK = "ask"  # a person approves this call (ask_always)
    DENY = "deny"  # the call is refused


class Hint(StrEnum):
    """The MCP tool annotations a block may read (`annotations = { destructiveHint = true }`)."""

    READ_ONLY = "readOnlyHint"
    DESTRUCTIVE = "destructiveHint"
    IDEMPOTENT = "idempotentHint"
    OPEN_WORLD = "openWorldHint"


class ValueKind(StrEnum):
    """The JSON type a path's conditions read."""

    STRING = "a string"
    NUMBER = "a number"
    BOOLEAN = "a boolean"


def kind_of(value: Any) -> ValueKind | None:
    """The kind of a JSON value a condition can read, or None (null, an object, a list)."""
    if isinstance(value, bool):
        return ValueKind.BOOLEAN
    if isinstance(value, int | float):
        return ValueKind.NUMBER
    if isinstance(value, str):
        return ValueKind.STRING
    return None


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # a bad pattern is reported as a policy problem, not on stderr
    options.never_capture = True  # only whether it matches is read: no group spans to compute
    return options


@functools.lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> re2._Regexp[str]:
    """The RE2 program of a `matches` pattern, compiled once per distinct pattern."""
    return re2.compile(pattern, _options())


def _pattern(value: str) -> str:
    try:
        compile_pattern(value)
    except re2.error as exc:
        said = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PydanticCustomError(
            "policy",
            "RE2 cannot compile this pattern ({said}); RE2 has no backreferences or lookaround, "
            "see https://github.com/google/re2/wiki/Syntax",
            {"said": said},
        ) from None
    return value


def _scalar(value: Any) -> Any:
    if kind_of(value) is None:
        raise PydanticCustomError("policy", "must be a string, a number, or true or false")
    if isinstance(value, float) and not math.isfinite(value):
        raise PydanticCustomError("policy", "must be a finite number")
    return value


def _number(value: Any) -> Any:
    if kind_of(value) is not ValueKind.NUMBER:
        raise PydanticCustomError("policy", "must be a number such as 5000 (true and false are not numbers)")
    if isinstance(value, float) and not math.isfinite(value):
        raise PydanticCustomError("policy", "must be a finite number")
    return value


def _values(value: Any) -> tuple[Any, ...]:
    if not isinstance(value, list) or not value:
        raise PydanticCustomError("policy", 'must be a non-empty list such as ["main", "release"]')
    items = tuple(_scalar(v) for v in value)
    kinds = {kind_of(v) for v in items}
    if len(kinds) > 1:
        raise PydanticCustomError(
            "policy", "must list values of one type (strings, numbers, or true and false), not a mix"
        )
    return items


Scalar = Annotated[Any, PlainValidator(_scalar)]
Number = Annotated[Any, PlainValidator(_number)]
Pattern = Annotated[str, say("must be a string holding an RE2 pattern"), AfterValidator(_pattern)]
Prefix = Annotated[str, Field(min_length=1), say('must be a non-empty string such as "git status"')]
MatchPath = Annotated[
    str,
    Field(pattern=r"^[^.]+(\.[^.]+)*$"),
    say('"{input}" is not a parameter path such as "command" or "refund.amountCents"'),
]


class Conditions(Table):
    """The conditions on one parameter path; every one given must hold."""

    equals: Scalar = None
    in_: Annotated[tuple[Any, ...], PlainValidator(_values)] | None = Field(default=None, alias="in")
    matches: Pattern | None = None
    prefix: Prefix | None = None
    below: Number = None
    above: Number = None

    @property
    def kind(self) -> ValueKind:
        """The one JSON type these conditions read (checked when the table is read)."""
        return self._kinds()[0][1]

    def _kinds(self) -> list[tuple[str, ValueKind]]:
        found: list[tuple[str, ValueKind]] = []
        if self.equals is not None:
            found.append(("equals", kind_of(self.equals) or ValueKind.STRING))
        if self.in_ is not None:
            found.append(("in", kind_of(self.in_[0]) or ValueKind.STRING))
        found += [(k, ValueKind.STRING) for k in ("matches", "prefix") if getattr(self, k) is not None]
        found += [(k, ValueKind.NUMBER) for k in ("below", "above") if getattr(self, k) is not None]
        return found

    @model_validator(mode="after")
    def _one_type(self) -> Conditions:
        found = self._kinds()
        if not found:
            raise PydanticCustomError(
                "policy",
                "names no condition; give one or more of equals, in, matches, prefix, below, above "
                '(a dotted path is written in quotes: "refund.amountCents" = { below = 5000 })',
            )
        kinds = dict.fromkeys(kind for _key, kind in found)
        if len(kinds) > 1:
            said = ", ".join(f"{key} reads {kind.value}" for key, kind in found)
            raise PydanticCustomError(
                "policy", "conditions on one parameter must read one type, but {said}", {"said": said}
            )
        return self


def _match(value: Any) -> Any:
    if not isinstance(value, dict) or not value:
        raise PydanticCustomError(
            "policy",
            "must be a table of parameter paths and their conditions, e.g. "
            'match = { command = { prefix = "ls" } }',
        )
    return value


def _only_when(then: Then, example: str) -> Any:
    """A validator refusing the field unless the block's `then` is `then`."""

    def check(value: Any, info: ValidationInfo) -> Any:
        said = info.data.get("then")
        if said is not None and said is not then:
            raise PydanticCustomError(
                "policy",
                "only a block with then = {want} takes {key} ({example}); this one says then = {said}",
                {"want": f'"{then.value}"', "key": info.field_name, "example": example, "said": f'"{said}"'},
            )
        return value

    return check


HintName = Annotated[
    Hint,
    Field(strict=False),
    say(
        '"{input}" is not an MCP annotation; '
        "use readOnlyHint, destructiveHint, idempotentHint or openWorldHint"
    ),
]


class WhenBlock(Table):
    """One `[[tools.NAME.when]]` block: conditions on parameter paths and an outcome."""

    match: Annotated[dict[MatchPath, Conditions], BeforeValidator(_match)] = Field(default_factory=dict)
    # The MCP tool's annotations as the gateway sends them: the server's claim about its own
    # tool, so a block reading them may ask or deny, never allow (`_no_allow_by_hints`).
    annotations: dict[HintName, Flag] | None = None
    then: Annotated[
        Then, Field(strict=False), say('"{input}" is not an outcome; use "allow", "ask" or "deny"')
    ]
    approvers: Approvers | None = None
    quorum: Count | None = None
    separate_duties: Flag | None = None
    step_up: Flag | None = None  # an Approve of a call it matches needs a passkey (docs/policy.md)
    reason: Text | None = None  # shown to the agent with the deny
    description: Text | None = None  # free text for people reading the file

    _asks = field_validator("approvers", "quorum", "separate_duties", "step_up")(
        _only_when(Then.ASK, "who approves this call")
    )
    _denies = field_validator("reason")(_only_when(Then.DENY, "the reason shown to the agent"))

    @model_validator(mode="after")
    def _no_allow_by_hints(self) -> WhenBlock:
        if not self.match and not self.annotations:
            raise PydanticCustomError(
                "policy",
                "names no condition; give match = { … } on parameters, or annotations = { … } on "
                "an MCP tool's hints",
            )
        if self.annotations and self.then is Then.ALLOW:
            raise PydanticCustomError(
                "policy",
                'a block that reads annotations may say then = "ask" or "deny", never "allow": '
                "annotations are the MCP server's own claim about its tool, not evidence that a "
                "call is safe; allow by conditions on parameters in a block of its own",
            )
        return self


WhenBlocks = Annotated[tuple[WhenBlock, ...], Field(strict=False)]

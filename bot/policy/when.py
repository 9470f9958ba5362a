"""What a tool's `when` blocks say about one call: compiled once when the policy loads, then
evaluated per call with no parsing (each `matches` is an RE2 program made at load).

A block is decided in three values. A condition on a path the call leaves out is not met.
A path holding a value of another type than its conditions read (a string where `below`
compares numbers, `null`, an object), or sent only under another spelling of its name
(`Command` for `command`), or under two spellings at once, cannot be evaluated: the tool
might read that value otherwise than the block would. A block is not met when any of its
conditions is not met; otherwise it cannot be evaluated when any of them cannot; otherwise
it matches. The first block that matches decides; the first one that cannot be evaluated
stops the search too, and the call is asked (`bot.policy.decision`), never allowed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from bot.policy.paths import ambiguous, find, spelled_otherwise
from bot.policy.when_schema import Conditions, Then, ValueKind, WhenBlock, compile_pattern, kind_of


class State(Enum):
    """A block's (or one condition's) verdict on a call."""

    MATCH = "match"
    NO = "no"
    UNKNOWN = "unknown"  # cannot be evaluated: the call is asked


_SENT = {type(None): "null", dict: "an object", list: "a list"}


def number_text(value: float) -> str:
    """A number as the policy file writes it: `5000`, `0.5`."""
    return str(value) if isinstance(value, int) else f"{value:g}"


def _quoted(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Test:
    """The conditions on one parameter path, ready to evaluate."""

    path: str
    kind: ValueKind
    equals: Any = None
    one_of: frozenset[Any] | None = None
    prefix: str | None = None
    pattern: str | None = None
    below: float | None = None
    above: float | None = None
    summary: str = ""
    regex: Any = field(default=None, compare=False)  # the RE2 program of `pattern`, made at load

    def verdict(self, parameters: Mapping[str, Any]) -> tuple[State, str]:
        """Whether the call meets these conditions, and why not (never quoting the value)."""
        present, value = find(parameters, self.path)
        if not present:
            other = spelled_otherwise(parameters, self.path)
            if other is not None:
                return State.UNKNOWN, (
                    f"parameters.{other} differs from {self.path}, which the block reads, only by case "
                    f"or width, so the tool may read what the block cannot see"
                )
            return State.NO, f"{self.path} is absent"
        if ambiguous(parameters, self.path):
            return State.UNKNOWN, (
                f"parameters.{self.path} is sent under several spellings that differ only by case or "
                "width, so which one the tool reads is unclear"
            )
        kind = kind_of(value)
        if kind is not self.kind:
            sent = kind.value if kind is not None else _SENT.get(type(value), "another type")
            said = f"parameters.{self.path} is {sent}, but its conditions read {self.kind.value}"
            return State.UNKNOWN, said
        failed = self._fails(value)
        return (State.NO, failed) if failed is not None else (State.MATCH, "")

    def _fails(self, value: Any) -> str | None:
        if self.equals is not None and value != self.equals:
            return f"{self.path} is not {_quoted(self.equals)}"
        if self.one_of is not None and value not in self.one_of:
            return f"{self.path} is none of {_quoted(sorted(self.one_of, key=str))}"
        if self.prefix is not None and not value.startswith(self.prefix):
            return f"{self.path} does not start with {_quoted(self.prefix)}"
        if self.regex is not None and self.regex.fullmatch(value) is None:
            return f"{self.path} does not match '{self.pattern}'"
        if self.below is not None and not value < self.below:
            return f"{self.path} is not below {number_text(self.below)}"
        if self.above is not None and not value > self.above:
            return f"{self.path} is not above {number_text(self.above)}"
        return None

    def holds(self, value: Any) -> bool:
        """Whether a value of this test's kind meets every condition (for the overlap check)."""
        return kind_of(value) is self.kind and self._fails(value) is None


@dataclass(frozen=True, slots=True)
class Block:
    """One `when` block: its key path, its tests (all must hold) and its outcome."""

    path: str  # tools.Bash.when[1]
    tests: tuple[Test, ...]
    then: Then
    section: WhenBlock
    summary: str  # its conditions in a line: `command starts with "git push"`
    # The MCP annotations the block reads, each with the value it wants (never an allow's).
    hints: tuple[tuple[str, bool], ...] = ()

    def verdict(
        self, parameters: Mapping[str, Any], annotations: Mapping[str, Any] | None = None
    ) -> tuple[State, str]:
        """Matches, does not match (and why), or cannot be evaluated (and why). An annotation
        the call does not carry (no gateway, or the server lists none) is not met."""
        for hint, wanted in self.hints:
            if (annotations or {}).get(hint) is not wanted:
                return State.NO, f"the tool's {hint} is not {str(wanted).lower()}"
        unknown: str | None = None
        for test in self.tests:
            state, why = test.verdict(parameters)
            if state is State.NO:
                return state, why
            if state is State.UNKNOWN and unknown is None:
                unknown = why
        return (State.UNKNOWN, unknown) if unknown is not None else (State.MATCH, "")


def _summary(path: str, c: Conditions) -> str:
    said = []
    if c.equals is not None:
        said.append(f"{path} = {_quoted(c.equals)}")
    if c.in_ is not None:
        said.append(f"{path} in {_quoted(list(c.in_))}")
    if c.prefix is not None:
        said.append(f"{path} starts with {_quoted(c.prefix)}")
    if c.matches is not None:
        said.append(f"{path} matches '{c.matches}'")
    if c.below is not None:
        said.append(f"{path} < {number_text(c.below)}")
    if c.above is not None:
        said.append(f"{path} > {number_text(c.above)}")
    return " and ".join(said)


def compile_block(section: WhenBlock, path: str) -> Block:
    """A validated block as its evaluator: each `matches` compiled to RE2 here, once."""
    tests = []
    for name, c in section.match.items():
        tests.append(
            Test(
                path=name,
                kind=c.kind,
                equals=c.equals,
                one_of=frozenset(c.in_) if c.in_ is not None else None,
                prefix=c.prefix,
                pattern=c.matches,
                regex=compile_pattern(c.matches) if c.matches is not None else None,
                below=c.below,
                above=c.above,
                summary=_summary(name, c),
            )
        )
    hints = tuple((h.value, v) for h, v in (section.annotations or {}).items())
    summary = " and ".join([*(t.summary for t in tests), *(f"{h} = {str(v).lower()}" for h, v in hints)])
    return Block(
        path=path, tests=tuple(tests), then=section.then, section=section, summary=summary, hints=hints
    )

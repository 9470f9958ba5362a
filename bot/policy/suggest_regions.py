"""Where on one parameter a tool's recorded calls were always approved: the candidate `when`
conditions of `cosigner policy suggest`, before each is checked and replayed (`suggest`).

Three shapes are tried on each scalar parameter path:

- a number range (`above`/`below`) over integers, spanning the approved values between two
  refused ones, reaching down to 0 when every approved value is 0 or more; never past the
  highest value approved;
- a short list of strings or booleans (`equals`/`in`), when the path holds few distinct
  values, each approved at least `min_per_value` times and none ever refused;
- a `prefix` ending at a separator (space, `/`, `:`, `=`), guarded by `matches` so that the
  rest of the value holds no shell operator (`; & | $ < > ( )` or a backquote), no line
  break and no `..`: `cat /srv/app/` must not allow `cat /srv/app/../../etc/shadow; rm -rf`.

A region never holds the value of a refused call (denied, expired, cancelled, refused by the
policy, or still waiting); a path on which a refused call's value is redacted is never used.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bot.policy.history import Call, Evidence
from bot.policy.paths import find
from bot.policy.redaction import REDACTED
from bot.policy.suggest_thresholds import Thresholds
from bot.policy.when_schema import ValueKind, compile_pattern, kind_of
from contracts.shown import MASK

DEPTH = 3  # how deep in nested objects parameter paths are looked for
_KEY = re.compile(r"[A-Za-z0-9_-]+")
_SEPARATORS = " /:="
_PREFIXES_PER_VALUE = 4
_UNSAFE = r";&|`$<>()\r\n"
# The whole value: no shell operator, no line break, and no `..` (a dot is never followed by one).
GUARD = rf"([^.{_UNSAFE}]|\.[^.{_UNSAFE}])*\.?"


@dataclass
class Region:
    """A candidate condition on one path, and the approved calls inside it."""

    path: str
    conditions: dict[str, Any]
    said: str  # `amountCents from 0 to 2000`
    covered: list[Call] = field(default_factory=list)

    @property
    def people(self) -> set[str]:
        """Everyone who approved a call inside the region."""
        return set().union(*(c.people for c in self.covered))

    def enough(self, t: Thresholds) -> bool:
        """Whether the region has the evidence a suggestion needs."""
        return len(self.covered) >= t.min_approvals and len(self.people) >= t.min_people


def _hidden(value: Any) -> bool:
    return isinstance(value, str) and (value == REDACTED or MASK.search(value) is not None)


def leaf_paths(parameters: dict[str, Any], prefix: str = "", depth: int = 1) -> Iterable[str]:
    """The dotted paths of a call's scalar values, nested objects read `DEPTH` deep; keys a
    path cannot name plainly (holding a dot, a space, …) are left out."""
    for key, value in parameters.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            continue
        path = f"{prefix}{key}"
        if isinstance(value, dict) and depth < DEPTH:
            yield from leaf_paths(value, f"{path}.", depth + 1)
        elif kind_of(value) is not None:
            yield path


def _values(calls: Iterable[Call], path: str) -> tuple[list[tuple[Call, Any]], bool]:
    """Each call's value at `path` (calls without one left out), and whether any is redacted."""
    found, hidden = [], False
    for call in calls:
        present, value = find(call.parameters, path)
        if not present:
            continue
        if _hidden(value):
            hidden = True
            continue
        found.append((call, value))
    return found, hidden


def regions(calls: list[Call], t: Thresholds) -> list[Region]:
    """Every candidate region of one tool's calls with enough evidence, the widest first."""
    approved = [c for c in calls if c.evidence is Evidence.APPROVED]
    refused = [c for c in calls if c.evidence is Evidence.REFUSED]
    paths = sorted({p for c in approved for p in leaf_paths(c.parameters)})
    found: list[Region] = []
    for path in paths:
        bad, hidden = _values(refused, path)
        if hidden:
            continue  # a refused call's value here is unknown: no region can be shown to exclude it
        good, _ = _values(approved, path)
        kinds = {kind_of(v) for _, v in good}
        if len(kinds) != 1:
            continue
        kind = kinds.pop()
        against = [v for _, v in bad if kind_of(v) is kind]
        if kind is ValueKind.NUMBER:
            found += _number_range(path, good, against)
        else:
            found += _listed(path, good, against, t)
        if kind is ValueKind.STRING:
            found += _prefixed(path, good, against, t)
    ranked = [r for r in found if r.enough(t)]
    order = {"range": 0, "in": 1, "prefix": 2}
    return sorted(ranked, key=lambda r: (-len(r.covered), order[_shape(r)], r.path))


def _shape(r: Region) -> str:
    if "prefix" in r.conditions:
        return "prefix"
    return "range" if "below" in r.conditions else "in"


def _integral(value: Any) -> bool:
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _number_range(path: str, good: list[tuple[Call, Any]], against: list[Any]) -> list[Region]:
    if not all(_integral(v) for _, v in good):
        return []  # `below` is strict: a range closed at a fractional value cannot be written exactly
    bounds = [-math.inf, *sorted(set(against)), math.inf]
    best: list[tuple[Call, Any]] = []
    low_end = -math.inf
    for a, b in itertools.pairwise(bounds):
        inside = [(c, v) for c, v in good if a < v < b]
        if len(inside) > len(best):
            best, low_end = inside, a
    if not best:
        return []
    lo, hi = int(min(v for _, v in best)), int(max(v for _, v in best))
    if lo > 0 and low_end < 0:
        lo = 0  # no refused value between 0 and the lowest approved one
    return [
        Region(
            path,
            {"above": lo - 1, "below": hi + 1},
            f"{path} from {lo} to {hi}",
            [c for c, _ in best],
        )
    ]


def _listed(path: str, good: list[tuple[Call, Any]], against: list[Any], t: Thresholds) -> list[Region]:
    seen = Counter(v for _, v in good)
    if len(set(seen) | set(against)) > t.max_values:
        return []
    chosen = sorted((v for v, n in seen.items() if n >= t.min_per_value and v not in against), key=str)
    if not chosen:
        return []
    covered = [c for c, v in good if v in chosen]
    if len(chosen) == 1:
        value = chosen[0]
        said = f"{path} = {_text(value)}"
        return [Region(path, {"equals": value}, said, covered)]
    said = f"{path} one of {', '.join(_text(v) for v in chosen)}"
    return [Region(path, {"in": chosen}, said, covered)]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, str) else str(value)


def _prefixes(value: str) -> list[str]:
    found = []
    for i, ch in enumerate(value):
        if ch in _SEPARATORS and i > 0 and any(x.isalnum() for x in value[: i + 1]):
            found.append(value[: i + 1])
            if len(found) == _PREFIXES_PER_VALUE:
                break
    return found


def _prefixed(path: str, good: list[tuple[Call, Any]], against: list[Any], t: Thresholds) -> list[Region]:
    guard = compile_pattern(GUARD)

    def safe(v: str) -> bool:
        return guard.fullmatch(v) is not None

    best: Region | None = None
    for p in sorted({p for _, v in good if safe(v) for p in _prefixes(v)}):
        if any(v.startswith(p) and safe(v) for v in against):
            continue
        covered = [c for c, v in good if v.startswith(p) and safe(v)]
        region = Region(path, {"prefix": p, "matches": GUARD}, f"{path} starting with {p!r}", covered)
        if not region.enough(t):
            continue
        if best is None or (len(covered), len(p)) > (len(best.covered), len(best.conditions["prefix"])):
            best = region
    return [best] if best is not None else []

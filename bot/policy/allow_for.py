"""A tool's "Allow for …": the policy keys, what `policy check` says of them, and what a
call is matched on.

`allow_for = "1h"` is the longest standing allow an approver may give on the tool's cards
(the lengths offered are those of `contracts.allowances.CHOICES` up to it);
`allow_for_match` names the arguments a later call must have equal to the approved call's,
`allow_for_at_most` the numbers it may not exceed, and `allow_for_uses` (default 20) how
many calls one standing allow lets through. A call is matched on what the approver saw:
the redacted values of the match paths, and only while redaction did not touch them (a
value that is hidden, wholly or in part, can never be matched, so such a call is asked).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.policy.paths import ambiguous, find
from contracts.allowances import choices_up_to
from contracts.digest import parameters_digest
from contracts.enums import ApprovalMode
from contracts.shown import REDACTED

DEFAULT_USES = 20


@dataclass(frozen=True, slots=True)
class AllowFor:
    """A tool's `allow_for` keys as the merge picked them."""

    cap: float  # seconds: the longest standing allow an approver may give
    match: tuple[str, ...] = ()  # dotted paths whose values must equal the approved call's
    at_most: tuple[str, ...] = ()  # dotted paths whose numbers may not exceed the approved call's
    uses: int = DEFAULT_USES


@dataclass(frozen=True, slots=True)
class Terms:
    """What a call offers a standing allow to match on: the digest of its match values (as
    shown) and its numbers at the `at_most` paths."""

    key: str
    shown: dict[str, Any]  # the match paths' values as the approver sees them (redacted)
    numbers: dict[str, float]


def allow_for_of(pick: Callable[[str, Any], Any]) -> AllowFor | None:
    """The merged `allow_for` keys (`pick` reads a key through the policy's layers)."""
    cap = pick("allow_for", None)
    match = tuple(pick("allow_for_match", ()))
    at_most = tuple(pick("allow_for_at_most", ()))
    uses = pick("allow_for_uses", DEFAULT_USES)
    return AllowFor(cap, match, at_most, uses) if cap is not None else None


def is_number(value: Any) -> bool:
    """A JSON number: `true` is not one, whatever Python says."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def terms_of(allow: AllowFor, parameters: Mapping[str, Any], shown: Mapping[str, Any]) -> Terms | None:
    """A call's terms under `allow`, or None when no standing allow may cover it: a match path
    whose value redaction touched (or spelled twice, `amountCents` beside `AmountCents`), or
    an `at_most` path that does not hold a JSON number."""
    values: dict[str, Any] = {}
    for path in allow.match:
        there, raw = find(parameters, path)
        if ambiguous(parameters, path):
            return None
        if not there:
            continue  # absent here, and so it must be absent in every call the allow covers
        if find(shown, path)[1] != raw:
            return None  # hidden, wholly or in part: never matched on
        values[path] = raw
    numbers: dict[str, float] = {}
    for path in allow.at_most:
        raw = find(parameters, path)[1]
        if not is_number(raw) or ambiguous(parameters, path):
            return None
        numbers[path] = float(raw)
    return Terms(parameters_digest(values), values, numbers)


def shown_terms(allow: AllowFor, shown: Mapping[str, Any]) -> Terms | str:
    """The terms of an approved call from what the approver saw, or why none can be given
    (a match value hidden by redaction, an `at_most` value that is not a number)."""
    values: dict[str, Any] = {}
    for path in allow.match:
        there, value = find(shown, path)
        if there and _hidden(value):
            return f"{path} is hidden on the card, so calls cannot be matched on it"
        if there:
            values[path] = value
    numbers: dict[str, float] = {}
    for path in allow.at_most:
        value = find(shown, path)[1]
        if not is_number(value):
            return f"{path} is not a number in this call, so no later call can be held to it"
        numbers[path] = float(value)
    return Terms(parameters_digest(values), values, numbers)


def _hidden(value: Any) -> bool:
    if isinstance(value, str):
        return value == REDACTED or "[hidden:" in value
    if isinstance(value, Mapping):
        return any(_hidden(v) for v in value.values())
    if isinstance(value, list):
        return any(_hidden(v) for v in value)
    return False


def offered(allow: AllowFor | None, mode: ApprovalMode, quorum: int) -> tuple[str, ...]:
    """The lengths a card offers ("15m", "1h", …): none without `allow_for`, for a call no
    person is asked, or where more than one approver must approve."""
    if allow is None or mode in (ApprovalMode.NONE, ApprovalMode.HANDOFF) or quorum > 1:
        return ()
    return tuple(c.name for c in choices_up_to(allow.cap))


def problems(rules: Iterable[Any], types_at: Any) -> list[str]:
    """What `policy check` refuses in the `allow_for` keys of `rules` (merged `ToolRule`s).

    `types_at(rule, path)` gives the JSON types the tool's `parameters_schema` allows at a
    path (None: unknown or no schema; empty: the path cannot exist)."""
    found: list[str] = []
    for rule in rules:
        allow: AllowFor | None = rule.allow_for
        if allow is None:
            for key in ("allow_for_match", "allow_for_at_most", "allow_for_uses"):
                if key in dict(rule.origins):
                    found.append(
                        f"{rule.origin(key)}: has no effect without allow_for; "
                        'set allow_for = "1h" or remove it'
                    )
            continue
        where = rule.origin("allow_for")
        if not choices_up_to(allow.cap):
            found.append(
                f"{where}: the shortest Allow for is 15m, so nothing would be offered; set it to 15m or more"
            )
        if rule.quorum > 1:
            found.append(
                f"{where}: {rule.name} needs {rule.quorum} approvers ({rule.origin('quorum')}); one "
                "person's Allow for would let later calls through without the others: remove one of them"
            )
        if rule.handoff is not None:
            found.append(f"{where}: a handoff is done by a person every time; remove allow_for")
        if getattr(rule, "step_up", False):
            # Step-up asks for a passkey on every Approve; a standing allow would skip it.
            found.append(
                f"{where}: {rule.name} sets step_up, which a standing allow would skip; remove one of them"
            )
        if rule.mode is ApprovalMode.NONE and not rule.when:
            found.append(
                f"{where}: {rule.name} never asks a person ({rule.describe()}), so Allow for is never offered"
            )
        for key, paths, want in (
            ("allow_for_match", allow.match, None),
            ("allow_for_at_most", allow.at_most, {"number", "integer"}),
        ):
            for path in paths:
                types = types_at(rule, path)
                if types is not None and not types:
                    found.append(
                        f"{rule.origin(key)}: parameters_schema says parameters.{path} cannot exist; "
                        "correct the parameter path"
                    )
                elif types is not None and want is not None and not types & want:
                    found.append(
                        f"{rule.origin(key)}: parameters_schema says parameters.{path} is "
                        f"{' or '.join(sorted(types))}, not a number, so no call could be held to it; "
                        "move it to allow_for_match"
                    )
        for path in set(allow.match) & set(allow.at_most):
            found.append(
                f'{rule.origin("allow_for_at_most")}: "{path}" is in allow_for_match too; '
                "name it in one of them"
            )
    return found

"""Strict JSON reading: find what two JSON parsers could read differently.

A repeated key (`{"name": "lookup_order", ..., "name": "issue_refund"}`) is read as its
last value by Python and most parsers and as its first by others; `NaN`, `Infinity` and a
number too large for a 64-bit float are not JSON at all to some. The Cosigner server and the
MCP gateway both read through `read` and refuse such text instead of picking one reading;
each words its own refusal (an HTTP `INVALID_REQUEST`, a JSON-RPC `-32600`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable

TYPE_CHECKING = False  # typing.TYPE_CHECKING without loading typing
if TYPE_CHECKING:
    from typing import Any

__all__ = ["Reading", "read", "show_name"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}")


def show_name(key: str) -> str:
    """A repeated key as a message may quote it: a plain name as itself, anything else not."""
    return f'the key "{key}"' if _NAME.fullmatch(key) else "a key"


class Reading:
    """What `read` found: the value (or why the text is not JSON), and every ambiguity in it.

    `top_repeated` holds the keys repeated in the outermost object (its `id`, for one, cannot
    be trusted then). A plain class, not a dataclass: `cosigner-hook` reads through it, and
    loading `dataclasses` would slow every hook's start."""

    __slots__ = ("error", "problems", "top_repeated", "value")

    def __init__(self) -> None:
        self.value: Any = None
        self.error: ValueError | RecursionError | None = None  # why the text is not JSON, if it is not
        self.problems: list[str] = []
        self.top_repeated: set[str] = set()

    @property
    def ambiguous(self) -> bool:
        """True when some parser could read the text otherwise."""
        return bool(self.problems)


def read(text: str | bytes, *, show_key: Callable[[str], str] = show_name) -> Reading:
    """Parse `text`, noting each repeated key, non-finite constant and overflowing number (those
    met before a syntax error too); `show_key` words a repeated key for the message (it must
    quote nothing secret). Never raises for bad input: `error` says why it is not JSON."""
    reading = Reading()

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        repeated = set()
        for key, value in items:
            if key in out:
                repeated.add(key)
                reading.problems.append(
                    f"{show_key(key)} appears twice in one JSON object; send each key once"
                )
            out[key] = value
        reading.top_repeated = repeated  # the last object decoded is the outermost
        return out

    def constant(name: str) -> None:
        reading.problems.append(f"{name} is not a JSON number; send a finite number")

    def number(digits: str) -> float:
        value = float(digits)
        if not math.isfinite(value):
            reading.problems.append("a number is too large for a 64-bit float; send a smaller one")
        return value

    try:
        reading.value = json.loads(text, object_pairs_hook=pairs, parse_constant=constant, parse_float=number)
    except (ValueError, RecursionError) as exc:
        reading.error = exc
    return reading

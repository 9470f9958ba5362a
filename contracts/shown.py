"""How redacted parameters read on a card or in a text: masks, fields, cuts and the notice.

The engine redacts (`bot.policy.redaction`): a policy path or a secret-named key becomes
`[REDACTED]`, a credential-looking span inside a value becomes a mask such as
`[hidden: JWT, 96 chars]`. Surfaces then show every top-level field, in one stable order
(sorted by name, so an agent cannot push a field off by sending it last), each value cut
to a fixed length when it must be, and say plainly what they masked or cut.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

REDACTED = "[REDACTED]"
MASK_KINDS = ("card number", "JWT", "API key", "private key", "bearer token")
MASK = re.compile(r"\[hidden: (?:" + "|".join(re.escape(k) for k in MASK_KINDS) + r"), [0-9,]+ chars?\]")


def mask(kind: str, length: int) -> str:
    """The text that stands in for a hidden span: its kind and how long it was."""
    return f"[hidden: {kind}, {length:,} char{'s' if length != 1 else ''}]"


def mask_text(value: str, spans: Sequence[tuple[int, int, str]]) -> str:
    """`value` with each (start, end, kind) span, in order and not overlapping, masked."""
    out, at = [], 0
    for start, end, kind in spans:
        out.append(value[at:start])
        out.append(mask(kind, end - start))
        at = end
    out.append(value[at:])
    return "".join(out)


def render(value: Any) -> str:
    """One value as compact JSON on one line (strings quoted, newlines escaped), keys sorted."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": "), default=str)


@dataclass(frozen=True)
class Field:
    """One top-level parameter as shown: its name, its full rendered value, and what is hidden."""

    name: str
    text: str
    masks: int  # credential-looking spans masked in place
    redacted: bool  # the value or a part of it was replaced whole by policy or a secret-named key

    def cut(self, limit: int) -> tuple[str, int]:
        """The rendered value cut to `limit` characters, and how many characters were cut."""
        if len(self.text) <= limit:
            return self.text, 0
        return self.text[:limit], len(self.text) - limit


def fields(parameters: Mapping[str, Any]) -> list[Field]:
    """Every top-level parameter, sorted by name."""
    shown = []
    for name in sorted(parameters, key=str):
        text = render(parameters[name])
        shown.append(Field(str(name), text, len(MASK.findall(text)), REDACTED in text))
    return shown


@dataclass(frozen=True)
class Hidden:
    """What a card or text leaves out: fields masked in place, and fields cut (by name)."""

    masked: tuple[str, ...] = ()
    cut: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.masked or self.cut)

    def notice(self, where: str = "see the full call") -> str:
        """`2 values partly hidden, 1 value cut: see the full call` (empty when nothing is)."""
        parts = []
        if self.masked:
            parts.append(f"{_count(len(self.masked))} partly hidden")
        if self.cut:
            parts.append(f"{_count(len(self.cut))} cut")
        return f"{', '.join(parts)}: {where}" if parts else ""

    def details(self) -> str:
        """Which fields: `partly hidden (secrets): to, body; cut: note`."""
        parts = []
        if self.masked:
            parts.append("partly hidden (credential-looking text): " + ", ".join(self.masked))
        if self.cut:
            parts.append("cut: " + ", ".join(self.cut))
        return "; ".join(parts)


def hidden(shown: Sequence[Field], limit: int) -> Hidden:
    """What showing `shown` with each value cut to `limit` characters leaves out."""
    return Hidden(
        masked=tuple(f.name for f in shown if f.masks),
        cut=tuple(f.name for f in shown if len(f.text) > limit),
    )


def _count(n: int) -> str:
    return f"{n} value{'s' if n != 1 else ''}"

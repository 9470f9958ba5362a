"""How long a text is as the network counts it, cutting to fit, and a call on one line.

Texts aim for two concatenated GSM-7 segments (`BUDGET`, 306 septets). Parameters are
listed sorted by name, strings quoted unless plainly one token, so no value passes for
another parameter. Everything here is pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from contracts.ports import ApprovalCard
from contracts.shown import REDACTED

BUDGET = 306  # two concatenated GSM-7 segments of 153 septets
CLAIM_LABEL = "Agent says (unverified): "

_GSM7_BASIC = set(
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?¡"
    "ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
_GSM7_EXTENDED = set("^{}\\[~]|€\f")
_BARE = re.compile(r"^[A-Za-z0-9_.:@+/\-]+$")
# Typographic punctuation LLMs like to write; one of these would switch the whole
# text to UCS-2 (70 chars a segment), so the agent's reason is folded to plain ASCII.
PLAIN = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"', "–": "-", "—": "-", "…": "..."})


def sms_length(text: str) -> int:
    """Length as the network counts it: GSM-7 septets, or UTF-16 units if any char is not GSM-7."""
    if all(c in _GSM7_BASIC or c in _GSM7_EXTENDED for c in text):
        return sum(2 if c in _GSM7_EXTENDED else 1 for c in text)
    return len(text.encode("utf-16-le")) // 2


def segments(text: str) -> int:
    """How many SMS segments `text` takes (153 septets or 67 UCS-2 units each when split)."""
    length = sms_length(text)
    gsm = all(c in _GSM7_BASIC or c in _GSM7_EXTENDED for c in text)
    single, part = (160, 153) if gsm else (70, 67)
    return 1 if length <= single else -(-length // part)


def compact_parameters(parameters: Mapping[str, Any], value_limit: int | None = None) -> str:
    """Parameters on one line sorted by name, `key=value, …`; strings are quoted unless
    plainly one token; with `value_limit`, each value is cut to that many characters.

    Quoting keeps a value like `"1, amountCents=1"` from passing for another parameter.
    """
    if not parameters:
        return "(none)"
    shown = []
    for name in sorted(parameters, key=str):
        value = value_text(parameters[name])
        if value_limit is not None and len(value) > value_limit:
            value = f"{value[:value_limit]}...(+{len(value) - value_limit})"
        shown.append(f"{token(str(name))}={value}")
    return ", ".join(shown)


def token(text: str) -> str:
    """`text` as it is listed: bare when plainly one token (or the redaction mark), else quoted."""
    if text == REDACTED or _BARE.match(text):
        return text
    return json.dumps(text, ensure_ascii=False)


def value_text(value: Any) -> str:
    """A parameter's value as it is listed: a string as a `token`, anything else as compact JSON."""
    if isinstance(value, str):
        return token(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def cut(text: str, budget: int) -> str:
    """`text` if it fits `budget`, else its start and a note like "... (+120 chars cut)"."""
    if sms_length(text) <= budget:
        return text
    keep = len(text)
    while keep > 0:
        candidate = f"{text[:keep]}... (+{len(text) - keep} chars cut)"
        if sms_length(candidate) <= budget:
            return candidate
        keep -= max(1, (sms_length(candidate) - budget) // 2)
    return f"(+{len(text)} chars cut)"


def preview_line(card: ApprovalCard) -> str:
    """An operation's preview on one line: its labelled fields, then its effects."""
    assert card.preview is not None
    fields = ", ".join(f"{f.label}: {f.value}" for f in card.preview.fields)
    effects = " ".join(e if e.endswith(".") else f"{e}." for e in card.preview.effects)
    return " ".join(part for part in (fields + "." if fields else "", effects) if part) or "(no details)"

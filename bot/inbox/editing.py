"""The inbox's edit form as its templates draw it: one input per editable parameter, typed as
Slack's modal types it (`bot.approvals.edits.form_fields`, `contracts.edits.parse_input`), and
the changes of an edited call (old → new)."""

from __future__ import annotations

import json
from typing import Any

from contracts.edits import EditField, InputKind, initial_text
from contracts.enums import ApprovalStatus
from storage.records import Record

FIELD = "f."  # an edit form's input for one parameter: "f.<name>"
TEXT_MAX = 3000  # the longest value an edit's input takes

_PICKED = (InputKind.BOOLEAN, InputKind.CHOICE)


def starting_text(f: EditField) -> str:
    """What an input starts with: the current value's text, or for a true/false or a choice
    the option of the current value."""
    if f.kind not in _PICKED:
        return initial_text(f)
    if f.kind is InputKind.BOOLEAN:
        return "true" if f.value is True else "false" if f.value is False else ""
    current = json.dumps(f.value, ensure_ascii=False)
    return next((str(i) for i, c in enumerate(f.choices) if c == current), "")


def input_of(f: EditField, text: str, problem: str | None) -> dict[str, Any]:
    """One input of the edit form, as the template draws it."""
    options: list[tuple[str, str]] = []
    if f.kind is InputKind.BOOLEAN:
        options = [("true", "true"), ("false", "false")]
    elif f.kind is InputKind.CHOICE:
        options = [(str(i), c) for i, c in enumerate(f.choices)]
    hint = f.description or ""
    if f.kind is InputKind.JSON:
        hint = f"JSON; it must stay {_kind_of(f.value)}. {hint}".strip() if f.value is not None else "JSON"
    return {
        "name": f.name,
        "input": FIELD + f.name,
        "kind": f.kind.value,
        "text": text,
        "options": options,
        "hint": hint,
        "problem": problem,
        "long": f.kind is InputKind.JSON or len(text) > 80 or "\n" in text,
    }


def _kind_of(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "true or false"}.get(
        type(value), "a number"
    )


def shown(value: Any) -> str:
    """A value as the review step and the history show it: indented JSON."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def edited_changes(rec: Record) -> list[dict[str, str]]:
    """What approvers changed of a call, old → new per field as shown: the call a quorum is
    asked to approve while pending, the call that ran once approved (nothing otherwise)."""
    result = rec.edit.result if rec.edit is not None else None
    if result is None or (rec.closed and rec.status is not ApprovalStatus.APPROVED):
        return []
    return [
        {"name": n, "old": shown(rec.parameters.get(n)), "new": shown(result.parameters.get(n))}
        for n in result.fields
    ]

"""Edit before approve: what is kept of an editable call, what a surface may show of it, and
the narrow port a surface uses to offer an edit.

An approver may change the parameters the policy marks `editable` (never a value the policy
or the secret scan hides, never the tool) when the agent said it can run an edited call
(`acceptsEdits`). The edit is an approval of the edited call: `EditResult` is what the
decision carries, and the grant binds its digest.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from contracts.ports import ApprovalCard, Look
from cosigner.strict_json import read

MAX_SCHEMA_BYTES = 32 * 1024
"""The largest `parametersSchema` taken, as canonical JSON."""


class EditResult(BaseModel):
    """The call an approver approved instead of the one asked for."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    parameters: dict[str, Any]  # the edited call as shown: values the policy hides stay hidden
    fields: tuple[str, ...]  # the parameters the approver changed
    digest: str  # RFC 8785 digest of the unredacted edited call: what the grant binds
    # Who made this version of the call (their id on `surface`); a quorum's approvers see it.
    by: str | None = None
    surface: str | None = None


class EditState(BaseModel):
    """An editable call as stored with its approval (JSON in `approvals.edit`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    fields: tuple[str, ...]  # what an approver may change: editable, present, nothing hidden in it
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    # The unredacted parameters sealed under COSIGNER_SECRET, only when redaction changed them:
    # the edited call's digest is over the real values of the fields nobody may change.
    sealed: str | None = None
    # The edited call: while pending under a quorum, the current call every approver is asked
    # to approve; once approved, the call that runs.
    result: EditResult | None = None


class InputKind(StrEnum):
    """How a field is edited: a typed input, or JSON text of the same JSON type."""

    INTEGER = "integer"
    NUMBER = "number"
    TEXT = "text"
    BOOLEAN = "boolean"
    CHOICE = "choice"  # one of the schema's `enum` values (each as its JSON text)
    JSON = "json"


@dataclass(frozen=True)
class EditField:
    """One editable parameter: its name, input, current value (as shown) and the schema's words."""

    name: str
    kind: InputKind
    value: Any
    choices: tuple[str, ...] = ()
    description: str | None = None


@dataclass(frozen=True)
class EditForm:
    """What an approver may edit of a pending call, checked like an answer (tenant,
    conversation, message, approver)."""

    card: ApprovalCard
    fields: tuple[EditField, ...]


@dataclass(frozen=True)
class Change:
    """One changed parameter: old → new, both as shown."""

    name: str
    old: Any
    new: Any


@dataclass(frozen=True)
class EditPreview:
    """An edit that would be accepted: the changes, for the confirm step."""

    card: ApprovalCard
    changes: tuple[Change, ...]

    def values(self) -> dict[str, Any]:
        """The changed values by name, as an `Answer.edit` carries them."""
        return {c.name: c.new for c in self.changes}


_WHOLE = re.compile(r"^-?\d{1,16}$")
_NUMBER = re.compile(r"^-?\d{1,16}(\.\d{1,16})?([eE][-+]?\d{1,3})?$")


def initial_text(f: EditField) -> str:
    """The value as its input starts: the number, the text, or indented JSON (a choice or a
    true/false starts from its current option instead)."""
    if f.kind in (InputKind.INTEGER, InputKind.NUMBER):
        return (
            json.dumps(f.value) if isinstance(f.value, (int, float)) and not isinstance(f.value, bool) else ""
        )
    if f.kind is InputKind.TEXT:
        return f.value if isinstance(f.value, str) else ""
    if f.kind in (InputKind.BOOLEAN, InputKind.CHOICE):
        return ""
    return json.dumps(f.value, indent=2, ensure_ascii=False)


def parse_input(field: EditField, raw: str | None) -> Any:
    """The value an approver entered for `field`, as JSON; `ValueError` says what is wrong.

    Inputs give text: a whole number must be one (no `1.0`, no `1e3`), a choice is the index
    of one of the field's `choices`, JSON text is read strictly (no repeated key, no NaN) and
    must keep the value's own JSON type when no schema says otherwise."""
    text = (raw or "").strip() if field.kind is not InputKind.TEXT else (raw or "")
    if field.kind is InputKind.INTEGER:
        if not _WHOLE.match(text):
            raise ValueError("must be a whole number, such as 4000")
        return int(text)
    if field.kind is InputKind.NUMBER:
        if not _NUMBER.match(text):
            raise ValueError("must be a number, such as 40.5")
        number = float(text)
        if not math.isfinite(number):
            raise ValueError("must be a finite number")
        return int(text) if _WHOLE.match(text) else number
    if field.kind is InputKind.BOOLEAN:
        if text not in ("true", "false"):
            raise ValueError("choose true or false")
        return text == "true"
    if field.kind is InputKind.CHOICE:
        if not text.isdigit() or int(text) >= len(field.choices):
            raise ValueError("choose one of the options")
        return json.loads(field.choices[int(text)])
    if field.kind is InputKind.TEXT:
        return text
    reading = read(text)
    if reading.error is not None:
        raise ValueError(
            f"is not JSON ({reading.error}); write it as JSON, e.g. {json.dumps(field.value)[:60]}"
        )
    if reading.ambiguous:
        raise ValueError(reading.problems[0])
    return reading.value


@runtime_checkable
class EditDesk(Protocol):
    """What a surface that can host an edit asks of the engine; an approval is only ever
    changed by `ApprovalDesk.answer` with `Answer.edit` set."""

    async def edit_form(self, look: Look) -> EditForm:
        """The editable fields of a pending call, for one of its approvers where it was
        shown; raises a `CosignerError` naming why not."""
        ...

    async def check_edit(self, look: Look, values: Mapping[str, Any]) -> EditPreview:
        """Check an edit without applying it; an `InvalidRequest` carries `problems` (field
        and reason) for each value that cannot be taken."""
        ...

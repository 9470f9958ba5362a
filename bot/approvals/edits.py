"""Edit before approve, the engine side: what an approver may change of a call, the check of
an edit, and the edited call that the grant binds.

An edit is offered only when the agent can run an edited call (`acceptsEdits`) and the policy
marks parameters `editable`; of those, only the ones present in the call with nothing hidden
in them (no redacted path, no masked credential): an approver never sees, so never changes, a
hidden value. The tool name is never editable. The edited call keeps every other parameter
exactly as the agent sent it; when redaction hid some of them, the call is kept sealed under
COSIGNER_SECRET so the edited call's digest covers their real values, while the decision and
the audit record show them hidden as everywhere else.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.approvals import schema_rules
from bot.policy import ToolRule, json_limits, redact
from contracts.digest import parameters_digest
from contracts.edits import (
    Change,
    EditField,
    EditResult,
    EditState,
    InputKind,
)
from contracts.enums import ApprovalMode
from contracts.errors import InvalidRequest
from contracts.wire import ApprovalRequest
from storage.records import Record
from storage.sealing import TokenSeal

MAX_CHOICES = 100  # of a static select in Slack
_JSON_TYPES = {bool: "boolean", int: "number", float: "number", str: "string", list: "array", dict: "object"}


def sealed_context(tenant: str, execution_id: str, tool_call_id: str) -> str:
    """What a sealed call is bound to: it opens for this call only."""
    return f"edit:{tenant}:{execution_id}:{tool_call_id}"


def sealed_for_edit(req: ApprovalRequest, seal: TokenSeal | None, tenant: str) -> str | None:
    """The call's parameters sealed for an edit of it shown redacted (`offer`), where the agent
    accepts edits and the server has a seal; sealed before `offer`, a seal being random."""
    if not req.acceptsEdits or seal is None:
        return None
    context = sealed_context(tenant, req.executionId, req.toolCallId)
    return seal.seal(json.dumps(req.parameters, separators=(",", ":")), context)


def offer(
    rule: ToolRule, req: ApprovalRequest, shown: Mapping[str, Any], sealed: str | None
) -> EditState | None:
    """What an approver may edit of this call (None: nothing); `sealed`: its parameters as
    `sealed_for_edit` sealed them, needed where the call is shown redacted."""
    if not req.acceptsEdits or rule.editable is False or rule.handoff is not None:
        return None
    if rule.mode is ApprovalMode.NONE:
        return None
    names = (
        list(req.parameters) if rule.editable is True else [n for n in rule.editable if n in req.parameters]
    )
    fields = tuple(n for n in names if shown.get(n) == req.parameters[n])
    if not fields:
        return None
    if dict(shown) == req.parameters:
        sealed = None  # nothing hidden: the edited call's digest needs nothing sealed
    elif sealed is None:
        return None  # the edited call's digest needs the hidden values: no edit without a seal
    return EditState(fields=fields, json_schema=req.parametersSchema, sealed=sealed)


def form_fields(state: EditState, shown: Mapping[str, Any]) -> tuple[EditField, ...]:
    """The editable fields as inputs: typed from the schema, else by the value's own JSON type."""
    properties = (state.json_schema or {}).get("properties")
    properties = properties if isinstance(properties, dict) else {}
    out = []
    for name in state.fields:
        value = shown.get(name)
        spec = properties.get(name)
        spec = spec if isinstance(spec, dict) else {}
        kind, choices = _input(spec, value)
        description = spec.get("description")
        out.append(
            EditField(
                name=name,
                kind=kind,
                value=value,
                choices=choices,
                description=description[:300] if isinstance(description, str) else None,
            )
        )
    return tuple(out)


def _input(spec: Mapping[str, Any], value: Any) -> tuple[InputKind, tuple[str, ...]]:
    enum = spec.get("enum")
    if isinstance(enum, list) and 0 < len(enum) <= MAX_CHOICES:
        return InputKind.CHOICE, tuple(json.dumps(v, ensure_ascii=False) for v in enum)
    declared = spec.get("type")
    if declared is None and not spec:
        declared = {bool: "boolean", int: "integer", float: "number", str: "string"}.get(type(value))
    kinds = {
        "integer": InputKind.INTEGER,
        "number": InputKind.NUMBER,
        "boolean": InputKind.BOOLEAN,
        "string": InputKind.TEXT,
    }
    return (kinds.get(declared, InputKind.JSON) if isinstance(declared, str) else InputKind.JSON), ()


@dataclass(frozen=True)
class Edited:
    """An edit that may be approved: the edited call (unredacted, for the policy), the result
    to store, and the changes as the confirm step shows them."""

    call: dict[str, Any]
    result: EditResult
    changes: tuple[Change, ...]


def original_call(rec: Record, seal: TokenSeal | None) -> dict[str, Any]:
    """The call as the agent sent it: sealed when redaction changed it, else as stored."""
    state = rec.edit
    if state is None or state.sealed is None:
        return dict(rec.parameters)
    if seal is None:
        raise InvalidRequest(
            "this call can be edited only where COSIGNER_SECRET is the one it was sealed under"
        )
    opened: dict[str, Any] = json.loads(
        seal.open(state.sealed, sealed_context(rec.tenant, rec.execution_id, rec.tool_call_id))
    )
    return opened


def current_call(rec: Record, seal: TokenSeal | None) -> dict[str, Any]:
    """The call the approvers are asked to approve, unredacted: the agent's, or after an edit
    (a quorum's request stays pending) the edited one. Only fields with nothing hidden in
    them are ever edited, so their values as shown are their real values."""
    call = original_call(rec, seal)
    state = rec.edit
    if state is not None and state.result is not None:
        shown = state.result.parameters
        call.update({n: shown[n] for n in state.fields if n in shown})
    return call


async def edited(rec: Record, values: Mapping[str, Any], seal: TokenSeal | None, rule: ToolRule) -> Edited:
    """Check an edit of `rec`'s current call (the agent's, or the one an earlier edit made) and
    build the edited call; raise `InvalidRequest` whose `problems` name each field and why.
    The result's `fields` are those that differ from the agent's own call."""
    state = rec.edit
    if state is None or not state.fields:
        raise InvalidRequest(f"approval {rec.id} offers no edit; approve or deny the call as it is")
    allowed = set(state.fields)
    if rule.editable is not True:
        allowed &= set(
            rule.editable or ()
        )  # the policy as it stands now: a field it no longer lists is not editable
    problems: list[dict[str, str]] = []
    changes: list[Change] = []
    current = rec.call_shown
    for name, new in values.items():
        if name not in allowed:
            may = ", ".join(sorted(allowed)) or "none"
            problems.append({"field": name, "message": f"{name} cannot be edited; editable here: {may}"})
            continue
        old = current.get(name)
        if _same(new, old):
            continue
        if state.json_schema is None and _JSON_TYPES.get(type(new)) != _JSON_TYPES.get(type(old)):
            problems.append(
                {
                    "field": name,
                    "message": f"must stay {_article(_JSON_TYPES.get(type(old), 'null'))}, "
                    "the JSON type the agent sent",
                }
            )
            continue
        if redact({name: new}, (), rule.show) != {name: new}:
            problems.append(
                {
                    "field": name,
                    "message": "looks like a credential, which Cosigner would hide; enter another value",
                }
            )
            continue
        changes.append(Change(name, old, new))
    if problems:
        raise InvalidRequest(_summary(problems), problems=problems)
    if not changes:
        raise InvalidRequest(
            "nothing was changed; approve the call as it is instead",
            problems=[{"field": state.fields[0], "message": "change a value, or close and approve as it is"}],
        )
    call = current_call(rec, seal)
    for change in changes:
        call[change.name] = change.new
    try:
        json_limits(call)
    except InvalidRequest as exc:
        raise InvalidRequest(
            exc.message, problems=[{"field": changes[0].name, "message": exc.message}]
        ) from None
    shown = dict(current)
    shown.update({c.name: c.new for c in changes})
    if state.json_schema is not None:
        found = await schema_rules.problems(state.json_schema, call, shown, [c.name for c in changes])
        if found:
            raise InvalidRequest(_summary(found), problems=found)
    differ = tuple(n for n in state.fields if not _same(shown.get(n), rec.parameters.get(n)))
    result = EditResult(parameters=shown, fields=differ, digest=parameters_digest(call))
    return Edited(call, result, tuple(changes))


def _summary(problems: list[dict[str, str]]) -> str:
    return "; ".join(f"{p['field']}: {p['message']}" for p in problems)[:1500]


def _article(word: str) -> str:
    return ("an " if word[:1] in "aeiou" else "a ") + word


def _same(a: Any, b: Any) -> bool:
    return bool(a == b) and type(a) is type(b)


def state_after(state: EditState, result: EditResult) -> EditState:
    """The stored edit once approved: the edited call kept, the sealed original dropped."""
    return state.model_copy(update={"result": result, "sealed": None})


def state_pending(state: EditState, result: EditResult) -> EditState:
    """The stored edit of a call a quorum must still approve: the edited call is the current
    one; the sealed original is kept, for the next edit's digest."""
    return state.model_copy(update={"result": result})

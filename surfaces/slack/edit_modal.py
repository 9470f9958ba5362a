"""The *Edit* modal: typed inputs for the editable parameters, then a confirm step (old → new).

Both views are bound by their metadata to the card they were opened from and to the person
who opened them; Cosigner checks every submission again as an answer (tenant, conversation,
message, approver, still pending) and takes the editable fields, their types and the current
values from the stored approval, never from the view. The confirm step carries the changed
values only so that the person's own submission approves what the confirm step showed; the
engine checks them once more before they count.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from slack_sdk.models.blocks import (
    Block,
    ContextBlock,
    InputBlock,
    NumberInputElement,
    Option,
    PlainTextInputElement,
    PlainTextObject,
    SectionBlock,
    StaticSelectElement,
)
from slack_sdk.models.views import View

from contracts.edits import Change, EditField, EditForm, EditPreview, InputKind, initial_text
from surfaces.slack import mrkdwn
from surfaces.slack.blocks import ACTION_PREFIX, COMMENT_ACTION, COMMENT_BLOCK, COMMENT_MAX, EDIT_ACTION, md

__all__ = ["CONFIRM_CALLBACK", "EDIT_ACTION", "EDIT_CALLBACK", "confirm_modal", "edit_modal"]
EDIT_CALLBACK = f"{ACTION_PREFIX}edit"
CONFIRM_CALLBACK = f"{ACTION_PREFIX}edit_confirm"
FIELD_PREFIX = "edit:"
VALUE_ACTION = "value"
TEXT_MAX = 3000  # a plain_text_input's longest value
OPTION_TEXT = 75
METADATA_MAX = 3000  # Slack's private_metadata limit


def metadata(approval_id: str, channel_id: str, message_ts: str, user: str, **more: Any) -> str:
    """What binds a view to its card and to the person who opened it."""
    return json.dumps(
        {"a": approval_id, "c": channel_id, "t": message_ts, "u": user, **more},
        separators=(",", ":"),
        ensure_ascii=False,
    )


def shown_fields(form: EditForm) -> list[EditField]:
    """The fields Slack can hold: a name fits a block id, a value fits an input."""
    return [f for f in form.fields if len(FIELD_PREFIX + f.name) <= 255 and len(initial_text(f)) <= TEXT_MAX]


def edit_modal(form: EditForm, channel_id: str, message_ts: str, user: str) -> View:
    """The first step: one typed input per editable parameter, filled with its current value."""
    card = form.card
    fields = shown_fields(form)
    lead = (
        f"Edit *{mrkdwn.fit(card.tool_name, 150)}* ({mrkdwn.fit(card.short_code, 20)}) before you approve "
        "it. Only these parameters can change; everything else runs as the agent sent it, and "
        "the tool cannot change. You confirm the changes on the next step."
    )
    blocks: list[Block] = [SectionBlock(text=md(lead))]
    blocks += [_input(f) for f in fields[:40]]
    return View(
        type="modal",
        callback_id=EDIT_CALLBACK,
        title=PlainTextObject(text="Edit before approving"),
        submit=PlainTextObject(text="Review"),
        close=PlainTextObject(text="Cancel"),
        private_metadata=metadata(card.approval_id, channel_id, message_ts, user, d=card.digest),
        blocks=blocks,
    )


def _input(f: EditField) -> InputBlock:
    label = PlainTextObject(text=plain(f.name, 150) or "value")
    hint = PlainTextObject(text=plain(f.description, 150)) if f.description else None
    element: Any
    if f.kind in (InputKind.INTEGER, InputKind.NUMBER):
        text = initial_text(f)
        element = NumberInputElement(
            action_id=VALUE_ACTION,
            is_decimal_allowed=f.kind is InputKind.NUMBER,
            initial_value=text or None,
        )
    elif f.kind is InputKind.BOOLEAN:
        options = [Option(value="true", text="true"), Option(value="false", text="false")]
        initial = options[0] if f.value is True else options[1] if f.value is False else None
        element = StaticSelectElement(action_id=VALUE_ACTION, options=options, initial_option=initial)
    elif f.kind is InputKind.CHOICE:
        options = [Option(value=str(i), text=plain(c, OPTION_TEXT)) for i, c in enumerate(f.choices)]
        current = json.dumps(f.value, ensure_ascii=False)
        initial = next((o for o, c in zip(options, f.choices, strict=True) if c == current), None)
        element = StaticSelectElement(action_id=VALUE_ACTION, options=options, initial_option=initial)
    else:
        text = initial_text(f)
        element = PlainTextInputElement(
            action_id=VALUE_ACTION,
            initial_value=text or None,
            multiline=f.kind is InputKind.JSON or len(text) > 80 or "\n" in text,
            max_length=TEXT_MAX,
        )
        if f.kind is InputKind.JSON:
            words = "JSON" if f.value is None else f"JSON; it must stay {_kind_of(f.value)}"
            hint = PlainTextObject(text=plain(f"{words}. {f.description or ''}".strip(), 150))
    return InputBlock(
        block_id=f"{FIELD_PREFIX}{f.name}",
        label=label,
        element=element,
        hint=hint,
        optional=f.kind is InputKind.TEXT,
    )


def _kind_of(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "true or false"}.get(
        type(value), "a number"
    )


def confirm_modal(preview: EditPreview, channel_id: str, message_ts: str, user: str) -> View | None:
    """The second step: old → new for each changed parameter; submitting approves the edited
    call. None when the changes do not fit Slack's metadata (the person is told to edit less)."""
    card = preview.card
    meta = metadata(card.approval_id, channel_id, message_ts, user, v=preview.values(), d=card.digest)
    if len(meta) > METADATA_MAX:
        return None
    lead = (
        f"Approve *{mrkdwn.fit(card.tool_name, 150)}* ({mrkdwn.fit(card.short_code, 20)}) with "
        f"{'this change' if len(preview.changes) == 1 else 'these changes'}? Everything else runs as "
        "the agent sent it. The decision binds to exactly this edited call."
    )
    blocks: list[Block] = [SectionBlock(text=md(lead))]
    blocks += [_change(c) for c in preview.changes[:40]]
    blocks.append(
        ContextBlock(elements=[md("Cancel to leave the request as it is: nothing is decided yet.")])
    )
    blocks.append(
        InputBlock(
            block_id=COMMENT_BLOCK,
            label=PlainTextObject(text="Comment (optional)"),
            element=PlainTextInputElement(action_id=COMMENT_ACTION, multiline=True, max_length=COMMENT_MAX),
            optional=True,
        )
    )
    return View(
        type="modal",
        callback_id=CONFIRM_CALLBACK,
        title=PlainTextObject(text="Confirm the edit"),
        submit=PlainTextObject(text="Approve edited"),
        close=PlainTextObject(text="Cancel"),
        private_metadata=meta,
        blocks=blocks,
    )


def _change(c: Change) -> SectionBlock:
    old, new = json.dumps(c.old, ensure_ascii=False), json.dumps(c.new, ensure_ascii=False)
    name = mrkdwn.fit(c.name, 150)
    if all(len(v) <= 200 and "`" not in v and "\n" not in v for v in (old, new)):
        return SectionBlock(text=md(f"*{name}*: `{mrkdwn.escape(old)}` → `{mrkdwn.escape(new)}`"))
    return SectionBlock(
        text=md(f"*{name}*: old → new\n{mrkdwn.fenced(old, 1300)}\n→\n{mrkdwn.fenced(new, 1300)}")
    )


def plain(text: str, limit: int) -> str:
    """Plain text (never parsed as mrkdwn) cut to `limit` characters with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def errors_for(form_fields: list[str], problems: Sequence[Mapping[str, str]]) -> dict[str, str]:
    """Slack's `errors` answer: each problem under its field's input (else the first one)."""
    out: dict[str, str] = {}
    first = f"{FIELD_PREFIX}{form_fields[0]}" if form_fields else COMMENT_BLOCK
    for p in problems:
        name = str(p.get("field", ""))
        block = f"{FIELD_PREFIX}{name}" if name in form_fields else first
        said = p.get("message", "cannot be taken")
        text = said if block != first or name in form_fields else f"{name}: {said}"
        out[block] = (out[block] + "; " + text if block in out else text)[:150]
    return out

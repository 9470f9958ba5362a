"""Bolt listeners for card buttons and the deny modal: parse, hand to the desk, answer the clicker.

The app runs with `process_before_response=True`, so `desk.answer` has committed (or
refused and audited) the decision before Slack gets its 200. Courtesy calls that need not
be durable (the refusal notice, opening the modal) run as tasks after the ack, so the ack
is not held up by a round trip to Slack.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from contracts.edits import EditDesk, EditField, parse_input
from contracts.enums import ApprovalStatus, ErrorCode, SurfaceType, Verdict
from contracts.errors import CosignerError, InvalidRequest
from contracts.ports import Answer, ApprovalDesk
from surfaces.slack import mrkdwn
from surfaces.slack.allow_for import ALLOW_FOR_ACTIONS
from surfaces.slack.allow_for_clicks import allowed_text, parse_allow_for
from surfaces.slack.blocks import (
    ACTION_PREFIX,
    COMMENT_ACTION,
    COMMENT_BLOCK,
    COMMENT_MAX,
    DENY_CALLBACK,
    FULL_CALL_ACTION,
    approved_text,
)
from surfaces.slack.deny_modal import deny_modal
from surfaces.slack.edit_modal import (
    CONFIRM_CALLBACK,
    EDIT_ACTION,
    EDIT_CALLBACK,
    FIELD_PREFIX,
    VALUE_ACTION,
    confirm_modal,
    edit_modal,
    errors_for,
    shown_fields,
)
from surfaces.slack.full_call import NEXT_ACTION, PREVIOUS_ACTION, full_call_modal
from surfaces.slack.parse import (
    input_text,
    parse_block_action,
    parse_look,
    parse_modal,
    parse_page,
    parse_view_submission,
    seen_in,
)
from surfaces.slack.web_client import translated

logger = logging.getLogger("cosigner.slack.clicks")

# Answered at once, before the ack (Always deny was confirmed in Slack's own dialog); a
# handoff's Done and Cancel are answered the same way.
APPROVE_ACTIONS = re.compile(
    rf"^{re.escape(ACTION_PREFIX)}(approve|approve_for_run|always_deny|done|cancel)$"
)
DENY_ACTION = f"{ACTION_PREFIX}deny"
# Distinct Grid orgs warned about per process; Slack signs every one, so this is a bound, not a defence.
MAX_GRID_NOTICES = 256
Ack = Callable[..., Awaitable[Any]]


def refusal_text(error: CosignerError) -> str:
    """What a clicker whose answer was refused reads: the reason code and the engine's message
    (for an answer to a call edited since the card was shown: who edited it, and that the
    card now shows the edited call)."""
    if error.code == ErrorCode.PARAMETERS_MISMATCH and error.details.get("digest"):
        who = mrkdwn.mention(str(error.details.get("editedBy") or "")) or "another approver"
        return (
            f":arrows_counterclockwise: Your answer was not recorded: the call was edited by {who} "
            "since you opened it. The card now shows the edited call (old → new): read it, then "
            "answer that call."
        )
    reason = mrkdwn.fit(error.message, 500)
    return f":no_entry: Your answer was not recorded ({error.code}): {reason}"


def look_refused_text(error: CosignerError) -> str:
    """What a person who may not read the whole call reads instead: the code and why."""
    reason = mrkdwn.fit(error.message, 500)
    return f":no_entry: The full call is shown only to its approvers ({error.code}): {reason}"


def always_denied_text(tool_name: str) -> str:
    """What the person who answered Always deny reads: what is refused now, and how to undo it."""
    tool = mrkdwn.fit(tool_name, 128)
    return (
        f":no_entry_sign: Always deny set: later *{tool}* requests that only you approve are refused "
        "without a card. `/cosigner` lists your standing denies and lifts them."
    )


class Clicks:
    """Registers the card listeners on a Bolt app and runs their follow-up tasks."""

    def __init__(self, desk: ApprovalDesk) -> None:
        self._desk = desk
        self._tasks: set[asyncio.Task[None]] = set()
        self._grid_noticed: set[str] = set()

    def register(self, app: AsyncApp) -> None:
        """Attach the approve, deny and deny-comment listeners."""

        async def on_answer(ack: Ack, body: dict[str, Any], client: AsyncWebClient) -> None:
            await self._answer_click(body, client)
            await ack()

        async def on_allow_for(ack: Ack, body: dict[str, Any], client: AsyncWebClient) -> None:
            await self._answer_click(body, client, parse=parse_allow_for)
            await ack()

        async def on_deny(ack: Ack, body: dict[str, Any], client: AsyncWebClient) -> None:
            await ack()
            self._later(self._open_deny_modal(body, client))

        async def on_deny_comment(ack: Ack, body: dict[str, Any]) -> None:
            await self._answer_comment(ack, body)

        async def on_full_call(ack: Ack, body: dict[str, Any], client: AsyncWebClient) -> None:
            await ack()
            self._later(self._open_full_call(body, client))

        async def on_page(ack: Ack, body: dict[str, Any], client: AsyncWebClient) -> None:
            await ack()
            self._later(self._turn_page(body, client))

        async def on_edit(ack: Ack, body: dict[str, Any], client: AsyncWebClient) -> None:
            await ack()
            self._later(self._open_edit(body, client))

        async def on_edit_review(ack: Ack, body: dict[str, Any]) -> None:
            await self._review_edit(ack, body)

        async def on_edit_confirm(ack: Ack, body: dict[str, Any]) -> None:
            await self._confirm_edit(ack, body)

        async def ignore(ack: Ack) -> None:
            await ack()

        app.action(APPROVE_ACTIONS)(on_answer)
        app.action(ALLOW_FOR_ACTIONS)(on_allow_for)
        app.action(DENY_ACTION)(on_deny)
        app.view_submission(DENY_CALLBACK)(on_deny_comment)
        app.action(FULL_CALL_ACTION)(on_full_call)
        app.action(NEXT_ACTION)(on_page)
        app.action(PREVIOUS_ACTION)(on_page)
        app.action(EDIT_ACTION)(on_edit)
        app.view_submission(EDIT_CALLBACK)(on_edit_review)
        app.view_submission(CONFIRM_CALLBACK)(on_edit_confirm)
        # Acknowledge anything else quietly: Bolt's "unhandled request" warning prints the body.
        app.action(re.compile(".*"))(ignore)
        app.view_submission(re.compile(".*"))(ignore)
        app.view_closed(re.compile(".*"))(ignore)

    async def drain(self) -> None:
        """Wait for follow-up tasks still running (on shutdown)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _answer_click(
        self,
        body: dict[str, Any],
        client: AsyncWebClient,
        parse: Callable[[dict[str, Any]], Answer] = parse_block_action,
    ) -> None:
        try:
            answer = parse(body)
            self._notice_grid(answer)
            card = await self._desk.answer(answer)
            if answer.verdict is Verdict.ALWAYS_DENY:
                self._later(self._tell(client, body, always_denied_text(card.tool_name)))
            elif answer.verdict is Verdict.ALLOW_FOR and card.status is ApprovalStatus.APPROVED:
                self._later(self._tell(client, body, allowed_text(card, answer.allow_for or 0.0)))
            elif card.status is ApprovalStatus.PENDING and card.approved_by(answer.actor):
                # The card is the same for the whole channel and keeps its buttons for the
                # others: the approver alone is told their Approve counted.
                self._later(self._tell(client, body, approved_text(card)))
        except CosignerError as error:
            self._later(self._tell(client, body, refusal_text(error)))
        except Exception:
            # The clicker must learn the answer did not count; the details go to the log only.
            logger.exception("Recording a Slack click failed")
            self._later(
                self._tell(client, body, ":warning: Cosigner could not record your answer. Try again.")
            )

    async def _open_deny_modal(self, body: dict[str, Any], client: AsyncWebClient) -> None:
        try:
            answer = parse_block_action(body)
        except CosignerError as error:
            await self._tell(client, body, refusal_text(error))
            return
        tool = _tool_name(body)
        view = deny_modal(
            answer.approval_id, tool, answer.conversation, answer.message_ref or "", answer.seen
        )
        try:
            async with translated("views.open", answer.conversation):
                await client.views_open(trigger_id=body.get("trigger_id"), view=view)
        except CosignerError as error:
            logger.warning("Opening the deny modal failed: %s", error.message)
            await self._tell(client, body, ":warning: Could not open the deny dialog. Click Deny again.")

    async def _open_full_call(self, body: dict[str, Any], client: AsyncWebClient) -> None:
        """Open the whole call for one of its approvers, checked as an answer would be."""
        try:
            look = parse_look(body)
            card = await self._desk.full_call(look)
        except CosignerError as error:
            await self._tell(client, body, look_refused_text(error))
            return
        view = full_call_modal(card, 0, look.conversation, look.message_ref or "")
        try:
            async with translated("views.open", look.conversation):
                await client.views_open(trigger_id=body.get("trigger_id"), view=view)
        except CosignerError as error:
            logger.warning("Opening the full call failed: %s", error.message)
            await self._tell(client, body, ":warning: Could not open the full call. Press the button again.")

    async def _turn_page(self, body: dict[str, Any], client: AsyncWebClient) -> None:
        """Show another page of the full call in the same modal, checked again."""
        try:
            look, page, view_id = parse_page(body)
            card = await self._desk.full_call(look)
            view = full_call_modal(card, page, look.conversation, look.message_ref or "")
            async with translated("views.update", look.conversation):
                await client.views_update(view_id=view_id, view=view)
        except CosignerError as error:
            # A modal has no place for an ephemeral notice; the page simply stays.
            logger.warning("Turning a full-call page refused (%s): %s", error.code, error.message)

    async def _open_edit(self, body: dict[str, Any], client: AsyncWebClient) -> None:
        """Open the edit form for one of the call's approvers, checked as an answer would be."""
        if not isinstance(self._desk, EditDesk):
            return
        try:
            look = parse_look(body, EDIT_ACTION)
            form = await self._desk.edit_form(look)
        except CosignerError as error:
            await self._tell(client, body, refusal_text(error))
            return
        view = edit_modal(form, look.conversation, look.message_ref or "", look.actor)
        try:
            async with translated("views.open", look.conversation):
                await client.views_open(trigger_id=body.get("trigger_id"), view=view)
        except CosignerError as error:
            logger.warning("Opening the edit form failed: %s", error.message)
            await self._tell(client, body, ":warning: Could not open the edit form. Press Edit again.")

    async def _review_edit(self, ack: Ack, body: dict[str, Any]) -> None:
        """Check the edited values and show old → new for confirmation; errors stay in the form."""
        names: list[str] = []
        try:
            if not isinstance(self._desk, EditDesk):
                raise InvalidRequest("this server cannot take edits")
            look, meta, state = parse_modal(body, EDIT_CALLBACK)
            form = await self._desk.edit_form(look)
            fields = shown_fields(form)
            names = [f.name for f in fields]
            opened = seen_in(meta)
            if opened is not None and opened != form.card.digest:
                who = f" by {form.card.edited_by}" if form.card.edited_by else ""
                raise InvalidRequest(
                    f"the call was edited{who} since you opened this form; close it and press Edit "
                    "on the card again, which shows the edited call"
                )
            values, problems = _read_inputs(fields, state)
            if problems:
                await ack(response_action="errors", errors=errors_for(names, problems))
                return
            preview = await self._desk.check_edit(look, values)
        except CosignerError as error:
            problems = error.details.get("problems") or [
                {"field": "", "message": f"{error.code}: {error.message}"}
            ]
            await ack(response_action="errors", errors=errors_for(names, problems))
            return
        view = confirm_modal(preview, look.conversation, look.message_ref or "", look.actor)
        if view is None:
            message = "the changes are too long to confirm in Slack; change fewer or shorter values"
            await ack(response_action="errors", errors=errors_for(names, [{"field": "", "message": message}]))
            return
        await ack(response_action="update", view=view)

    async def _confirm_edit(self, ack: Ack, body: dict[str, Any]) -> None:
        """Approve the edited call the confirm step showed; the desk checks it all again."""
        try:
            look, meta, state = parse_modal(body, CONFIRM_CALLBACK)
            values = meta.get("v")
            if not isinstance(values, dict) or not values:
                raise InvalidRequest("the confirm step carries no edit; press Edit on the card again")
            comment = input_text((state.get(COMMENT_BLOCK) or {}).get(COMMENT_ACTION))
            answer = Answer(
                approval_id=look.approval_id,
                surface=look.surface,
                verdict=Verdict.APPROVE,
                actor=look.actor,
                org=look.org,
                actor_org=look.actor_org,
                conversation=look.conversation,
                message_ref=look.message_ref,
                app_id=look.app_id,
                enterprise_id=look.enterprise_id,
                comment=(comment or "").strip()[:COMMENT_MAX] or None,
                edit=values,
                seen=seen_in(meta),
            )
            self._notice_grid(answer)
            await self._desk.answer(answer)
        except CosignerError as error:
            message = f"Not recorded ({error.code}): {error.message}"[:300]
            await ack(response_action="errors", errors={COMMENT_BLOCK: message})
            return
        except Exception:
            logger.exception("Recording a Slack edit failed")
            await ack(
                response_action="errors", errors={COMMENT_BLOCK: "Cosigner could not record this. Try again."}
            )
            return
        await ack(response_action="clear")

    async def _answer_comment(self, ack: Ack, body: dict[str, Any]) -> None:
        try:
            answer = parse_view_submission(body)
            self._notice_grid(answer)
            await self._desk.answer(answer)
        except CosignerError as error:
            message = f"Not recorded ({error.code}): {error.message}"[:300]
            await ack(response_action="errors", errors={COMMENT_BLOCK: message})
            return
        except Exception:
            logger.exception("Recording a Slack deny comment failed")
            await ack(
                response_action="errors",
                errors={COMMENT_BLOCK: "Cosigner could not record this. Try again."},
            )
            return
        await ack()

    def _notice_grid(self, answer: Answer) -> None:
        # On Enterprise Grid, Slack sends the clicker's org (E…) as `user.team_id`; a Grid
        # tenant whose policy lacks `slack_enterprise` would see its own people refused.
        org = answer.actor_org
        if not org or not org.startswith("E") or org in self._grid_noticed:
            return
        if len(self._grid_noticed) >= MAX_GRID_NOTICES or self._desk.tenant_for_org(SurfaceType.SLACK, org):
            return
        self._grid_noticed.add(org)
        tenant = self._desk.tenant_for_org(SurfaceType.SLACK, answer.org) if answer.org else None
        logger.warning(
            "A Slack click came from Enterprise Grid org %s (user.team_id), which no tenant names: "
            'if it is a tenant\'s own org, set slack_enterprise = "%s" in [tenants.%s]; until then '
            "clicks of its people on that tenant's cards are refused",
            org,
            org,
            tenant or "<tenant>",
            extra={"tenant": tenant, "surface": "slack"},
        )

    async def _tell(self, client: AsyncWebClient, body: dict[str, Any], text: str) -> None:
        # Also told of a payload refused as malformed: read only what has Slack's types.
        container = _object(body.get("container"))
        channel = container.get("channel_id") or _object(body.get("channel")).get("id")
        user = _object(body.get("user")).get("id")
        if not isinstance(channel, str) or not channel or not isinstance(user, str) or not user:
            return
        thread_ts = container.get("thread_ts")
        extra: dict[str, Any] = {"thread_ts": thread_ts} if isinstance(thread_ts, str) and thread_ts else {}
        try:
            async with translated("chat.postEphemeral", channel):
                await client.chat_postEphemeral(channel=channel, user=user, text=text, **extra)
        except CosignerError as error:
            logger.warning("Telling a clicker why failed: %s", error.message)

    def _later(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # For the batch card's listener (`batch_clicks`): the same notices, the same task set.
    tell = _tell
    later = _later


def _read_inputs(
    fields: list[EditField], state: Mapping[str, Any]
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """The values entered, by parameter name, read as each field's type; a block that is not
    one of the form's fields is passed on by its name, for the desk to refuse."""
    by_name = {f"{FIELD_PREFIX}{f.name}": f for f in fields}
    values: dict[str, Any] = {}
    problems: list[dict[str, str]] = []
    for block_id, inputs in state.items():
        if not isinstance(block_id, str) or not block_id.startswith(FIELD_PREFIX):
            problems.append({"field": str(block_id)[:80], "message": "is not a field of this form"})
            continue
        raw = input_text((inputs or {}).get(VALUE_ACTION) if isinstance(inputs, dict) else None)
        f = by_name.get(block_id)
        if f is None:
            values[block_id[len(FIELD_PREFIX) :]] = raw  # not editable: the desk names why
            continue
        try:
            values[f.name] = parse_input(f, raw)
        except ValueError as exc:
            problems.append({"field": f.name, "message": str(exc)})
    return values, problems


def _tool_name(body: dict[str, Any]) -> str:
    blocks = _object(body.get("message")).get("blocks")
    for block in blocks if isinstance(blocks, list) else []:
        if isinstance(block, dict) and block.get("type") == "header":
            return str(_object(block.get("text")).get("text", "this call"))
    return "this call"


def _object(value: Any) -> Mapping[str, Any]:
    """`value` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}

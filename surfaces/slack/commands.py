"""The `/cosigner` slash command: a person sees the standing denies they set and lifts them.

`/cosigner` (any text, or `denials`) answers with an ephemeral list, visible only to the
person who typed it, of their own standing denies in the workspace's tenant, each with a
**Lift** button; `/cosigner pending` lists the requests waiting for them (as the Home tab
does, `surfaces.slack.home`), `/cosigner help` what the command does. A Lift click lifts
through the `DenialDesk` (which finds only the clicker's own) and replaces the list. Nobody
can see or lift another person's standing deny here.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_sdk.models.blocks import Block, ButtonElement, ContextBlock, PlainTextObject, SectionBlock
from slack_sdk.web.async_client import AsyncWebClient

from contracts.denials import Denial, DenialDesk
from contracts.enums import SurfaceType
from contracts.errors import CosignerError, InvalidRequest
from contracts.ports import ApprovalDesk
from surfaces.slack import mrkdwn
from surfaces.slack.blocks import ACTION_PREFIX, as_dicts, md
from surfaces.slack.home import Pending

logger = logging.getLogger("cosigner.slack.commands")

COMMAND = "/cosigner"
LIFT_ACTION = f"{ACTION_PREFIX}lift_denial"
MAX_LISTED = 40  # a message holds 50 blocks
_SLACK_ID = re.compile(r"^[A-Z0-9]{2,64}$")
_DENIAL_ID = re.compile(r"^den_[A-Za-z0-9_-]{20}$")
Ack = Callable[..., Awaitable[Any]]
HELP = (
    "*/cosigner pending*: the requests waiting for you, with a link to each card.\n"
    "*/cosigner denials* (or just */cosigner*): your standing denies (Always deny), to lift.\n"
    "*/cosigner help*: this text. The Home tab of the Cosigner app lists what waits for you too."
)


def denial_blocks(denials: Sequence[Denial], note: str | None = None) -> tuple[list[Block], str]:
    """The ephemeral list of a person's standing denies, each with a Lift button."""
    blocks: list[Block] = []
    if note:
        blocks.append(SectionBlock(text=md(note)))
    if not denials:
        text = "You have no standing denies: every request you approve asks you."
        return [*blocks, SectionBlock(text=md(text))], text
    head = f"*Your standing denies* ({len(denials)}): these requests are refused without asking you."
    blocks.append(SectionBlock(text=md(head)))
    for d in denials[:MAX_LISTED]:
        runs = d.requester
        kind, _, who = runs.partition(":")
        shown = (mrkdwn.mention(who) if kind == "slack" else None) or mrkdwn.fit(runs, 200)
        line = (
            f"*{mrkdwn.fit(d.toolName, 128)}* for runs of {shown}, "
            f"set {mrkdwn.date_token(d.setAt)} · `{d.denialId}`"
        )
        button = ButtonElement(text=PlainTextObject(text="Lift"), action_id=LIFT_ACTION, value=d.denialId)
        blocks.append(SectionBlock(text=md(line), accessory=button))
    if len(denials) > MAX_LISTED:
        blocks.append(ContextBlock(elements=[md(f"and {len(denials) - MAX_LISTED} more; lift some first")]))
    return blocks, f"You have {len(denials)} standing denies."


def who_typed(body: Mapping[str, Any]) -> tuple[str, list[str]]:
    """The user who ran the command and the orgs (workspace, then org) it came from."""
    user = _id(body.get("user_id"), "user_id")
    orgs = [o for o in (body.get("team_id"), body.get("enterprise_id")) if isinstance(o, str) and o]
    return user, [_id(o, "team_id") for o in orgs]


def lift_click(body: Mapping[str, Any]) -> tuple[str, list[str], str]:
    """The clicker, their orgs and the standing deny id of a Lift click."""
    actions = body.get("actions")
    if not isinstance(actions, list) or len(actions) != 1 or not isinstance(actions[0], dict):
        raise InvalidRequest("expected exactly one action", field="actions")
    denial_id = actions[0].get("value")
    if not isinstance(denial_id, str) or not _DENIAL_ID.match(denial_id):
        raise InvalidRequest("`actions.value` is not a standing deny id", field="actions.value")
    user, team, enterprise = (_obj(body, key) for key in ("user", "team", "enterprise"))
    orgs = [o for o in (team.get("id"), enterprise.get("id")) if isinstance(o, str) and o]
    return _id(user.get("id"), "user.id"), [_id(o, "team.id") for o in orgs], denial_id


class Commands:
    """Registers `/cosigner` and its Lift buttons on a Bolt app."""

    def __init__(self, desk: ApprovalDesk) -> None:
        self._desk = desk
        # A desk without standing denies (a test double) gets a polite answer, not a crash.
        self._denials = desk if isinstance(desk, DenialDesk) else None
        self._home = Pending(desk)

    def register(self, app: AsyncApp) -> None:
        """Attach the command and the Lift button listeners."""

        async def on_command(ack: Ack, body: dict[str, Any], client: AsyncWebClient) -> None:
            word = str(body.get("text") or "").strip().lower()
            if word == "help":
                blocks, text = _said(HELP)
            elif word == "pending":
                blocks, text = await self._waiting(body, client)
            else:
                blocks, text = await self._list(body)
            await ack(response_type="ephemeral", text=text, blocks=as_dicts(blocks))

        async def on_lift(ack: Ack, body: dict[str, Any], respond: Callable[..., Awaitable[Any]]) -> None:
            await ack()
            blocks, text = await self._lift(body)
            try:
                await respond(
                    replace_original=True, response_type="ephemeral", text=text, blocks=as_dicts(blocks)
                )
            except Exception:
                logger.warning("Showing the lifted standing deny failed", exc_info=True)

        app.command(COMMAND)(on_command)
        app.action(LIFT_ACTION)(on_lift)

    async def _waiting(self, body: Mapping[str, Any], client: AsyncWebClient) -> tuple[list[Block], str]:
        try:
            user, orgs = who_typed(body)
        except CosignerError as error:
            return _said(f"Cosigner could not read this command: {error.message}")
        blocks = await self._home.listed(client, user, orgs, title=False)
        return blocks, "The requests waiting for you."

    def _tenant(self, orgs: Sequence[str]) -> str | None:
        for org in orgs:
            tenant = self._desk.tenant_for_org(SurfaceType.SLACK, org)
            if tenant is not None:
                return tenant
        return None

    async def _list(self, body: Mapping[str, Any], note: str | None = None) -> tuple[list[Block], str]:
        try:
            user, orgs = who_typed(body)
        except CosignerError as error:
            return _said(f"Cosigner could not read this command: {error.message}")
        return await self._of(user, orgs, note)

    async def _of(self, user: str, orgs: Sequence[str], note: str | None) -> tuple[list[Block], str]:
        tenant = self._tenant(orgs)
        if self._denials is None or tenant is None:
            return _said(
                "This workspace is not connected to a Cosigner tenant, so you have no standing denies here."
            )
        return denial_blocks(await self._denials.denials_of(tenant, SurfaceType.SLACK, user), note)

    async def _lift(self, body: Mapping[str, Any]) -> tuple[list[Block], str]:
        try:
            user, orgs, denial_id = lift_click(body)
            tenant = self._tenant(orgs)
            if self._denials is None or tenant is None:
                return _said("This workspace is not connected to a Cosigner tenant.")
            lifted = await self._denials.lift_own(tenant, SurfaceType.SLACK, user, denial_id)
        except CosignerError as error:
            return _said(f":no_entry: Not lifted ({error.code}): {mrkdwn.fit(error.message, 500)}")
        note = (
            f":white_check_mark: Lifted `{lifted.denialId}`: requests for "
            f"*{mrkdwn.fit(lifted.toolName, 128)}* will ask you again."
        )
        return await self._of(user, orgs, note)


def _said(text: str) -> tuple[list[Block], str]:
    return [SectionBlock(text=md(text))], text


def _obj(body: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = body.get(key)
    return value if isinstance(value, dict) else {}


def _id(value: Any, field: str) -> str:
    if not isinstance(value, str) or not _SLACK_ID.match(value):
        raise InvalidRequest(f"`{field}` is missing or malformed", field=field)
    return value

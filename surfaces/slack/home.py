"""Slack's Home tab: the requests waiting for the person who opened it, across channels.

`app_home_opened` publishes (`views.publish`) a list of that person's pending requests in
the workspace's tenant: tool, tenant, time left and a link to each card
(`chat.getPermalink`), then the standing allows they granted, each with Revoke
(`surfaces.slack.home_allowances`). `/cosigner pending` answers with the same list, ephemeral. Answers
are given on the cards themselves: an answer counts only where the request was asked.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.models.blocks import Block, ContextBlock, HeaderBlock, PlainTextObject, SectionBlock
from slack_sdk.web.async_client import AsyncWebClient

from contracts.allowances import AllowanceDesk
from contracts.enums import SurfaceType
from contracts.errors import CosignerError
from contracts.pending import PendingDesk
from contracts.ports import ApprovalDesk, Placed, SlackRoute
from surfaces.slack import mrkdwn
from surfaces.slack.blocks import as_dicts, md
from surfaces.slack.home_allowances import REVOKE_ACTION, allowance_blocks, revoke_click

logger = logging.getLogger("cosigner.slack.home")
HOME_EVENT = "event_callback/app_home_opened"  # as `parse.event_type` names it
MAX_LISTED = 40  # a Home tab holds 100 blocks; two per request and a header
MAX_REFRESHED = 20  # approvers whose Home tab a new or closed card republishes
Links = Mapping[str, str]


def time_left(expires_at: datetime, now: datetime) -> str:
    """Minutes (or hours) until a request expires."""
    seconds = (expires_at - now).total_seconds()
    if seconds <= 0:
        return "expiring"
    minutes = int(seconds // 60)
    return f"{minutes // 60}h {minutes % 60}m left" if minutes >= 60 else f"{max(minutes, 1)}m left"


def pending_blocks(placed: Sequence[Placed], links: Links, now: datetime, *, title: bool) -> list[Block]:
    """The list of a person's pending requests, each with a link to its card."""
    blocks: list[Block] = []
    if title:
        blocks.append(HeaderBlock(text=PlainTextObject(text="Waiting for you")))
    if not placed:
        blocks.append(
            SectionBlock(text=md("Nothing waits for you. New requests appear here and in their channel."))
        )
        return blocks
    for p in placed[:MAX_LISTED]:
        card = p.card
        link = links.get(card.approval_id)
        where = f"<{link}|Open the request>" if link else "in its channel"
        line = (
            f"*{mrkdwn.fit(card.tool_name, 128)}* · {mrkdwn.fit(card.tenant, 100)} · "
            f"{time_left(card.expires_at, now)} · {where}"
        )
        blocks.append(SectionBlock(text=md(line)))
    if len(placed) > MAX_LISTED:
        blocks.append(ContextBlock(elements=[md(f"and {len(placed) - MAX_LISTED} more")]))
    blocks.append(
        ContextBlock(elements=[md("Answer on the card: an answer counts only where it was asked.")])
    )
    return blocks


async def permalinks(
    client: AsyncWebClient, placed: Sequence[Placed], posted: Mapping[str, tuple[str, str]] | None = None
) -> dict[str, str]:
    """The permalink of each delivered card (`posted`: cards whose receipt is not stored yet);
    a card Slack cannot link is listed without one."""
    links: dict[str, str] = {}
    for p in placed[:MAX_LISTED]:
        got = p.delivered
        where = (got.conversation, got.message_refs[0]) if got and got.message_refs else None
        where = where or (posted or {}).get(p.card.approval_id)
        if where is None:
            continue
        try:
            answer = await client.chat_getPermalink(channel=where[0], message_ts=where[1])
        except SlackApiError as exc:
            logger.warning("chat.getPermalink failed", extra={"code": str(exc.response.get("error"))})
            continue
        if isinstance(answer.get("permalink"), str):
            links[p.card.approval_id] = str(answer["permalink"])
    return links


class Pending:
    """The Home tab listener and the list `/cosigner pending` shows."""

    def __init__(self, desk: ApprovalDesk, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._desk = desk
        self._pending = desk if isinstance(desk, PendingDesk) else None
        self._clock = clock
        self._tasks: set[asyncio.Task[None]] = set()

    def refresh_soon(
        self, client: AsyncWebClient, route: SlackRoute, posted: Mapping[str, tuple[str, str]] | None = None
    ) -> None:
        """`refresh` on its own task, so a delivery's receipt is stored without waiting for it."""
        task = asyncio.create_task(self.refresh(client, route, posted))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for the refreshes still running (at shutdown)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def listed(
        self,
        client: AsyncWebClient,
        user: str,
        orgs: Sequence[str],
        *,
        title: bool,
        posted: Mapping[str, tuple[str, str]] | None = None,
    ) -> list[Block]:
        """The blocks listing what waits for `user` in the tenant of `orgs`."""
        tenant = next(
            (t for o in orgs if (t := self._desk.tenant_for_org(SurfaceType.SLACK, o)) is not None), None
        )
        if tenant is None or self._pending is None:
            return [SectionBlock(text=md("This workspace is not connected to a Cosigner tenant."))]
        placed = await self._pending.pending_of(tenant, SurfaceType.SLACK, user)
        now = self._clock()
        blocks = pending_blocks(placed, await permalinks(client, placed, posted), now, title=title)
        if title and isinstance(self._desk, AllowanceDesk):  # the Home tab lists them too
            blocks += allowance_blocks(await self._desk.allowances_of(tenant, SurfaceType.SLACK, user), now)
        return blocks

    async def refresh(
        self, client: AsyncWebClient, route: SlackRoute, posted: Mapping[str, tuple[str, str]] | None = None
    ) -> None:
        """Republish the Home tab of a route's approvers, after a card was posted or closed.

        Best effort: the card is what counts, so a failure here is logged and never fails
        the delivery or the update."""
        orgs = [o for o in (route.team_id, route.enterprise_id) if o]
        for user in route.approvers[:MAX_REFRESHED]:
            try:
                blocks = await self.listed(client, user, orgs, title=True, posted=posted)
                await client.views_publish(user_id=user, view={"type": "home", "blocks": as_dicts(blocks)})
            except Exception as exc:
                logger.warning("Refreshing a Home tab failed", extra={"code": type(exc).__name__})

    def register(self, app: AsyncApp) -> None:
        """Publish the Home tab whenever a person opens it."""

        async def on_home(event: dict[str, Any], body: dict[str, Any], client: AsyncWebClient) -> None:
            if event.get("tab") != "home" or not isinstance(event.get("user"), str):
                return
            orgs = [o for o in (body.get("team_id"), body.get("enterprise_id")) if isinstance(o, str) and o]
            blocks = await self.listed(client, event["user"], orgs, title=True)
            await client.views_publish(
                user_id=event["user"], view={"type": "home", "blocks": as_dicts(blocks)}
            )

        async def on_revoke(ack: Any, body: dict[str, Any], client: AsyncWebClient) -> None:
            await ack()
            try:
                user, orgs, allowance_id = revoke_click(body)
                tenant = next(
                    (t for o in orgs if (t := self._desk.tenant_for_org(SurfaceType.SLACK, o)) is not None),
                    None,
                )
                if tenant is None or not isinstance(self._desk, AllowanceDesk):
                    return
                await self._desk.revoke_own(tenant, SurfaceType.SLACK, user, allowance_id)
                blocks = await self.listed(client, user, orgs, title=True)
                await client.views_publish(user_id=user, view={"type": "home", "blocks": as_dicts(blocks)})
            except CosignerError as error:
                logger.info("Revoke from the Home tab refused", extra={"code": str(error.code)})

        app.event("app_home_opened")(on_home)
        app.action(REVOKE_ACTION)(on_revoke)

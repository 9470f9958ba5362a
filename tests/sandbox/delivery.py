"""Click a sandbox card only once Cosigner has recorded it as delivered.

Slack (and the emulator) shows a card as soon as it is posted, a moment before Cosigner has
its message id on the record; a click in that moment is refused ("has not been delivered
yet", told to the clicker), as it is in Slack. A person clicks again; a test waits first.
"""

from __future__ import annotations

from typing import Any

import httpx

from surfaces.slack.blocks import VALUE_SEPARATOR
from tests.harness import until_async


def approval_on(card: dict[str, Any]) -> str:
    """The approval a card's buttons answer (their value is the approval, then the digest of
    the call the card shows)."""
    buttons = [e for b in card["blocks"] if b["type"] == "actions" for e in b["elements"]]
    return str(buttons[0]["value"]).split(VALUE_SEPARATOR)[0]


async def until_delivered(http: httpx.AsyncClient, card: dict[str, Any], seconds: float = 10) -> None:
    """Wait until the approval on `card` has its `delivered` audit event."""

    async def delivered() -> bool:
        answer = await http.get(f"/v1/approvals/{approval_on(card)}/audit")
        return any(e["event"] == "delivered" for e in answer.json()["events"])

    await until_async(delivered, seconds=seconds, interval=0.05)


async def shown_card(
    http: httpx.AsyncClient, title: str, *, edited: bool = False, seconds: float = 10
) -> dict[str, Any]:
    """The card titled `title` as the sandbox page shows it, once it is; with `edited`, once
    it has been updated. A card not yet updated is returned once it is on the record too,
    so it can be clicked."""

    async def shown() -> dict[str, Any] | None:
        for message in (await http.get("/sandbox/api/state")).json()["messages"]:
            if message["blocks"][0]["text"]["text"] == title and message["edited"] >= edited:
                return dict(message)
        return None

    card: dict[str, Any] = await until_async(shown, seconds=seconds, interval=0.05)
    if not edited:
        await until_delivered(http, card, seconds)
    return card

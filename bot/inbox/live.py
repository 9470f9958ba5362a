"""The live list: `/inbox/events` tells an open Waiting page when what waits has changed, so
its script reloads the list and the count in the title; nothing is read while nothing changes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from bot.inbox.core import InboxBase
from bot.inbox.people import Person


class Live(InboxBase):
    """The event stream of one signed-in page."""

    async def events(self, request: Request) -> Response:
        """The stream, for a live session only."""
        signed = await self.signed(request)
        if signed is None:
            return self.refused(request, None, "sign in first", 401)
        return StreamingResponse(
            self._changes(request, signed.person, signed.id_hash),
            media_type="text/event-stream",
            headers=self.headers(),
        )

    async def _changes(
        self, request: Request, person: Person, session_hash: str | None = None
    ) -> AsyncIterator[str]:
        # Woken by the engine's notifier when a request is created here or closes here or on
        # another replica; the heartbeat keeps proxies from closing an idle stream and
        # re-reads the list, which also catches a request created on another replica.
        # A busy server changes many times a second: one stream reads at most once per
        # `min_interval`, and what changed meanwhile is in that read. Each read first asks
        # whether the session still lasts: signed out (here, in another tab, by the
        # operator), the stream says so and ends.
        notifier, loop = self.notifier, asyncio.get_running_loop()
        change = notifier.changes()  # before each read, so a change during it is not missed
        seen, read_at = await self._waiting_ids(person), loop.time()
        yield "retry: 5000\n\n"
        while not await request.is_disconnected():
            done, _ = await asyncio.wait({change}, timeout=self.heartbeat)
            if not done:
                yield ": heartbeat\n\n"
            elif (wait := read_at + self.min_interval - loop.time()) > 0:
                await self.pause(wait)
            change = notifier.changes()
            if session_hash is not None and not await self.sessions.alive(session_hash):
                yield "event: signed-out\ndata: {}\n\n"
                return
            now, read_at = await self._waiting_ids(person), loop.time()
            if now != seen:
                yield f"event: changed\ndata: {json.dumps({'waiting': len(now)})}\n\n"
            seen = now

    async def _waiting_ids(self, person: Person) -> tuple[str, ...]:
        mine, elsewhere = await self.waiting(person)
        return tuple(r.id for r in [*mine, *elsewhere])

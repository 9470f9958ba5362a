"""The inbox's live list: its event stream is woken by the engine's notifier when a request
is created or decided, not by re-reading on a timer; a heartbeat keeps it alive."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.routing import Mount

from bot.inbox.people import Person
from bot.inbox.site import Inbox
from tests.inbox.test_answers import POLICY_BY_EMAIL
from tests.inbox.world import World, inbox_world

ADA = Person("issuer", "U0ADMIN", "Ada Admin", "ada@acme.example")
QUIET = 3600.0  # a heartbeat that never comes during a test: only the notifier can wake the stream


def inbox_of(w: World) -> Inbox:
    mount = next(r for r in w.h.app.routes if isinstance(r, Mount) and r.path == "/inbox")
    inbox = mount.app.state.inbox  # type: ignore[attr-defined]
    assert isinstance(inbox, Inbox)
    return inbox


def open_request() -> Request:
    """A request whose client stays connected."""
    stay = asyncio.Event()

    async def receive() -> dict[str, Any]:
        await stay.wait()
        return {"type": "http.disconnect"}

    return Request({"type": "http", "method": "GET", "path": "/inbox/events", "headers": []}, receive)


async def next_event(stream: AsyncIterator[str]) -> str:
    # A bound far above one read of the list, so a loaded machine passes; it is never reached
    # unless the stream fails to wake (the heartbeat is an hour away).
    return await asyncio.wait_for(anext(stream), 30)


async def test_a_new_request_and_a_decision_wake_the_stream_at_once() -> None:
    async with inbox_world(POLICY_BY_EMAIL) as w:
        inbox = inbox_of(w)
        inbox.heartbeat, inbox.min_interval = QUIET, 0
        key = await w.h.create_tenant("acme")
        reads = 0
        waiting = inbox.waiting

        async def counted(person: Person) -> Any:
            nonlocal reads
            reads += 1
            return await waiting(person)

        inbox.waiting = counted  # type: ignore[method-assign]
        stream = inbox._changes(open_request(), ADA)
        assert await next_event(stream) == "retry: 5000\n\n"
        pending = asyncio.ensure_future(next_event(stream))
        aid = await w.ask(key, "ada@acme.example")
        assert await pending == 'event: changed\ndata: {"waiting": 1}\n\n'
        # Another tenant's request wakes it too, and it reads again, but says nothing new.
        pending = asyncio.ensure_future(next_event(stream))
        other = await w.h.create_tenant("globex")
        await w.ask(other, "gus@globex.example", call="g1")
        before = reads
        # A decision changes what waits: the stream says so.
        r = await w.h.client.post(
            f"/v1/approvals/{aid}/decision",
            headers=w.h.auth(w.h.approver_keys["acme"]),
            json={"decision": "deny", "userId": "ada@acme.example"},
        )
        assert r.status_code == 200, r.text
        assert await pending == 'event: changed\ndata: {"waiting": 0}\n\n'
        assert reads > before  # it read the list again when woken, not on a timer
        await stream.aclose()  # type: ignore[attr-defined]


async def test_a_quiet_stream_sends_a_heartbeat_and_reads_again() -> None:
    async with inbox_world(POLICY_BY_EMAIL) as w:
        inbox = inbox_of(w)
        inbox.heartbeat = 0  # every wait ends at once: nothing changes, so each is a heartbeat
        await w.h.create_tenant("acme")
        stream = inbox._changes(open_request(), ADA)
        assert await next_event(stream) == "retry: 5000\n\n"
        assert [await next_event(stream) for _ in range(3)] == [": heartbeat\n\n"] * 3
        await stream.aclose()  # type: ignore[attr-defined]


async def test_a_burst_of_changes_is_read_once_after_the_minimum_interval() -> None:
    async with inbox_world(POLICY_BY_EMAIL) as w:
        inbox = inbox_of(w)
        inbox.heartbeat, inbox.min_interval = QUIET, QUIET  # the next read waits for the pause
        paused: list[float] = []
        resume = asyncio.Event()

        async def pause(seconds: float) -> None:  # the test decides when the interval is over
            paused.append(seconds)
            await resume.wait()

        inbox.pause = pause
        key = await w.h.create_tenant("acme")
        reads = 0
        waiting = inbox.waiting

        async def counted(person: Person) -> Any:
            nonlocal reads
            reads += 1
            return await waiting(person)

        inbox.waiting = counted  # type: ignore[method-assign]
        stream = inbox._changes(open_request(), ADA)
        assert await next_event(stream) == "retry: 5000\n\n"
        pending = asyncio.ensure_future(next_event(stream))
        for call in ("b1", "b2", "b3"):  # three creates while the stream waits out its interval
            await w.ask(key, "ada@acme.example", call=call)
        await asyncio.wait_for(_until(lambda: paused), 30)
        assert reads == 1 and len(paused) == 1 and 0 < paused[0] <= QUIET
        resume.set()
        assert await pending == 'event: changed\ndata: {"waiting": 3}\n\n'
        assert reads == 2  # one read for the burst
        await stream.aclose()  # type: ignore[attr-defined]


async def _until(check: Any) -> None:
    while not check():
        await asyncio.sleep(0)


async def test_the_notifier_shares_one_change_among_watchers() -> None:
    async with inbox_world(POLICY_BY_EMAIL) as w:
        notifier = w.h.parts.engine.notifier
        first, second = notifier.changes(), notifier.changes()
        assert first is second and not first.done()
        notifier.changed()
        assert first.done() and notifier.changes() is not first

"""The notifier: a replica's own NOTIFY wakes nobody while it closes the approval itself."""

from __future__ import annotations

import asyncio

import pytest

from bot.approvals.notifier import Notifier
from storage.known import Known
from storage.notify import forgetting
from tests.storage.test_known import pending


async def test_a_notify_heard_while_this_process_closes_the_approval_wakes_nobody() -> None:
    notifier = Notifier()
    fut = notifier.subscribe("apv_1")
    with notifier.closing("apv_1"):
        notifier.heard("apv_1")  # PostgreSQL delivered the step's own NOTIFY first
        assert not fut.done()
        notifier.publish("apv_1", "the closed record")
    assert fut.result() == "the closed record"


async def test_a_closing_step_that_lost_to_another_replica_wakes_its_waiters_once_it_ends() -> None:
    woken: list[int] = []
    notifier = Notifier(on_replica_wake=woken.append)
    fut = notifier.subscribe("apv_1")
    with pytest.raises(RuntimeError), notifier.closing("apv_1"):
        notifier.heard("apv_1")  # another replica won: its NOTIFY came while this one tried
        assert not fut.done()
        raise RuntimeError("already decided")
    assert fut.done() and fut.result() is None
    assert woken == [1]  # woken by the other replica's decision


async def test_a_closing_step_that_fails_wakes_its_waiters_to_read_again() -> None:
    woken: list[int] = []
    notifier = Notifier(on_replica_wake=woken.append)
    fut = notifier.subscribe("apv_1")
    with pytest.raises(RuntimeError), notifier.closing("apv_1"):
        raise RuntimeError("the database went away")
    assert fut.done() and fut.result() is None
    assert woken == []  # no other replica said anything


async def test_the_own_notify_heard_after_the_record_was_handed_on_wakes_nobody() -> None:
    woken: list[int] = []
    notifier = Notifier(on_replica_wake=woken.append)
    fut = notifier.subscribe("apv_1")
    with notifier.closing("apv_1"):
        notifier.heard("apv_1")
        notifier.publish("apv_1", "the closed record")
    assert fut.result() == "the closed record"
    assert woken == []


async def test_a_notify_for_an_approval_closed_elsewhere_wakes_its_waiters() -> None:
    woken: list[int] = []
    notifier = Notifier(on_replica_wake=woken.append)
    fut = notifier.subscribe("apv_2")
    with notifier.closing("apv_1"):  # closing another approval changes nothing for this one
        notifier.heard("apv_2")
    assert fut.done() and fut.result() is None
    assert woken == [1]


async def test_closing_the_same_approval_twice_at_once_skips_its_notify_until_both_end() -> None:
    notifier = Notifier()
    first, second = asyncio.Event(), asyncio.Event()

    async def step(gate: asyncio.Event) -> None:
        with notifier.closing("apv_1"):
            await gate.wait()

    one, two = asyncio.create_task(step(first)), asyncio.create_task(step(second))
    await asyncio.sleep(0)
    first.set()
    await one
    fut = notifier.subscribe("apv_1")
    notifier.heard("apv_1")
    assert not fut.done()  # the second step still closes it here
    second.set()
    await two
    notifier.heard("apv_1")
    assert fut.done()


async def test_every_close_heard_makes_the_replica_forget_its_copy() -> None:
    """The copy a replica keeps of a pending approval it created (`storage.known`) goes with
    the first NOTIFY for it, its own included, even while this process is closing it."""
    known = Known()
    known.listening(True)
    notifier = Notifier()
    heard = forgetting(known, notifier.heard)  # what the listener calls (`storage.notify.listen`)
    for approval_id in ("apv_1", "apv_2"):
        known.keep(pending(approval_id), known.epoch())
    heard("apv_1")
    with notifier.closing("apv_2"):
        heard("apv_2")
        assert known.get("apv_2") is None
    assert known.get("apv_1") is None and len(known) == 0

"""ChannelPacer: about one post per second per channel, a small burst, channels independent."""

from __future__ import annotations

import asyncio
import time

import pytest

from surfaces.slack.pacing import ChannelPacer


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_burst_then_one_per_second() -> None:
    clock = Clock()
    pacer = ChannelPacer(rate=1.0, burst=3, clock=clock)
    assert [pacer.reserve("C1") for _ in range(5)] == [0.0, 0.0, 0.0, 1.0, 2.0]


def test_channels_do_not_wait_for_each_other() -> None:
    pacer = ChannelPacer(rate=1.0, burst=1, clock=Clock())
    assert pacer.reserve("C1") == 0.0
    assert pacer.reserve("C1") == 1.0
    assert pacer.reserve("C2") == 0.0


def test_idle_time_refills_the_burst() -> None:
    clock = Clock()
    pacer = ChannelPacer(rate=1.0, burst=2, clock=clock)
    assert [pacer.reserve("C1") for _ in range(3)] == [0.0, 0.0, 1.0]
    clock.now += 10
    assert [pacer.reserve("C1") for _ in range(2)] == [0.0, 0.0]


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        ChannelPacer(rate=0)


async def test_waiting_on_a_busy_channel_does_not_block_another() -> None:
    pacer = ChannelPacer(rate=5.0, burst=1)
    done: list[tuple[str, float]] = []
    started = time.monotonic()

    async def send(channel: str) -> None:
        await pacer.wait(channel)
        done.append((channel, time.monotonic() - started))

    await asyncio.gather(send("C1"), send("C1"), send("C1"), send("C2"))
    c2 = next(t for c, t in done if c == "C2")
    last_c1 = max(t for c, t in done if c == "C1")
    assert c2 < 0.1
    assert last_c1 >= 0.38

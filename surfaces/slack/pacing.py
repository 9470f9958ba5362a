"""Per-channel pacing of posts, so one busy channel never delays another.

Slack allows about one `chat.postMessage` per second per channel with short bursts; going
faster earns 429s that then stall every sender on the workspace limit too. This is a
generic cell-rate limiter per key: each caller reserves the next free slot without holding
a lock, then sleeps until it comes, so callers for other keys are never queued behind it.
It paces one process; across replicas the 429 retry handler is the backstop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class ChannelPacer:
    """Spaces calls per key to `rate` per second, allowing `burst` back-to-back calls."""

    def __init__(
        self,
        rate: float = 1.0,
        burst: int = 3,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("ChannelPacer needs rate > 0 and burst >= 1")
        self._interval = 1.0 / rate
        self._burst = burst
        self._clock = clock
        self._next: dict[str, float] = {}

    def reserve(self, key: str) -> float:
        """Claim the next slot for `key` and return how many seconds to wait for it."""
        now = self._clock()
        self._forget_idle(now)
        # The theoretical time this key is next free; a burst lets callers run that far ahead.
        due = max(self._next.get(key, now), now)
        self._next[key] = due + self._interval
        return max(0.0, due - now - (self._burst - 1) * self._interval)

    async def wait(self, key: str) -> None:
        """Sleep until `key` may send again."""
        delay = self.reserve(key)
        if delay > 0:
            await asyncio.sleep(delay)

    def _forget_idle(self, now: float) -> None:
        if len(self._next) > 1024:
            self._next = {k: t for k, t in self._next.items() if t > now}

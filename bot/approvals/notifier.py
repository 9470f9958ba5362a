"""Wake waiting agents the moment an approval closes: in process, and across replicas.

Long-polls and event streams register a future before they read the row, so a decision
committed between the read and the wait is never missed. On PostgreSQL a decision also
sends `NOTIFY cosigner_decided`, and every replica's listener wakes its own waiters.

A replica hears its own NOTIFY too, often before the step that sent it has returned (the
notification and the statement's answer arrive together, and the step needs a few turns
of the event loop more): woken by it, a waiter would read the row again for a record the
step is about to hand it. So while this process closes an approval (`closing`), the
NOTIFY for it wakes nobody; the step hands its waiters the closed record, or, when it
ends without doing so (it lost to another replica, whose NOTIFY is held until then, or
failed), its waiters are woken to read again.

Lists of what waits (the inbox's live list) wait on `changes()` instead: one shared future
completed when any approval is created here or closes here or on another replica.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from storage.database import Database
from storage.notify import Listener, listen

log = logging.getLogger("cosigner.notifier")


class Notifier:
    """Futures keyed by approval id, resolved when that approval closes."""

    def __init__(self, on_replica_wake: Callable[[int], None] = lambda woken: None) -> None:
        self._waiters: dict[str, set[asyncio.Future[Any]]] = defaultdict(set)
        self._listener: Listener | None = None
        self._on_replica_wake = on_replica_wake
        self._change: asyncio.Future[None] | None = None
        self._closing: dict[str, int] = {}  # approvals this process is closing: how many steps
        self._deferred: set[str] = set()  # of those, the ones a NOTIFY was heard for meanwhile

    def changes(self) -> asyncio.Future[None]:
        """A future completed at the next change of what is pending (a request created, or
        one closed). Shared by every watcher: wait on it with `asyncio.wait`, never cancel it."""
        if self._change is None or self._change.done():
            self._change = asyncio.get_running_loop().create_future()
        return self._change

    def changed(self) -> None:
        """Tell every watcher of `changes()` that what is pending has changed."""
        fut, self._change = self._change, None
        if fut is not None and not fut.done():
            fut.set_result(None)

    def subscribe(self, approval_id: str) -> asyncio.Future[Any]:
        """A future that completes when `approval_id` closes (with the closed record when
        this process closed it, else None); call `unsubscribe` after."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiters[approval_id].add(fut)
        return fut

    def unsubscribe(self, approval_id: str, fut: asyncio.Future[Any]) -> None:
        """Forget a waiter."""
        waiters = self._waiters.get(approval_id)
        if waiters is not None:
            waiters.discard(fut)
            if not waiters:
                del self._waiters[approval_id]

    def publish(self, approval_id: str, value: Any = None) -> int:
        """Wake every local waiter of this approval, handing each `value`; return how many."""
        self.changed()
        woken = 0
        for fut in self._waiters.pop(approval_id, ()):
            if not fut.done():
                fut.set_result(value)
                woken += 1
        return woken

    @contextlib.contextmanager
    def closing(self, approval_id: str) -> Iterator[None]:
        """Around a step of this process that may close `approval_id` and then `publish` it.
        A NOTIFY heard for it meanwhile wakes nobody: the step hands its waiters the closed
        record. Once the last such step ends, a NOTIFY heard meanwhile wakes whoever still
        waits (another replica closed it: this process lost the race), and a step that
        raised wakes its waiters to read the row again."""
        self._closing[approval_id] = self._closing.get(approval_id, 0) + 1
        failed = False
        try:
            yield
        except BaseException:
            failed = True
            raise
        finally:
            left = self._closing[approval_id] - 1
            if left:
                self._closing[approval_id] = left
            else:
                del self._closing[approval_id]
            heard = not left and approval_id in self._deferred
            if heard:
                self._deferred.discard(approval_id)
            if heard or failed:
                woken = self.publish(approval_id)
                if heard and woken:
                    self._on_replica_wake(woken)

    def heard(self, approval_id: str) -> None:
        """A NOTIFY said `approval_id` closed: wake its waiters to read it; while this
        process is closing it, once that step ends (see `closing`)."""
        if approval_id in self._closing:
            self._deferred.add(approval_id)
            return
        if woken := self.publish(approval_id):
            self._on_replica_wake(woken)

    async def listen(
        self,
        db: Database,
        *,
        on_keys: Callable[[str], None] = lambda _tenant: None,
        on_state: Callable[[bool], None] = lambda _up: None,
    ) -> None:
        """Start listening for other replicas' decisions (PostgreSQL), and on the same
        connection for API key removals (`on_keys(tenant)`); `on_state` hears the
        connection come up or go down."""
        self._listener = await listen(db, self.heard, on_state, on_keys)

    async def close(self) -> None:
        """Stop listening."""
        if self._listener is not None:
            await self._listener.close()

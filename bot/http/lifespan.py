"""The app's lifespan: what starts before the first request and stops after the last.

Start: the schema (migrated, or checked), Slack tokens sealed, the PostgreSQL listener, the
surfaces, the background workers. Stop: the same in reverse, each task awaited, so that
nothing of the app outlives it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

from starlette.applications import Starlette

from bot.http.parts import Parts
from bot.http.surface_config import ConfigurationError
from bot.operations import Execution
from bot.workers import ExpirySweeper, JobWorker

Lifespan = Callable[[Starlette], AbstractAsyncContextManager[None]]


def lifespan(parts: Parts, *, migrate: bool) -> Lifespan:
    """The lifespan of an app made of `parts`; `migrate`: bring the schema up to date first."""

    @contextlib.asynccontextmanager
    async def running(app: Starlette) -> AsyncIterator[None]:
        await start(parts, migrate=migrate)
        executing = start_workers(parts) if parts.run_workers else set()
        try:
            yield
        finally:
            await stop(parts, executing)

    return running


async def start(parts: Parts, *, migrate: bool) -> None:
    """The schema, the listener and the surfaces, ready for requests."""
    db = parts.db
    if migrate:
        await db.migrate()
    elif await db.revision() is None:
        raise ConfigurationError("the database has no schema; run `cosigner migrate` first")
    if parts.installs is not None:
        await parts.installs.seal_plaintext()  # tokens an older version stored in plain text
    if not db.is_sqlite:
        await parts.notifier.listen(db, on_keys=parts.keys.heard, on_state=parts.keys.listening)
    for adapter in parts.surfaces.values():
        await adapter.start()


def start_workers(parts: Parts) -> set[asyncio.Task[None]]:
    """Start the job worker, the executor and the expiry sweeper (as `parts.tasks`); returns the
    set of executions in flight, which shutdown awaits too."""
    worker = JobWorker(
        parts.engine,
        parts.surfaces,
        parts.http,
        parts.settings.secret or "",
        parts.contracts,
        db=parts.db,
        clock=parts.clock,
        metrics=parts.metrics,
        tracing=parts.tracing,
        wakeups=parts.wakeups,
        handoffs=parts.handoffs,
        execution=lambda finish, retry: Execution(
            parts.engine,
            parts.contracts,
            finish,
            retry,
            db=parts.db,
            clock=parts.clock,
            policy=parts.policy,
            seal=parts.seal,
            tracing=parts.tracing,
            notifier=parts.notifier,
            wakeups=parts.wakeups,
        ),
    )
    sweeper = ExpirySweeper(parts.engine, clock=parts.clock, wakeups=parts.wakeups)
    parts.tasks = [
        asyncio.create_task(worker.run(parts.stop)),
        asyncio.create_task(worker.execute_approved(parts.stop)),
        asyncio.create_task(sweeper.run(parts.stop)),
    ]
    if parts.sink is not None:
        parts.tasks.append(asyncio.create_task(parts.sink.run(parts.stop)))
    return worker.executing


async def stop(parts: Parts, executing: set[asyncio.Task[None]]) -> None:
    """Stop the workers and wait for them, then the surfaces, the listener and the database."""
    parts.stop.set()
    parts.wakeups.all()
    running = [*parts.tasks, *executing]
    for task in running:
        task.cancel()
    for task in running:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    for adapter in parts.surfaces.values():
        await adapter.stop()
    await parts.notifier.close()
    if parts.sink is not None:
        await parts.sink.http.aclose()
    if parts.owned_http is not None:
        await parts.owned_http.aclose()
    if parts.owned_oncall_http is not None:
        await parts.owned_oncall_http.aclose()
    if parts.owned_provider is not None:
        await asyncio.to_thread(parts.owned_provider.shutdown)  # flushes the spans still queued
    await parts.db.close()

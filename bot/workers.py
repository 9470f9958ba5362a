"""Background work: the job outbox (deliveries, card updates, callbacks) and the expiry sweep.

Jobs are rows written in the same transaction as the change that needs them, so none is
lost across a crash or restart. A worker claims due rows by moving `locked_until` forward
(with `FOR UPDATE SKIP LOCKED` on PostgreSQL), so each attempt runs on one replica only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Mapping
from typing import Any

import httpx
import sqlalchemy as sa

from bot.engine import Engine
from bot.grants import callback_secret
from contracts.errors import CosignerError, SurfaceUnavailable
from contracts.grants import sign_callback
from contracts.ports import SurfaceAdapter
from storage.tables import jobs

log = logging.getLogger("cosigner.jobs")

LOCK_SECONDS = 60.0
BATCH = 50


def backoff(attempt: int) -> float:
    """Seconds before retry `attempt` (1, 2, 4 … capped at ten minutes)."""
    return float(min(2 ** max(attempt - 1, 0), 600))


class JobWorker:
    """Claims due jobs and runs them: deliver a card, update it, or POST a callback."""

    def __init__(
        self, engine: Engine, surfaces: Mapping[str, SurfaceAdapter], http: httpx.AsyncClient, secret: str
    ) -> None:
        self.engine = engine
        self.surfaces = surfaces
        self.http = http
        self.secret = secret

    async def run(self, stop: asyncio.Event, poll: float = 1.0) -> None:
        """Work until `stop` is set; sleep until woken or `poll` seconds pass."""
        while not stop.is_set():
            try:
                done = await self.run_once()
            except Exception:
                log.exception("job batch failed; retrying")
                done = 0
            if done == 0:
                self.engine.jobs_wakeup.clear()
                try:
                    await asyncio.wait_for(self.engine.jobs_wakeup.wait(), poll)
                except TimeoutError:
                    pass

    async def run_once(self) -> int:
        """Claim and run one batch of due jobs; return how many ran."""
        claimed = await self._claim()
        if claimed:
            await asyncio.gather(*(self._run(job) for job in claimed))
        return len(claimed)

    async def _claim(self) -> list[Any]:
        now = self.engine.clock()
        due = (
            sa.select(jobs.c.id)
            .where(jobs.c.done_at.is_(None), jobs.c.due_at <= now, jobs.c.locked_until <= now)
            .order_by(jobs.c.due_at)
            .limit(BATCH)
        )
        if not self.engine.db.is_sqlite:
            due = due.with_for_update(skip_locked=True)
        stmt = (
            jobs.update()
            .where(jobs.c.id.in_(due.scalar_subquery()), jobs.c.locked_until <= now)
            .values(locked_until=now + LOCK_SECONDS, attempts=jobs.c.attempts + 1)
            .returning(
                jobs.c.id,
                jobs.c.kind,
                jobs.c.approval_id,
                jobs.c.payload,
                jobs.c.attempts,
                jobs.c.deadline_at,
            )
        )
        return await self.engine.db.run_write(lambda conn: list(conn.execute(stmt).all()))

    async def _finish(self, job_id: int, error: str | None = None, retry_at: float | None = None) -> None:
        values: dict[str, Any] = {"last_error": error}
        if retry_at is None:
            values["done_at"] = self.engine.clock()
        else:
            values.update(due_at=retry_at, locked_until=0)
        await self.engine.db.run_write(
            lambda conn: conn.execute(jobs.update().where(jobs.c.id == job_id).values(**values))
        )

    async def _run(self, job: Any) -> None:
        kind = job.kind
        try:
            if kind == "deliver":
                await self._deliver(job)
            elif kind == "show":
                await self._show(job)
            elif kind == "callback":
                await self._callback(job)
            else:
                await self._finish(job.id, f"unknown job kind {kind}")
            self.engine.metrics.jobs.labels(kind, "ran").inc()
        except Exception as exc:  # a job must never take the worker down
            log.exception("job failed", extra={"approval_id": job.approval_id, "job": kind})
            await self._retry(job, f"{type(exc).__name__}")

    async def _retry(self, job: Any, error: str) -> bool:
        """Schedule another attempt; False when the job's deadline has passed."""
        retry_at = self.engine.clock() + backoff(job.attempts)
        if retry_at > job.deadline_at:
            await self._finish(job.id, f"gave up: {error}")
            self.engine.metrics.jobs.labels(job.kind, "abandoned").inc()
            return False
        await self._finish(job.id, error, retry_at)
        return True

    async def _deliver(self, job: Any) -> None:
        placed = await self.engine.placed(job.approval_id)
        if placed is None or placed.card.status.value != "pending":
            await self._finish(job.id)
            return
        adapter = self.surfaces.get(placed.route.surface)
        if adapter is None:
            await self.engine.fail_closed(
                job.approval_id, "SURFACE_UNAVAILABLE", f"{placed.route.surface} is not configured"
            )
            await self._finish(job.id, "surface not configured")
            return
        try:
            receipt = await adapter.deliver(placed.card, placed.route)
        except SurfaceUnavailable as exc:
            await self.engine.fail_closed(job.approval_id, "SURFACE_UNAVAILABLE", exc.message)
            await self._finish(job.id, exc.message)
            return
        except Exception as exc:
            if not await self._retry(job, type(exc).__name__):
                await self.engine.fail_closed(
                    job.approval_id, "SURFACE_UNAVAILABLE", "the card could not be delivered in time"
                )
            return
        await self.engine.delivered(job.approval_id, receipt)
        await self._finish(job.id)

    async def _show(self, job: Any) -> None:
        placed = await self.engine.placed(job.approval_id)
        if placed is None or placed.delivered is None:
            await self._finish(job.id)
            return
        adapter = self.surfaces.get(placed.route.surface)
        if adapter is None:
            await self._finish(job.id, "surface not configured")
            return
        try:
            await adapter.show_outcome(placed.card, placed.route, placed.delivered)
        except Exception as exc:
            await self._retry(job, type(exc).__name__)
            return
        await self._finish(job.id)

    async def _callback(self, job: Any) -> None:
        rec = await self.engine.record(job.approval_id)
        if rec.callback_url is None:
            await self._finish(job.id)
            return
        payload = json.loads(job.payload)
        body = self.engine.body(rec).model_dump_json().encode()
        stamp = int(time.time())
        headers = {
            "Content-Type": "application/json",
            "Cosigner-Signature": sign_callback(callback_secret(self.secret, rec.tenant), body, stamp),
            "Cosigner-Delivery": payload["delivery"],
            "User-Agent": "cosigner-callback/1",
        }
        status: int | None = None
        error: str | None = None
        try:
            response = await self.http.post(rec.callback_url, content=body, headers=headers, timeout=10.0)
            status = response.status_code
        except httpx.HTTPError as exc:
            error = type(exc).__name__
        ok = status is not None and 200 <= status < 300
        await self.engine.note(
            rec.id,
            "callback_attempt",
            {
                "delivery": payload["delivery"],
                "attempt": job.attempts,
                "status": status,
                "error": error,
                "delivered": ok,
            },
        )
        if ok:
            await self._finish(job.id)
            return
        if not await self._retry(job, error or f"HTTP {status}"):
            await self.engine.note(
                rec.id, "callback_abandoned", {"delivery": payload["delivery"], "attempts": job.attempts}
            )


class ExpirySweeper:
    """Expires pending approvals at their time, and at start those that expired while down."""

    def __init__(self, engine: Engine, max_sleep: float = 1.0) -> None:
        self.engine = engine
        self.max_sleep = max_sleep

    async def run(self, stop: asyncio.Event) -> None:
        """Sweep until `stop` is set."""
        while not stop.is_set():
            delay = self.max_sleep
            try:
                await self.engine.expire_due()
                nxt = await self.engine.next_expiry()
                if nxt is not None:
                    delay = min(max(nxt - self.engine.clock(), 0.0), self.max_sleep)
            except CosignerError:
                pass
            except Exception:
                log.exception("expiry sweep failed; retrying")
            self.engine.expiry_wakeup.clear()
            try:
                await asyncio.wait_for(self.engine.expiry_wakeup.wait(), delay)
            except TimeoutError:
                pass

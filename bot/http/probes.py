"""The routes an operator's tooling reads: `/healthz`, `/readyz`, `/metrics`, `/openapi.json`."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from bot.http.api import JSON
from bot.http.openapi import openapi
from bot.http.parts import Parts
from bot.workers import sink_backlog
from contracts.enums import JobKind
from storage import jobs as jobs_store


def probe_routes(parts: Parts) -> list[BaseRoute]:
    """Liveness, readiness, Prometheus metrics and the agent API's OpenAPI document."""
    db, metrics, clock = parts.db, parts.metrics, parts.clock

    async def healthz(request: Request) -> Response:
        return JSON({"status": "ok"})

    async def readyz(request: Request) -> Response:
        try:
            await db.ping()
        except Exception:
            return JSON({"status": "unavailable", "database": "unreachable"}, status_code=503)
        return JSON({"status": "ready", "database": db.dialect, "surfaces": sorted(parts.enabled)})

    async def metrics_route(request: Request) -> Response:
        # The queue's depth is read here, once per scrape, rather than on the jobs' own path;
        # bounded, so that a database that hangs still leaves the other metrics scraped.
        try:
            due = await asyncio.wait_for(db.run_read(lambda tx: jobs_store.due_by_kind(tx, clock())), 2)
        except Exception:
            metrics.queue(None)  # /readyz says the database is unreachable
        else:
            metrics.queue({kind.value: due.get(kind, 0) for kind in JobKind})
        if parts.sink is not None:
            limit = parts.settings.audit_sink_max_backlog
            try:
                behind = await asyncio.wait_for(sink_backlog(db), 2)
            except Exception:
                metrics.sink_backlog(None, 0, limit)
            else:
                metrics.sink_backlog(behind.events, behind.approvals, limit)
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def openapi_route(request: Request) -> Response:
        return JSON(openapi())

    return [
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/metrics", metrics_route),
        Route("/openapi.json", openapi_route),
    ]

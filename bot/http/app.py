"""Compose the ASGI app from explicit parts: settings, policy, database, surfaces.

`build_app(settings, policy=...)` is the only place that knows every package; a new
channel is one factory in the `surfaces` list.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Route

from bot.approvals import Allowances, Denials, Desk, Engine, GrantSigner, Notifier, Wakeups
from bot.egress import Egress, callback_client, parse_allow_list
from bot.handoffs import Handoffs
from bot.http.api import JSON, Api
from bot.http.openapi import openapi
from bot.http.surface_config import (
    ConfigurationError,
    SurfaceFactory,
    default_surfaces,
    oncall_lookups,
    partial_configuration,
    refuse_email_without_smtp,
    slack_install_stores,
)
from bot.http.tenants import TenantKeys
from bot.inbox import inbox_mount, not_configured_message
from bot.observability import Metrics, Tracing, otlp_provider
from bot.operations import ContractClient, Execution, Proposals
from bot.policy import Policy, SmsSender, step_up_paths
from bot.push import push_surface
from bot.settings import Settings
from bot.workers import AuditSink, ExpirySweeper, JobWorker, sink_backlog, sink_client
from contracts.answers import ErrorBody
from contracts.enums import ErrorCode, JobKind, SurfaceType
from contracts.errors import CosignerError, InternalError
from contracts.ports import SurfaceAdapter
from storage import jobs as jobs_store
from storage.database import Database
from storage.sealing import TokenSeal

# What callers import from here (the surfaces' configuration lives in bot.http.surface_config).
__all__ = [
    "ConfigurationError",
    "Parts",
    "SurfaceFactory",
    "announce",
    "build_app",
    "default_surfaces",
    "partial_configuration",
    "parts_of",
    "slack_install_stores",
]

log = logging.getLogger("cosigner.app")


@dataclass
class Parts:
    """What a running app is made of, for tests and the CLI."""

    settings: Settings
    db: Database
    engine: Engine
    desk: Desk
    keys: TenantKeys
    surfaces: dict[str, SurfaceAdapter]
    http: Egress
    wakeups: Wakeups  # the background workers' (tests and the stepped clock move time)
    enabled: set[str]  # the surfaces requests may be routed to, the dashboard included
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    sink: AuditSink | None = None  # the audit sink, when COSIGNER_AUDIT_SINK_URL is set
    stop: asyncio.Event = field(default_factory=asyncio.Event)


def build_app(
    settings: Settings,
    *,
    policy: Policy,
    shadow: Policy | None = None,
    db: Database | None = None,
    surfaces: Sequence[SurfaceFactory] | None = None,
    http: Egress | None = None,
    run_workers: bool = True,
    extra_routes: Sequence[BaseRoute] = (),
    migrate: bool | None = None,
    clock: Callable[[], float] = time.time,
    tracer_provider: TracerProvider | None = None,
) -> Starlette:
    """The Cosigner ASGI app; `app.state.parts` holds its parts once started.

    `clock` (UNIX seconds) is the one source of time for creation, expiry, answers, jobs
    and grants, so tests move time forward instead of sleeping. Spans go to `tracer_provider`
    (one built by `bot.observability.telemetry.tracer_provider`), else to the OTLP endpoint the settings
    name, else nowhere.
    """
    if not settings.secret:
        raise ConfigurationError(
            "COSIGNER_SECRET is not set; set it to a long random string, "
            "e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    stepped = step_up_paths(r for t in ("", *policy.tenants) for r in policy.rules_of(t))
    if stepped and not settings.oidc_enabled:
        raise ConfigurationError(
            f"{stepped[0]} asks for step-up, which only a passkey in the inbox can confirm, and the "
            "inbox is off: set COSIGNER_OIDC_ISSUER, COSIGNER_OIDC_CLIENT_ID and "
            "COSIGNER_OIDC_CLIENT_SECRET, or remove step_up"
        )
    try:
        callback_allow = parse_allow_list(settings.callback_allow)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from exc
    db = db or Database(
        settings.database_url,
        pool_size=settings.database_pool_size,
        sqlite_synchronous=settings.sqlite_sync,
    )
    # Each part gets what it uses here, at construction; none reads another's attributes.
    metrics = Metrics()
    notifier = Notifier(metrics.replica_wakeups.inc, known=db.known)
    provider = tracer_provider or otlp_provider(settings)
    tracing = Tracing(provider)
    seal = TokenSeal(settings.secret)
    signer = GrantSigner(settings.secret)
    sms_sender = SmsSender(
        settings.twilio_from_number, settings.twilio_messaging_service_sid, settings.twilio_whatsapp_from
    )
    denials = Denials(db, clock)
    allowances = Allowances(db, clock)
    wakeups = Wakeups()
    enabled: set[str] = {SurfaceType.DASHBOARD}  # the surface adapters join once built, below
    handoffs = Handoffs(seal, db=db, clock=clock, tracing=tracing, wakeups=wakeups)
    oncall, oncall_http = oncall_lookups(settings, clock)
    engine = Engine(
        db,
        policy,
        signer,
        metrics=metrics,
        notifier=notifier,
        sms_sender=sms_sender,
        surfaces=enabled,
        clock=clock,
        callback_allow=callback_allow,
        tracing=tracing,
        seal=seal,
        handoffs=handoffs,
        shadow=shadow,
        executes=run_workers,
        denials=denials,
        wakeups=wakeups,
        oncall=oncall,
    )
    desk = Desk(
        engine, db=db, clock=clock, policy=policy, denials=denials, handoffs=handoffs, allowances=allowances
    )
    adapters: dict[str, SurfaceAdapter] = {}
    installs = slack_install_stores(settings, db) if surfaces is None else None
    egress = http or callback_client(callback_allow)
    factories = list(default_surfaces(settings, installs, clock) if surfaces is None else surfaces)
    if settings.oidc_enabled:  # people subscribe their browsers in the inbox (bot.push)
        factories.append(push_surface(settings, db, seal, egress, clock))
    for factory in factories:
        adapter = factory(desk)
        adapters[adapter.name] = adapter
    enabled.update(adapters)
    refuse_email_without_smtp(policy, enabled)
    keys = TenantKeys(db, clock, metrics.key_removals_heard.inc)
    parts = Parts(
        settings=settings,
        db=db,
        engine=engine,
        desk=desk,
        keys=keys,
        surfaces=adapters,
        http=egress,
        wakeups=wakeups,
        enabled=enabled,
    )
    should_migrate = db.is_sqlite if migrate is None else migrate
    sink = None
    if settings.audit_sink_url:  # each audit event to the operator's sink (bot.workers.audit_sink)
        sink_http = sink_client(settings.audit_sink_url)
        sink = AuditSink(
            settings.audit_sink_url,
            settings.secret or "",
            sink_http,
            db=db,
            clock=clock,
            metrics=metrics,
            wakeups=wakeups,
        )
        parts.sink = sink
    contracts = ContractClient(parts.http, clock)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        executing: set[asyncio.Task[None]] = set()
        if should_migrate:
            await db.migrate()
        elif await db.revision() is None:
            raise ConfigurationError("the database has no schema; run `cosigner migrate` first")
        if installs is not None:
            await installs.seal_plaintext()  # tokens an older version stored in plain text
        if not db.is_sqlite:
            await notifier.listen(db.url, db.schema, on_keys=keys.heard, on_state=keys.listening)
        for adapter in adapters.values():
            await adapter.start()
        if run_workers:
            worker = JobWorker(
                engine,
                adapters,
                parts.http,
                settings.secret or "",
                contracts,
                db=db,
                clock=clock,
                metrics=metrics,
                tracing=tracing,
                wakeups=wakeups,
                handoffs=handoffs,
                execution=lambda finish, retry: Execution(
                    engine,
                    contracts,
                    finish,
                    retry,
                    db=db,
                    clock=clock,
                    policy=policy,
                    seal=seal,
                    tracing=tracing,
                    notifier=notifier,
                    wakeups=wakeups,
                ),
            )
            sweeper = ExpirySweeper(engine, clock=clock, wakeups=wakeups)
            parts.tasks = [
                asyncio.create_task(worker.run(parts.stop)),
                asyncio.create_task(worker.execute_approved(parts.stop)),
                asyncio.create_task(sweeper.run(parts.stop)),
            ]
            if sink is not None:
                parts.tasks.append(asyncio.create_task(sink.run(parts.stop)))
            executing = worker.executing
        try:
            yield
        finally:
            parts.stop.set()
            wakeups.all()
            running = [*parts.tasks, *executing]
            for task in running:
                task.cancel()
            for task in running:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            for adapter in adapters.values():
                await adapter.stop()
            await notifier.close()
            if sink is not None:
                await sink.http.aclose()
            if http is None:
                await parts.http.aclose()
            if oncall_http is not None:
                await oncall_http.aclose()
            if tracer_provider is None and provider is not None:
                await asyncio.to_thread(provider.shutdown)  # flushes the spans still queued
            await db.close()

    async def healthz(request: Request) -> Response:
        return JSON({"status": "ok"})

    async def readyz(request: Request) -> Response:
        try:
            await db.ping()
        except Exception:
            return JSON({"status": "unavailable", "database": "unreachable"}, status_code=503)
        return JSON({"status": "ready", "database": db.dialect, "surfaces": sorted(enabled)})

    async def metrics_route(request: Request) -> Response:
        # The queue's depth is read here, once per scrape, rather than on the jobs' own path;
        # bounded, so that a database that hangs still leaves the other metrics scraped.
        try:
            due = await asyncio.wait_for(db.run_read(lambda tx: jobs_store.due_by_kind(tx, clock())), 2)
        except Exception:
            metrics.queue(None)  # /readyz says the database is unreachable
        else:
            metrics.queue({kind.value: due.get(kind, 0) for kind in JobKind})
        if sink is not None:
            try:
                behind = await asyncio.wait_for(sink_backlog(db), 2)
            except Exception:
                metrics.sink_backlog(None, 0, settings.audit_sink_max_backlog)
            else:
                metrics.sink_backlog(behind.events, behind.approvals, settings.audit_sink_max_backlog)
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    async def openapi_route(request: Request) -> Response:
        return JSON(openapi())

    routes: list[BaseRoute] = [
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/metrics", metrics_route),
        Route("/openapi.json", openapi_route),
        *Api(
            engine,
            keys,
            Proposals(
                engine,
                contracts,
                db=db,
                policy=policy,
                denials=denials,
                tracing=tracing,
                seal=seal,
                callback_allow=callback_allow,
                surfaces=enabled,
                sms_sender=sms_sender,
            ),
            denials=denials,
            metrics=metrics,
            tracing=tracing,
            signer=signer,
            allowances=allowances,
        ).routes(),
        inbox_mount(
            engine, settings, clock, adapters, db=db, policy=policy, denials=denials, notifier=notifier
        ),
    ]
    for adapter in adapters.values():
        routes.extend(adapter.routes())
    routes.extend(extra_routes)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        message = (
            "no such route; see /openapi.json"
            if exc.status_code == 404
            else f"{exc.detail}; see /openapi.json for the methods each route takes"
        )
        body = ErrorBody.of(ErrorCode.INVALID_REQUEST, message, {})
        # A 405 carries `Allow` (RFC 9110): keep the headers Starlette set.
        return JSONResponse(body.dump(), status_code=exc.status_code, headers=exc.headers)

    async def cosigner_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, CosignerError)
        return JSONResponse(exc.body(), status_code=exc.status)

    async def server_error(request: Request, exc: Exception) -> Response:
        # Log the type only: an exception message may quote request data.
        log.error("unhandled error", extra={"route": request.url.path, "code": type(exc).__name__})
        internal = InternalError("internal error; nothing was decided. Retry the request.")
        return JSONResponse(internal.body(), status_code=internal.status)

    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={
            HTTPException: http_error,
            CosignerError: cosigner_error,
            Exception: server_error,
        },
    )
    app.state.parts = parts
    return app


def announce(app: Any, port: int) -> None:
    """Log `cosigner started` (and any half-configured surface) once the server listens."""
    parts = parts_of(app)
    log.info(
        "cosigner started",
        extra={
            "url": parts.settings.public_url,
            "port": port,
            "database": parts.db.dialect,
            **(
                {"sqlite_synchronous": str(parts.db.sqlite_synchronous)}
                if parts.db.sqlite_synchronous
                else {}
            ),
            "surfaces": sorted(parts.enabled),
        },
    )
    for warning in partial_configuration(parts.settings):
        log.warning(warning)
    if not parts.settings.oidc_enabled:
        log.info(not_configured_message())


def parts_of(app: Any) -> Parts:
    """The parts of an app built by `build_app`."""
    parts: Parts = app.state.parts
    return parts

"""Compose the ASGI app from explicit parts: settings, policy, database, surfaces.

`build_app(settings, policy=...)` is the only place that knows every package. The app is
composed from lists, as Starlette composes: the parts (`bot.http.parts`), the routes (below:
a new route is one line in `routes`, or for the agent API one line in `Api.routes`), the
exception handlers (`bot.http.error_handlers`) and the lifespan (`bot.http.lifespan`). A new
channel is one factory in the `surfaces` list.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from starlette.applications import Starlette
from starlette.routing import BaseRoute

from bot.egress import Egress
from bot.http.api import Api
from bot.http.error_handlers import EXCEPTION_HANDLERS
from bot.http.lifespan import lifespan
from bot.http.parts import Parts, assemble
from bot.http.probes import probe_routes
from bot.http.surface_config import (
    ConfigurationError,
    SurfaceFactory,
    default_surfaces,
    partial_configuration,
    slack_install_stores,
)
from bot.inbox import inbox_mount, not_configured_message
from bot.policy import Policy
from bot.settings import Settings
from storage.database import Database

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
    name, else nowhere. `migrate`: bring the schema up to date on start (default: SQLite only).
    """
    parts = assemble(
        settings,
        policy=policy,
        shadow=shadow,
        db=db,
        surfaces=surfaces,
        http=http,
        run_workers=run_workers,
        clock=clock,
        tracer_provider=tracer_provider,
    )
    app = Starlette(
        routes=[*routes(parts), *extra_routes],
        lifespan=lifespan(parts, migrate=parts.db.is_sqlite if migrate is None else migrate),
        exception_handlers=EXCEPTION_HANDLERS,
    )
    app.state.parts = parts
    return app


def routes(parts: Parts) -> list[BaseRoute]:
    """Every route the app serves: a new one is one line here."""
    return [
        *probe_routes(parts),
        *Api(
            parts.engine,
            parts.keys,
            parts.proposals,
            denials=parts.denials,
            metrics=parts.metrics,
            tracing=parts.tracing,
            signer=parts.signer,
            allowances=parts.allowances,
        ).routes(),
        inbox_mount(
            parts.engine,
            parts.settings,
            parts.clock,
            parts.surfaces,
            db=parts.db,
            policy=parts.policy,
            denials=parts.denials,
            notifier=parts.notifier,
        ),
        *(route for adapter in parts.surfaces.values() for route in adapter.routes()),
    ]


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

"""The parts a running app is made of, and `assemble`, which makes them from the settings.

Each part gets what it uses here, at construction; none reads another's attributes. The
routes (`bot.http.app`), the lifespan (`bot.http.lifespan`) and the probes (`bot.http.probes`)
take what they need from `Parts`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import httpx
from opentelemetry.sdk.trace import TracerProvider

from bot.approvals import (
    Allowances,
    Denials,
    Desk,
    Engine,
    GrantSigner,
    Notifier,
    Observe,
    Reach,
    Rules,
    Stores,
    Wakeups,
)
from bot.egress import Egress, callback_client, parse_allow_list
from bot.handoffs import Handoffs
from bot.http.surface_config import (
    ConfigurationError,
    SurfaceFactory,
    default_surfaces,
    oncall_lookups,
    refuse_email_without_smtp,
    slack_install_stores,
)
from bot.http.tenants import TenantKeys
from bot.observability import Metrics, Tracing, otlp_provider
from bot.operations import ContractClient, Proposals
from bot.policy import Policy, SmsSender, step_up_paths
from bot.push import push_surface
from bot.settings import Settings
from bot.workers import AuditSink, sink_client
from contracts.enums import SurfaceType
from contracts.ports import SurfaceAdapter
from storage.database import Database
from storage.sealing import TokenSeal
from storage.slack_installs import SlackInstallStores
from storage.sms_state import SmsState


@dataclass
class Parts:
    """What a running app is made of, for its routes, its lifespan, tests and the CLI."""

    settings: Settings
    db: Database
    engine: Engine
    desk: Desk
    keys: TenantKeys
    surfaces: dict[str, SurfaceAdapter]
    http: Egress
    wakeups: Wakeups  # the background workers' (tests and the stepped clock move time)
    enabled: set[str]  # the surfaces requests may be routed to, the dashboard included
    policy: Policy
    clock: Callable[[], float]
    metrics: Metrics
    tracing: Tracing
    notifier: Notifier
    seal: TokenSeal
    signer: GrantSigner
    denials: Denials
    allowances: Allowances
    handoffs: Handoffs
    contracts: ContractClient
    proposals: Proposals
    installs: SlackInstallStores | None  # None: the caller chose the surfaces
    run_workers: bool
    owned_http: Egress | None  # closed on shutdown: the app made it
    owned_provider: TracerProvider | None  # flushed on shutdown: the app made it
    owned_oncall_http: httpx.AsyncClient | None = None  # the on-call providers' client, closed on shutdown
    sink: AuditSink | None = None  # the audit sink, when COSIGNER_AUDIT_SINK_URL is set
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)


def check(settings: Settings, policy: Policy) -> str:
    """Refuse settings the app cannot run with, naming the fix; the secret, once set."""
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
    return settings.secret


def assemble(
    settings: Settings,
    *,
    policy: Policy,
    shadow: Policy | None,
    db: Database | None,
    surfaces: Sequence[SurfaceFactory] | None,
    http: Egress | None,
    run_workers: bool,
    clock: Callable[[], float],
    tracer_provider: TracerProvider | None,
) -> Parts:
    """Every part of the app, wired; nothing is started (the lifespan does that)."""
    secret = check(settings, policy)
    try:
        callback_allow = parse_allow_list(settings.callback_allow)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from exc
    db = db or Database(
        settings.database_url,
        pool_size=settings.database_pool_size,
        sqlite_synchronous=settings.sqlite_sync,
    )
    metrics = Metrics()
    notifier = Notifier(metrics.replica_wakeups.inc)
    provider = tracer_provider or otlp_provider(settings)
    tracing = Tracing(provider)
    seal = TokenSeal(secret)
    signer = GrantSigner(secret)
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
        Stores(db, denials),
        Rules(policy, signer, shadow=shadow, callback_allow=callback_allow, seal=seal),
        Observe(metrics, tracing),
        Reach(
            surfaces=enabled,
            sms_sender=sms_sender,
            notifier=notifier,
            oncall=oncall,
            handoffs=handoffs,
            wakeups=wakeups,
        ),
        clock=clock,
        executes=run_workers,
    )
    desk = Desk(
        engine,
        db=db,
        clock=clock,
        policy=policy,
        denials=denials,
        handoffs=handoffs,
        allowances=allowances,
        sms_store=SmsState(db, clock),  # the SMS surfaces' own state, handed to them by their factories
    )
    installs = slack_install_stores(settings, db) if surfaces is None else None
    egress = http or callback_client(callback_allow)
    factories = list(default_surfaces(settings, installs, clock) if surfaces is None else surfaces)
    if settings.oidc_enabled:  # people subscribe their browsers in the inbox (bot.push)
        factories.append(push_surface(settings, db, seal, egress, clock))
    adapters: dict[str, SurfaceAdapter] = {}
    for factory in factories:
        adapter = factory(desk)
        adapters[adapter.name] = adapter
    enabled.update(adapters)
    refuse_email_without_smtp(policy, enabled)
    contracts = ContractClient(egress, clock)
    proposals = Proposals(
        engine,
        contracts,
        db=db,
        policy=policy,
        denials=denials,
        tracing=tracing,
        seal=seal,
    )
    return Parts(
        settings=settings,
        db=db,
        engine=engine,
        desk=desk,
        keys=TenantKeys(db, clock, metrics.key_removals_heard.inc),
        surfaces=adapters,
        http=egress,
        wakeups=wakeups,
        enabled=enabled,
        policy=policy,
        clock=clock,
        metrics=metrics,
        tracing=tracing,
        notifier=notifier,
        seal=seal,
        signer=signer,
        denials=denials,
        allowances=allowances,
        handoffs=handoffs,
        contracts=contracts,
        proposals=proposals,
        installs=installs,
        run_workers=run_workers,
        owned_http=egress if http is None else None,
        owned_provider=provider if tracer_provider is None else None,
        owned_oncall_http=oncall_http,
        sink=audit_sink(settings, db, clock, metrics, wakeups),
    )


def audit_sink(
    settings: Settings, db: Database, clock: Callable[[], float], metrics: Metrics, wakeups: Wakeups
) -> AuditSink | None:
    """Each audit event to the operator's sink (`bot.workers.audit_sink`), when one is set."""
    if not settings.audit_sink_url:
        return None
    return AuditSink(
        settings.audit_sink_url,
        settings.secret or "",
        sink_client(settings.audit_sink_url),
        db=db,
        clock=clock,
        metrics=metrics,
        wakeups=wakeups,
    )

"""The checks `cosigner doctor` runs: one table (`CHECKS`) of named async functions, each
answering (status, one line) about one thing Cosigner needs. Those of this machine and its
settings are here; those that ask a service (Slack, Twilio, Teams, the OpenID issuer) are in
bot.cli.doctor_services.

A check reads the settings as far as they parse (`bot.settings.read_settings`, through
`Context.need`, which raises `Skipped` when a variable it needs broke its rule); anything
else it raises is reported as failed by the runner (bot.cli.doctor). A new check is one
function and one line in `CHECKS`.

Everything the checks use is imported with this module, before any check's clock starts:
the checks share one event loop, and an import inside one would count against them all.
Only `cosigner doctor` imports it, when it runs.
"""

from __future__ import annotations

import math
from collections import Counter
from ipaddress import ip_address
from urllib.parse import urlsplit

from bot.cli.doctor import FAIL, OK, SKIP, WARN, Check, Context, Result, Skipped
from bot.cli.doctor_services import oidc, slack, smtp, teams, twilio
from bot.egress import parse_allow_list
from bot.http.surface_config import partial_configuration
from bot.policy import load_policy_file
from bot.settings import DEV_SECRET, MAKE_SECRET, RULES
from bot.workers import sink_backlog
from contracts.errors import PolicyError
from storage.database import Database, DatabaseError
from storage.health import SchemaStanding, schema, server_time, sqlite_file, sqlite_unusable
from storage.urls import database_backend, safe_url

SKEW_WARN = 1.0  # seconds between this machine's clock and the database's: replicas disagree
SKEW_FAIL = 60.0  # past this, expiries, reminders and grants are off by minutes
SECRET_BITS = 100  # below this estimate, COSIGNER_SECRET looks guessable


async def settings(ctx: Context) -> Result:
    """Every variable follows its rule; half-configured surfaces are named."""
    if ctx.reading.problem:
        return FAIL, ctx.reading.problem
    s = ctx.need()
    notes = partial_configuration(s)
    if s.test_clock is not None:
        notes.append("COSIGNER_TEST_CLOCK is set: time moves only by POST /test/clock; unset it")
    if notes:
        return WARN, "; ".join(notes)
    on = {
        "Slack": s.slack_enabled,
        "SMS": s.sms_enabled,
        "WhatsApp": s.whatsapp_enabled,
        "Teams": s.teams_enabled,
        "inbox sign-in": s.oidc_enabled,
        "tracing": s.otlp_traces_endpoint is not None,
    }
    listed = ", ".join(name for name, yes in on.items() if yes) or "the dashboard only"
    return OK, f"every variable follows its rule; on: {listed}"


async def secret(ctx: Context) -> Result:
    """COSIGNER_SECRET is set, long enough, not the sandbox's, and not guessable at a glance."""
    if "secret" in ctx.reading.refused:
        return FAIL, f"COSIGNER_SECRET {RULES['secret']}"
    value = ctx.need().secret
    if not value:
        return FAIL, f"COSIGNER_SECRET is not set: `serve` refuses to start; make one with {MAKE_SECRET}"
    if value == DEV_SECRET:
        return FAIL, f"COSIGNER_SECRET is the sandbox's published secret; make one with {MAKE_SECRET}"
    bits = _estimated_bits(value)
    if bits < SECRET_BITS:
        return WARN, (
            f"COSIGNER_SECRET has little variety (about {bits:.0f} bits by its character counts): "
            f"it may be guessed; make one with {MAKE_SECRET}"
        )
    return (
        OK,
        f"COSIGNER_SECRET is {len(value.encode())} bytes, about {bits:.0f} bits by its character counts",
    )


def _estimated_bits(value: str) -> float:
    """Shannon's estimate over the value's own characters, times its length: a floor for a
    random string, far above it for a repeated or dictionary one (which is what it catches)."""
    counts = Counter(value)
    per_char = -sum(n / len(value) * math.log2(n / len(value)) for n in counts.values())
    return per_char * len(value)


async def policy(ctx: Context) -> Result:
    """The policy (and the shadow policy) load as `serve` loads them."""
    s = ctx.need("policy", "policy_shadow")
    if not s.policy:
        return WARN, (
            "COSIGNER_POLICY is not set: every tool is treated as danger (a person approves "
            "each call); set it to your policy file"
        )
    loaded = []
    for name, path in (("COSIGNER_POLICY", s.policy), ("COSIGNER_POLICY_SHADOW", s.policy_shadow)):
        if not path:
            continue
        try:
            p = load_policy_file(path)
            if problems := p.operation_problems():
                raise PolicyError(problems, p.source)
        except PolicyError as exc:
            first = exc.problems[0] if exc.problems else "invalid"
            return FAIL, (
                f"{name}: {path} has {len(exc.problems)} problem(s), first {first}; "
                f"`cosigner policy check {path}` lists them all"
            )
        loaded.append(f"{path} ({len(p.tools)} tools, {len(p.tenants)} tenants)")
    return OK, "loads: " + ", shadow ".join(loaded)


async def database(ctx: Context) -> Result:
    """The database answers, and its schema is at the revision this code needs."""
    s = ctx.need("database_url", "sqlite_synchronous", "database_pool_size")
    url, shown = s.database_url, safe_url(s.database_url)
    path = sqlite_file(url)
    if path is not None:
        if why := sqlite_unusable(path):
            return FAIL, f"{why}; check COSIGNER_DATABASE_URL"
        if not path.exists():
            return WARN, (
                f"no database at {path} yet: `serve` creates an empty one there; "
                "check COSIGNER_DATABASE_URL if your data is elsewhere"
            )
    db = Database(url, sqlite_synchronous=s.sqlite_sync, pool_size=1)
    try:
        await db.ping()
        found = await schema(db)
    except (DatabaseError, OSError) as exc:
        return FAIL, f"cannot use {shown} ({_cause(exc)}); check COSIGNER_DATABASE_URL and that it is up"
    finally:
        await db.close()
    sqlite, rev, head = db.is_sqlite, found.revision, found.head
    if found.standing is SchemaStanding.CURRENT:
        return OK, f"{shown} answers; its schema is at the newest revision, {rev}"
    if found.standing is SchemaStanding.UNKNOWN:
        return FAIL, (
            f"{shown} is at schema revision {rev}, which this Cosigner does not know (a newer "
            "version migrated it); run that version, or restore a backup made before it"
        )
    what = "has no schema" if rev is None else f"is at schema revision {rev}, older than {head}"
    if sqlite:
        return WARN, f"{shown} {what}: `serve` migrates it at start (`cosigner backup` it first)"
    return FAIL, f"{shown} {what}: run `cosigner migrate` (once, before the replicas start)"


def _cause(exc: BaseException) -> str:
    """The driver's own exception, class and first line (SQLAlchemy's wrapper adds SQL and links)."""
    inner = getattr(exc, "orig", None) or exc
    first = (str(inner).strip().splitlines() or [""])[0]
    return f"{type(inner).__name__}: {first}" if first else type(inner).__name__


async def clock(ctx: Context) -> Result:
    """This machine's clock agrees with the database server's (PostgreSQL: every replica's)."""
    s = ctx.need("database_url", "database_pool_size")
    if database_backend(s.database_url) != "postgresql":
        return SKIP, "SQLite is a file on this machine: Cosigner and its database read one clock"
    db = Database(s.database_url, pool_size=1)
    try:
        await db.ping()  # connected first: the round trip measured below is one query
        before = ctx.clock()
        server = await server_time(db)
        after = ctx.clock()
    except (DatabaseError, OSError) as exc:
        raise Skipped("not checked: the database did not answer (see database)") from exc
    finally:
        await db.close()
    skew = server - (before + after) / 2  # > 0: the database is ahead of this machine
    said = f"this machine's clock is {abs(skew):.3f} s {'behind' if skew > 0 else 'ahead of'} the database's"
    if abs(skew) > SKEW_FAIL:
        return FAIL, f"{said}: expiries, reminders and grants are off by that much; synchronise it (NTP)"
    if abs(skew) > SKEW_WARN:
        return WARN, f"{said}: replicas disagree on expiry by that much; synchronise it (NTP)"
    return OK, said


async def public_url(ctx: Context) -> Result:
    """COSIGNER_PUBLIC_URL is an absolute URL others can call: a real host, https in production."""
    s = ctx.need("public_url")
    url = s.public_url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return FAIL, f"COSIGNER_PUBLIC_URL {RULES['public_url']} (it is {url!r})"
    if parts.query or parts.fragment:
        return (
            FAIL,
            "COSIGNER_PUBLIC_URL carries a ?query or #fragment; give the bare URL Cosigner is reached at",
        )
    host = parts.hostname
    try:
        address = ip_address(host)
    except ValueError:
        address = None
    if address is not None and address.is_unspecified:
        return (
            FAIL,
            f"COSIGNER_PUBLIC_URL names {host}, an address nobody can call; give Cosigner's host name",
        )
    loopback = host == "localhost" or host.endswith(".localhost") or bool(address and address.is_loopback)
    callers = [
        name
        for name, calls in (
            ("Slack", s.slack_enabled and bool(s.slack_signing_secret or s.slack_client_id)),
            ("Twilio", s.sms_enabled),
            ("the inbox's issuer (its redirect)", s.oidc_enabled),
        )
        if calls
    ]
    if loopback and callers:
        return WARN, (
            f"COSIGNER_PUBLIC_URL is on loopback ({host}): {' and '.join(callers)} cannot reach it "
            "from elsewhere (fine for the sandbox); set the public https URL"
        )
    if parts.scheme == "http" and not loopback:
        return WARN, (
            "COSIGNER_PUBLIC_URL is http: put Cosigner behind TLS and give its https URL "
            "(Slack and Twilio call it; the inbox's cookie is Secure only over https)"
        )
    return OK, f"{url}"


async def callbacks(ctx: Context) -> Result:
    """COSIGNER_CALLBACK_ALLOW parses, and opens nothing every tenant should not reach."""
    s = ctx.need("callback_allow")
    try:
        allow = parse_allow_list(s.callback_allow)
    except ValueError as exc:
        return FAIL, str(exc)
    if not allow.networks and not allow.hosts:
        return OK, "callbacks go to public addresses over https only (COSIGNER_CALLBACK_ALLOW is empty)"
    risks = []
    if any(allow.allows_address(ip_address(a)) for a in ("169.254.169.254", "fd00:ec2::254")):
        risks.append("the cloud metadata service (169.254.169.254), which hands out credentials")
    if any(allow.allows_address(ip_address(a)) for a in ("127.0.0.1", "::1")) or allow.allows_host(
        "localhost"
    ):
        risks.append("this machine's own services (loopback)")
    broad = [str(n) for n in allow.networks if n.prefixlen < (8 if n.version == 4 else 16)]
    if broad:
        risks.append(f"most of the internet and every private network ({', '.join(broad)})")
    entries = ", ".join([*map(str, allow.networks), *sorted(allow.hosts)])
    if risks:
        return WARN, (
            f"COSIGNER_CALLBACK_ALLOW ({entries}) lets every tenant's callbackUrl reach "
            f"{' and '.join(risks)}; list only what callbacks need"
        )
    return OK, f"callbacks go to public addresses over https, and also to {entries}"


async def audit_sink(ctx: Context) -> Result:
    """The audit sink's backlog: events written to the audit chain it has not yet accepted."""
    s = ctx.need("audit_sink_url", "audit_sink_max_backlog", "database_url", "sqlite_synchronous")
    if not s.audit_sink_url:
        return SKIP, "no audit sink (COSIGNER_AUDIT_SINK_URL is unset)"
    db = Database(s.database_url, sqlite_synchronous=s.sqlite_sync, pool_size=1)
    try:
        behind = await sink_backlog(db)
    except (DatabaseError, OSError) as exc:
        return SKIP, f"cannot read the sink's backlog: the database is unusable ({_cause(exc)})"
    finally:
        await db.close()
    where, bound = safe_url(s.audit_sink_url), s.audit_sink_max_backlog
    if behind.events > bound:
        return FAIL, (
            f"{behind.events} audit events on {behind.approvals} approvals wait for {where}, past "
            f"COSIGNER_AUDIT_SINK_MAX_BACKLOG ({bound}): the sink is down or refusing them; they stay "
            "in the audit chain and go in order once it accepts (see the server's log)"
        )
    if behind.events:
        return WARN, (
            f"{behind.events} audit events on {behind.approvals} approvals wait for {where} "
            f"(bound {bound}); they go in order as it accepts them"
        )
    return OK, f"the audit sink {where} has every audit event"


CHECKS: dict[str, Check] = {
    "settings": settings,
    "secret": secret,
    "policy": policy,
    "database": database,
    "clock": clock,
    "public-url": public_url,
    "callbacks": callbacks,
    "audit-sink": audit_sink,
    "slack": slack,
    "twilio": twilio,
    "teams": teams,
    "oidc": oidc,
    "smtp": smtp,
}
"""Every check, in the order doctor prints them (they run at once)."""

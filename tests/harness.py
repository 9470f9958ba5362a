"""Run a real Cosigner app in-process for tests: real database, real engine, real surfaces.

async with cosigner_app(POLICY, database=db) as h:
    key = await h.create_tenant("acme")
    r = await h.client.post("/v1/approvals", json=..., headers=h.auth(key))
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import http.server
import os
import secrets
import shutil
import sqlite3
import ssl
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import httpx
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine
from sqlalchemy.pool import NullPool
from starlette.applications import Starlette

from bot.approvals.desk import Desk
from bot.approvals.engine import Engine
from bot.egress.transport import Egress
from bot.http.app import Parts, SurfaceFactory, build_app, parts_of
from bot.policy.rules import load_policy
from bot.settings import Settings
from contracts.ports import Delivered
from storage.database import Database

POSTGRES_ENV = "COSIGNER_TEST_POSTGRES_URL"
TEST_SECRET = "test-secret-" + "x" * 32
BASE_URL = "http://cosigner.test"

EDITABLE_LINE = 'editable = ["amount_cents", "amountCents", "note"]\n'
"""The line that makes `issue_refund` editable: a policy derived from DEFAULT_POLICY that makes
the tool run unasked must drop it (editable on a tool nobody is asked about is a policy error)."""

DEFAULT_POLICY = """
[defaults]
timeout = "5m"
max_gated_calls_per_execution = 5

[tools.lookup_order]
kind = "read"

[tools.issue_credit]
kind = "write"
confirm = true

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]
redact = ["customer.email"]
editable = ["amount_cents", "amountCents", "note"]

[tools.delete_account]
kind = "danger"
deny = true
deny_reason = "accounts are deleted by support staff only"

[tenants.acme]
slack_team = "T0ACME"
admins = { slack = ["U0ADMIN"], dashboard = ["u_admin"] }
admin_channel = "C0ADMINS"

[tenants.acme.tools.issue_refund]
allow_below = { parameter = "amountCents", value = 5000 }

[tenants.acme.headless]
route = "tenant_admins"

[tenants.globex]
slack_team = "T0GLOBEX"
"""


def postgres_url() -> str | None:
    """The PostgreSQL URL tests may use, or None."""
    return os.environ.get(POSTGRES_ENV) or None


REAL_MIGRATIONS_ENV = "COSIGNER_TEST_REAL_MIGRATIONS"
"""Set to 1 to have `database()` run Alembic for every test instead of copying the template."""


@asynccontextmanager
async def database(kind: str) -> AsyncIterator[Database]:
    """A fresh database at the newest revision: a temporary SQLite file, or a new PostgreSQL
    schema. Alembic runs once per process into a template (`sqlite_template`,
    `postgres_template`) that each database is copied from; tests/storage/test_template.py
    holds the copy equal to a real migration, and tests of migrations run Alembic themselves."""
    real = os.environ.get(REAL_MIGRATIONS_ENV) == "1"
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "test.db"
            if not real:
                path.touch(mode=0o600)  # owner-only, as `Database` makes its files
                shutil.copyfile(await sqlite_template(), path)
            db = Database(f"sqlite+aiosqlite:///{path}")
            try:
                if real:
                    await db.migrate()
                yield db
            finally:
                await db.close()
        return
    url = postgres_url()
    assert url, f"set {POSTGRES_ENV}"
    schema = f"t_{secrets.token_hex(6)}"
    template = None if real else await postgres_template()
    admin = create_async_engine(url, poolclass=NullPool)
    try:
        async with admin.begin() as conn:
            await conn.execute(sa.text(NO_FLUSH))
            await conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
            if template is not None:
                await template.replay(conn, schema)
        db = Database(url, schema=schema)
        try:
            if template is None:
                await db.migrate()
            yield db
        finally:
            await db.close()
            async with admin.begin() as conn:
                await conn.execute(sa.text(NO_FLUSH))
                await conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
    finally:
        await admin.dispose()


NO_FLUSH = "SET LOCAL synchronous_commit = off"
"""A test's schema is made and dropped without waiting for the WAL flush: nothing is lost
that a crash would matter for, and the wait was most of a test database's cost."""

_TEMPLATE_DIR: Path | None = None
_SQLITE_TEMPLATE: Path | None = None


def _template_dir() -> Path:
    global _TEMPLATE_DIR
    if _TEMPLATE_DIR is None:
        _TEMPLATE_DIR = Path(tempfile.mkdtemp(prefix="cosigner-template-"))
        atexit.register(shutil.rmtree, _TEMPLATE_DIR, ignore_errors=True)
    return _TEMPLATE_DIR


async def sqlite_template() -> Path:
    """A SQLite file Alembic migrated to head once per process, its WAL checkpointed into
    it, so that a byte copy of the one file is the whole migrated database."""
    global _SQLITE_TEMPLATE
    if _SQLITE_TEMPLATE is None:
        path = _template_dir() / "template.db"
        db = Database(f"sqlite+aiosqlite:///{path}")
        try:
            await db.migrate()
        finally:
            await db.close()
        _checkpoint(path)
        _SQLITE_TEMPLATE = path
    return _SQLITE_TEMPLATE


def _checkpoint(path: Path) -> None:
    """Move `path`'s WAL into the file itself, so the file alone is the database."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    wal = Path(f"{path}-wal")
    assert busy == 0 and (not wal.exists() or wal.stat().st_size == 0), f"{wal} was not checkpointed"


@dataclass(frozen=True)
class PostgresTemplate:
    """What Alembic sent PostgreSQL to migrate an empty schema to head, in order (its reads
    left out), to be replayed into another empty schema under that schema's search_path."""

    statements: tuple[tuple[str, tuple[Any, ...]], ...]

    async def replay(self, conn: AsyncConnection, schema: str) -> None:
        """Build `schema` (empty, created in this transaction) as Alembic did the template:
        runs of statements without parameters go as one script (one round trip)."""
        raw = (await conn.get_raw_connection()).driver_connection
        assert raw is not None
        await raw.execute(f'SET LOCAL search_path TO "{schema}"')
        script: list[str] = []
        for statement, params in self.statements:
            if not params:
                script.append(statement)
                continue
            if script:
                await raw.execute(";\n".join(script))
                script = []
            await raw.execute(statement, *params)
        if script:
            await raw.execute(";\n".join(script))


_POSTGRES_TEMPLATE: PostgresTemplate | None = None


async def postgres_template() -> PostgresTemplate:
    """Migrate a scratch schema once per process with Alembic, recording every statement it
    sends; each test's schema is then built by replaying them (see `PostgresTemplate`)."""
    global _POSTGRES_TEMPLATE
    if _POSTGRES_TEMPLATE is not None:
        return _POSTGRES_TEMPLATE
    url = postgres_url()
    assert url, f"set {POSTGRES_ENV}"
    schema = f"t_template_{secrets.token_hex(6)}"
    admin = create_async_engine(url, poolclass=NullPool)
    recorded: list[tuple[str, tuple[Any, ...]]] = []

    def record(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            return  # a read (Alembic's and the migrations' own checks) changes nothing
        assert not many, f"executemany during a migration: {statement}"
        recorded.append((statement, tuple(params or ())))

    try:
        async with admin.begin() as conn:
            await conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        db = Database(url, schema=schema)
        try:
            event.listen(db._writer.sync_engine, "before_cursor_execute", record)
            await db.migrate()
        finally:
            await db.close()
            async with admin.begin() as conn:
                await conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
    finally:
        await admin.dispose()
    _POSTGRES_TEMPLATE = PostgresTemplate(tuple(recorded))
    return _POSTGRES_TEMPLATE


class ManualClock:
    """A clock that moves only when a test says so (UNIX seconds, starting at real now)."""

    def __init__(self, start: float | None = None) -> None:
        self.now = time.time() if start is None else start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        self.now += seconds


_APPROVER_KEYS: dict[str, str] = {}


@dataclass
class Harness:
    """A started app and what tests need from it."""

    app: Starlette
    client: httpx.AsyncClient
    parts: Parts
    clock: ManualClock
    # Shared by every harness of the process: replicas on one database use each other's keys.
    approver_keys: dict[str, str] = field(default_factory=lambda: _APPROVER_KEYS)

    def advance(self, seconds: float) -> None:
        """Move the app's clock forward and wake its expiry sweeper and job worker."""
        self.clock.advance(seconds)
        self.parts.wakeups.all()

    async def advance_until(self, check: Callable[[], Any], step: float = 1.0, polls: int = 500) -> Any:
        """Move time forward by `step` per poll until `check()` is truthy (retries, backoff)."""
        for _ in range(polls):
            if found := check():
                return found
            self.advance(step)
            await asyncio.sleep(0.01)
        raise AssertionError(f"still false after {polls} steps of {step} s")

    async def waiters(self, count: int = 1) -> None:
        """Return once `count` agents are waiting on a long-poll or stream."""
        metrics = self.parts.engine.metrics
        await until(lambda: (metrics.registry.get_sample_value("cosigner_waiters") or 0) >= count)

    async def delivered(self, approval_id: str, *, every_message: bool = False) -> Delivered:
        """The card's delivery receipt once the job worker stored it (with `every_message`, once
        it names every message sent, as an SMS receipt does after texting each approver)."""

        async def receipt() -> Delivered | None:
            placed = await self.desk.placed(approval_id)
            got = placed.delivered if placed is not None else None
            return got if got is not None and (got.message_refs or not every_message) else None

        found: Delivered = await until_async(receipt)
        return found

    @property
    def engine(self) -> Engine:
        """The engine: the approval lifecycle the API and the workers drive."""
        return self.parts.engine

    @property
    def desk(self) -> Desk:
        """The desk surfaces answer through."""
        return self.parts.desk

    async def create_tenant(self, name: str) -> str:
        """Create a tenant and return its agent key (its approver key: `approver_key(name)`)."""
        made = await self.parts.keys.create(name)
        self.approver_keys[name] = self.approver_keys[made.agent.key] = made.approver.key
        return made.agent.key

    def approver_key(self, tenant: str = "acme") -> str:
        """The approver key `create_tenant` made for a tenant (decisions, standing denies)."""
        return self.approver_keys[tenant]

    def approver_of(self, agent_key: str) -> str:
        """The approver key made with this agent key (the same tenant's)."""
        return self.approver_keys[agent_key]

    @staticmethod
    def auth(key: str) -> dict[str, str]:
        """The Authorization header for a key."""
        return {"Authorization": f"Bearer {key}"}


def make_settings(**overrides: Any) -> Settings:
    """Settings for tests: no Slack or Twilio unless given."""
    values: dict[str, Any] = {"secret": TEST_SECRET, "public_url": BASE_URL}
    values.update(overrides)
    return Settings(**values)


@asynccontextmanager
async def cosigner_app(
    policy_toml: str = DEFAULT_POLICY,
    *,
    db: Database | None = None,
    database_kind: str = "sqlite",
    surfaces: Sequence[SurfaceFactory] = (),
    http: Egress | None = None,
    run_workers: bool = True,
    clock: ManualClock | None = None,
    tracer_provider: Any = None,
    shadow_toml: str | None = None,
    **settings: Any,
) -> AsyncIterator[Harness]:
    """Build, start and serve an app over `httpx.ASGITransport`, on a `ManualClock`;
    `shadow_toml` is a shadow policy decided alongside."""
    clock = clock or ManualClock()
    async with _maybe_db(db, database_kind) as database_:
        app = build_app(
            make_settings(**settings),
            policy=load_policy(policy_toml),
            shadow=load_policy(shadow_toml) if shadow_toml is not None else None,
            db=database_,
            surfaces=surfaces,
            http=http,
            run_workers=run_workers,
            migrate=False,
            clock=clock,
            tracer_provider=tracer_provider,
        )
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
                yield Harness(app=app, client=client, parts=parts_of(app), clock=clock)


@asynccontextmanager
async def _maybe_db(db: Database | None, kind: str) -> AsyncIterator[Database]:
    if db is not None:
        yield db
        return
    async with database(kind) as fresh:
        yield fresh


T = TypeVar("T")


async def until(
    check: Callable[[], T | Literal[False] | None], seconds: float = 30.0, interval: float = 0.02
) -> T:
    """The first truthy value of `check()`, polled every `interval` until `seconds` pass.

    `seconds` only bounds a wait that has gone wrong: a check normally holds within
    milliseconds, but a loaded 2-core machine running the suite's workers side by side can
    take seconds to run a background job, and no test asserts how fast anything happens."""
    deadline = time.monotonic() + seconds
    while not (found := check()):
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(interval)
    return found


async def until_async(
    check: Callable[[], Awaitable[T | Literal[False] | None]], seconds: float = 30.0, interval: float = 0.02
) -> T:
    """The first truthy value of `await check()`, polled like `until`."""
    deadline = time.monotonic() + seconds
    while not (found := await check()):
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(interval)
    return found


@asynccontextmanager
async def slack_app(
    policy_toml: str,
    *,
    secret: str,
    app_id: str,
    team_id: str = "T0ACME",
    database_kind: str = "sqlite",
    tracer_provider: Any = None,
) -> AsyncIterator[tuple[Harness, Any]]:
    """A started app whose Slack surface talks to a fresh emulator: yields (harness, emulator)."""
    from contracts.ports import ApprovalDesk
    from surfaces.slack import SlackAdapter, SlackConfig
    from surfaces.slack.emulator import SlackEmulator

    async with SlackEmulator.running(team_id=team_id, app_id=app_id) as emu:
        config = SlackConfig(signing_secret=secret, bot_token="xoxb-acme", api_url=emu.api_url, app_id=app_id)

        def factory(desk: ApprovalDesk) -> SlackAdapter:
            return SlackAdapter(config, desk)

        async with cosigner_app(
            policy_toml, surfaces=[factory], database_kind=database_kind, tracer_provider=tracer_provider
        ) as h:
            yield h, emu


async def press(
    client: httpx.AsyncClient,
    card: Any,
    action: str = "cosigner.approve",
    *,
    secret: str,
    app_id: str,
    edit: Callable[[dict[str, Any]], None] | None = None,
    **fields: Any,
) -> httpx.Response:
    """Press a button of a posted Slack card as Slack would: a `block_actions` POST to
    `/slack/events`, really signed; `fields` (user, user_team, team, enterprise, channel, ts…)
    shape the click and default to the card's own channel and message, and `edit` may change
    the payload last (to drop a field Slack would send)."""
    from surfaces.slack.interactions import block_actions_payload, send_signed

    button = next(
        e for b in card.blocks if b["type"] == "actions" for e in b["elements"] if e["action_id"] == action
    )
    fields.setdefault("channel", card.channel)
    fields.setdefault("ts", card.ts)
    payload = block_actions_payload(action=button, blocks=card.blocks, app_id=app_id, **fields)
    if edit is not None:
        edit(payload)
    return await send_signed(client, "/slack/events", payload, secret=secret)


DROP: tuple[int, Mapping[str, str]] = (0, {})
"""A `CallbackReceiver` answer: read the request, then close the connection without answering."""


class CallbackReceiver:
    """A loopback HTTP (or HTTPS) server that records every POST and answers from a script.

    `answers` are (status, headers) pairs used in order (`DROP` closes without answering),
    then 200 for ever. `host` is the name put in `url` (it must lead to `bind`, e.g.
    through an injected resolver).
    """

    def __init__(
        self,
        answers: Sequence[tuple[int, Mapping[str, str]]] = (),
        tls: ssl.SSLContext | None = None,
        host: str = "127.0.0.1",
        bind: tuple[str, int] = ("127.0.0.1", 0),
    ) -> None:
        self.received: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        script = list(answers)
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    receiver.received.append(
                        {
                            "path": self.path,
                            "host": self.headers.get("Host"),
                            "delivery": self.headers.get("webhook-id"),
                            "headers": dict(self.headers.items()),
                            "body": body,
                            "at": time.monotonic(),
                        }
                    )
                    status, headers = script.pop(0) if script else (200, {})
                if status == DROP[0]:
                    self.close_connection = True  # closed without an answer
                    return
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(bind, Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.url = f"{'https' if tls else 'http'}://{host}:{self.port}/cosigner"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> CallbackReceiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def snapshot(self) -> list[dict[str, Any]]:
        """What was received so far."""
        with self.lock:
            return list(self.received)

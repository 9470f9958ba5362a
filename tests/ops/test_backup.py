"""A backup taken while `cosigner serve` answers requests restores into a working Cosigner.

On SQLite the backup is `cosigner backup PATH` and the restore is copying that file as the
new database; on PostgreSQL both are the commands docs/operators.md gives (pg_dump, then
pg_restore into a new database), since `cosigner backup` refuses there, naming them. Either
way, with a real `serve` process, the Slack emulator and a callback receiver:

- before the backup: approvals asked in Slack (cards posted, two approved there) and on the
  dashboard (approved), every callback delivered and its job finished;
- during the backup: dashboard approvals created and decided without pause;
- after restoring into a fresh database and serving it: `cosigner audit verify` passes;
  every approval pending before the backup is still pending, with its Slack card, and is
  answered by a click on that card; no callback delivered before the backup is sent again;
  a callback not yet delivered at backup time arrives, at most once more than before (each
  delivery id at most twice: at-least-once across a restore to an earlier moment).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shutil
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from bot.cli import main
from storage import raw
from storage.audit import verify_chains
from storage.backup import backup_sqlite
from storage.database import Database, head_revision
from surfaces.slack.emulator import SlackEmulator
from tests.harness import CallbackReceiver, cosigner_app, until, until_async
from tests.processes import clean_env, cosigner_async, free_port, fresh_database

SECRET = "backup-test-secret-" + secrets.token_hex(16)
SIGNING = "backup-signing-secret"
POLICY = """
[defaults]
timeout = "1h"

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]

[tenants.acme]
slack_team = "T0ACME"
"""
IN_FLIGHT_MAX = 3000  # requests the load sends around the backup, at most
START = float(int(time.time()))  # where the servers' stepped clock starts (COSIGNER_TEST_CLOCK)


class Server:
    """A `cosigner serve` subprocess on a port, with the keys it was set up with."""

    def __init__(self, env: dict[str, str], folder: Path) -> None:
        self.port = free_port()
        self.env = {**env, "COSIGNER_PUBLIC_URL": f"http://127.0.0.1:{self.port}"}
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / f"serve-{self.port}.log"
        self.proc: asyncio.subprocess.Process | None = None
        self.folder = folder

    async def __aenter__(self) -> Server:
        with self.log.open("wb") as out:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                *("-m", "bot.cli", "serve", "--port", str(self.port)),
                env=self.env,
                cwd=self.folder,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=out,
            )

        async def ready() -> bool:
            assert self.proc is not None and self.proc.returncode is None, self.log.read_text()
            try:
                async with httpx.AsyncClient() as http:
                    return (await http.get(f"{self.url}/readyz", timeout=1)).status_code == 200
            except httpx.HTTPError:
                return False

        await until_async(ready, seconds=30, interval=0.1)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.proc is not None:
            if self.proc.returncode is None:
                self.proc.kill()
            await asyncio.wait_for(self.proc.wait(), timeout=10)


async def undone_callbacks(url: str) -> int:
    """Callback jobs not finished yet in the database at `url`."""
    db = Database(url)
    try:
        async with raw.read(db) as conn:
            query = "SELECT count(*) FROM jobs WHERE kind = 'callback' AND done_at IS NULL"
            return int((await conn.execute(sa.text(query))).scalar_one())
    finally:
        await db.close()


def libpq(url: str) -> str:
    """The URL as pg_dump and pg_restore take it."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def run(*argv: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, f"{argv[0]} exited {proc.returncode}: {out.decode()}{err.decode()}"


@asynccontextmanager
async def restored(kind: str, backup: Path, folder: Path) -> AsyncIterator[str]:
    """A fresh database holding the backup, as docs/operators.md says to restore it."""
    async with fresh_database(kind, folder) as url:
        if kind == "sqlite":
            target = make_url(url).database
            assert target is not None
            shutil.copyfile(backup, target)
        else:
            await run("pg_restore", "--no-owner", "--exit-on-error", f"--dbname={libpq(url)}", str(backup))
        yield url


def deliveries(receiver: CallbackReceiver) -> list[tuple[str, str]]:
    """Every callback received so far: (delivery id, approval id)."""
    return [(r["delivery"], json.loads(r["body"])["approvalId"]) for r in receiver.snapshot()]


async def test_a_backup_taken_while_serving_restores_consistently(db_kind: str, tmp_path: Path) -> None:
    if db_kind == "postgres" and not (shutil.which("pg_dump") and shutil.which("pg_restore")):
        pytest.skip("the PostgreSQL variant runs pg_dump and pg_restore: install PostgreSQL's client tools")
    async with (
        SlackEmulator.running(team_id="T0ACME") as emu,
        fresh_database(db_kind, tmp_path) as url,
    ):
        with CallbackReceiver() as receiver:
            await scenario(db_kind, url, emu, receiver, tmp_path)


async def scenario(kind: str, url: str, emu: SlackEmulator, receiver: CallbackReceiver, tmp: Path) -> None:
    (tmp / "policy.toml").write_text(POLICY)
    env = clean_env(
        tmp,
        COSIGNER_DATABASE_URL=url,
        COSIGNER_SECRET=SECRET,
        COSIGNER_POLICY=str(tmp / "policy.toml"),
        COSIGNER_CALLBACK_ALLOW="127.0.0.1",
        COSIGNER_LOG_LEVEL="WARNING",
        SLACK_SIGNING_SECRET=SIGNING,
        SLACK_BOT_TOKEN="xoxb-backup",
        SLACK_API_URL=emu.api_url,
        SLACK_APP_ID=emu.app_id,
        # A stepped clock (tests only): the restored server starts two minutes later, past
        # the lock of a callback that was being sent at backup time, without sleeping.
        COSIGNER_TEST_CLOCK=str(START),
    )
    for args in (["migrate"], ["tenants", "create", "acme"]):
        code, out, err = await cosigner_async(env, *args, cwd=tmp)
        assert code == 0, out + err
    keys = dict(re.findall(r"^(agent|approver) key \(.*\): (\S+)$", out, re.M))
    agent, approver = keys["agent"], keys["approver"]
    backup = tmp / "cosigner.backup"

    def body(call: str, surface: dict[str, str]) -> dict[str, Any]:
        return {
            "executionId": f"run_{call}",
            "toolCallId": call,
            "toolName": "issue_refund",
            "parameters": {"orderId": call, "amountCents": 100},
            "surface": surface,
            "callbackUrl": receiver.url,
        }

    slack_surface = {"type": "slack", "teamId": "T0ACME", "channelId": "C1", "userId": "U1"}
    dashboard = {"type": "dashboard", "userId": "u_1"}

    def card_of(approval_id: str) -> Any:
        return next(
            m for m in emu.messages if m.method == "chat.postMessage" and approval_id in json.dumps(m.blocks)
        )

    async def click(api: httpx.AsyncClient, approval_id: str) -> None:
        card = card_of(approval_id)
        answer = await emu.click(
            api, channel=card.channel, ts=card.ts, action_id="cosigner.approve", secret=SIGNING, user="U1"
        )
        assert answer.status_code == 200, answer.text

    async with Server(env, tmp) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as api:
        agent_auth = {"Authorization": f"Bearer {agent}"}
        approver_auth = {"Authorization": f"Bearer {approver}"}

        async def ask(call: str, surface: dict[str, str]) -> str:
            r = await api.post("/v1/approvals", json=body(call, surface), headers=agent_auth)
            assert r.status_code == 201, r.text
            return str(r.json()["approvalId"])

        async def approve(approval_id: str) -> None:
            decision = {"decision": "approve", "userId": "u_1"}
            r = await api.post(f"/v1/approvals/{approval_id}/decision", json=decision, headers=approver_auth)
            assert r.status_code == 200, r.text

        # Before the backup: settled.
        in_slack = [await ask(f"slack_{i}", slack_surface) for i in range(5)]
        # Each request's own card (five waiting in one channel are also offered on a batch card).
        await until(lambda: len([m for m in emu.messages if _own_card(m)]) == 5, seconds=20)
        for approval_id in in_slack[:2]:
            await click(api, approval_id)
        on_dashboard = [await ask(f"dash_{i}", dashboard) for i in range(4)]
        for approval_id in on_dashboard:
            await approve(approval_id)
        decided_before = set(in_slack[:2]) | set(on_dashboard)
        await until(lambda: {a for _, a in deliveries(receiver)} >= decided_before, seconds=30)
        await until_async(lambda: _none(undone_callbacks(url)), seconds=30)
        settled = {d for d, _ in deliveries(receiver)}
        pending_before = in_slack[2:]

        # During the backup: requests keep coming and being decided.
        done = asyncio.Event()
        during: list[str] = []
        approved_during: list[str] = []

        async def load() -> None:
            for i in range(IN_FLIGHT_MAX):
                if done.is_set():
                    return
                approval_id = await ask(f"flight_{i}", dashboard)
                during.append(approval_id)
                if i % 2 == 0:
                    await approve(approval_id)
                    approved_during.append(approval_id)

        # The load runs before the backup starts and goes on after it ends, without a pause.
        loading = asyncio.create_task(load())
        await until(lambda: len(approved_during) >= 3 or loading.done(), seconds=30)
        # Answered before the backup began, so in it: the newest of them are still in
        # SQLite's -wal file, which a copy of the database file alone would miss.
        created_first, approved_first = list(during), list(approved_during)
        if kind == "sqlite":
            code, out, err = await cosigner_async(server.env, "backup", str(backup), cwd=tmp)
            assert code == 0, out + err
            assert out.startswith("backed up ") and "schema revision" in out
        else:
            await run("pg_dump", "--format=custom", f"--file={backup}", libpq(url))
        ended_with = len(during)
        await until(lambda: len(during) > ended_with + 1 or loading.done(), seconds=30)
        done.set()
        await loading
        assert len(during) > ended_with + 1, f"the load stopped at {IN_FLIGHT_MAX} requests"

    before_restore = deliveries(receiver)

    async with restored(kind, backup, tmp) as copy:
        fresh = {**env, "COSIGNER_DATABASE_URL": copy, "COSIGNER_TEST_CLOCK": str(START + 120)}
        code, out, err = await cosigner_async(fresh, "audit", "verify", cwd=tmp)
        assert code == 0 and out.startswith("audit OK"), out + err
        async with Server(fresh, tmp) as server, httpx.AsyncClient(base_url=server.url, timeout=30) as api:
            agent_auth = {"Authorization": f"Bearer {agent}"}

            async def status(approval_id: str) -> str:
                r = await api.get(f"/v1/approvals/{approval_id}", headers=agent_auth)
                assert r.status_code == 200, r.text
                return str(r.json()["status"])

            assert [await status(a) for a in pending_before] == ["pending"] * 3
            assert {await status(a) for a in decided_before} == {"approved"}
            for approval_id in pending_before:  # each still has its card, with its buttons
                latest = emu.latest(card_of(approval_id).channel, card_of(approval_id).ts)
                assert latest is not None and "cosigner.approve" in json.dumps(latest.blocks)
            await click(api, pending_before[0])  # answered on that very card
            assert await status(pending_before[0]) == "approved"
            restored_states = {a: s for a in during if (s := await _status_if_any(api, a, agent_auth))}
            assert set(created_first) <= set(restored_states), "an approval made before the backup is lost"
            assert {restored_states[a] for a in approved_first} == {"approved"}
            await until(lambda: pending_before[0] in {a for _, a in deliveries(receiver)}, seconds=30)
            await until_async(lambda: _none(undone_callbacks(copy)), seconds=30)

    after = deliveries(receiver)[len(before_restore) :]
    assert not {d for d, _ in after} & settled, "a callback delivered before the backup was sent again"
    assert not {a for _, a in after} & decided_before
    everything = before_restore + after
    ids = [d for d, _ in everything]
    assert all(ids.count(d) <= 2 for d in set(ids)), "a delivery arrived more than twice"
    called_back = {a for _, a in everything}
    decided_in_copy = {a for a, s in restored_states.items() if s == "approved"}
    assert decided_in_copy <= called_back, "a decision in the restored database was never called back"


async def _none(count: Any) -> bool:
    return int(await count) == 0


async def _status_if_any(api: httpx.AsyncClient, approval_id: str, auth: dict[str, str]) -> str | None:
    """The approval's status, or None when the restored database does not have it (it was
    created after the backup)."""
    r = await api.get(f"/v1/approvals/{approval_id}", headers=auth)
    if r.status_code == 404:
        return None
    assert r.status_code == 200, r.text
    return str(r.json()["status"])


async def test_the_backup_holds_what_is_still_in_the_wal(tmp_path: Path) -> None:
    """While the server holds its connections, recent commits live in `cosigner.db-wal`: the
    backup has them (a copy of the database file alone would not)."""
    path = tmp_path / "c.db"
    url = f"sqlite+aiosqlite:///{path}"
    db = Database(url)
    await db.migrate()
    try:
        async with cosigner_app(db=db) as h:
            key = await h.create_tenant("acme")
            made = []
            for i in range(5):
                r = await h.client.post(
                    "/v1/approvals",
                    headers=h.auth(key),
                    json={
                        "executionId": "run_1",
                        "toolCallId": f"c{i}",
                        "toolName": "issue_refund",
                        "parameters": {"orderId": f"o{i}", "amountCents": 9000},
                        "surface": {"type": "dashboard", "userId": "u_1"},
                    },
                )
                assert r.status_code == 201, r.text
                made.append(r.json()["approvalId"])
            assert await asyncio.to_thread(os.path.getsize, f"{path}-wal") > 0  # the commits are in the WAL
            backup = await asyncio.to_thread(backup_sqlite, url, tmp_path / "b.db")
    finally:
        await db.close()
    assert backup.revision == head_revision()
    assert not await asyncio.to_thread(os.path.exists, f"{backup.path}-wal")  # one self-contained file
    copy = Database(f"sqlite+aiosqlite:///{backup.path}")
    try:
        async with raw.read(copy) as conn:
            ids = {row[0] for row in await conn.execute(sa.text("SELECT id FROM approvals"))}
        checked, findings = await copy.run_read(verify_chains, snapshot=True)
    finally:
        await copy.close()
    assert ids == set(made)
    assert findings == [] and checked >= len(made)


# --- the command's refusals ------------------------------------------------------------------


@pytest.fixture
def sqlite_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """COSIGNER_DATABASE_URL on a migrated SQLite file in tmp_path; its path."""
    path = tmp_path / "c.db"
    monkeypatch.setenv("COSIGNER_DATABASE_URL", f"sqlite+aiosqlite:///{path}")
    monkeypatch.setenv("COSIGNER_SECRET", SECRET)
    assert main(["migrate"]) == 0
    return path


def test_backup_refuses_to_overwrite_unless_forced(
    sqlite_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "b.db"
    target.write_text("an earlier backup")
    assert main(["backup", str(target)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {target} exists; give a new path, or --force to replace it\n"
    assert target.read_text() == "an earlier backup"
    assert main(["backup", "--force", str(target)]) == 0
    assert "backed up" in capsys.readouterr().out
    assert (target.stat().st_mode & 0o777) == 0o600  # owner-only, as the database
    assert not list(tmp_path.glob(".b.db.*"))  # nothing left beside it


@pytest.mark.parametrize(
    ("where", "words"),
    [
        (lambda tmp: tmp, "is a folder"),
        (lambda tmp: tmp / "c.db", "is the database itself"),
        (lambda tmp: tmp / "no" / "such" / "b.db", "no folder"),
    ],
    ids=["folder", "itself", "missing-folder"],
)
def test_backup_refuses_a_path_it_cannot_write(
    sqlite_env: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    where: Callable[[Path], Path],
    words: str,
) -> None:
    assert main(["backup", "--force", str(where(tmp_path))]) == 2
    assert words in capsys.readouterr().err


def test_backup_of_a_missing_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COSIGNER_DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path / 'none.db'}")
    assert main(["backup", str(tmp_path / "b.db")]) == 2
    assert "no database at" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists() and not (tmp_path / "b.db").exists()


def test_backup_on_postgresql_names_pg_dump(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    password = "canary-" + secrets.token_hex(6)
    monkeypatch.setenv(
        "COSIGNER_DATABASE_URL", f"postgresql+asyncpg://ops:{password}@db.internal:5432/cosigner"
    )
    assert main(["backup", str(tmp_path / "b.dump")]) == 2
    err = capsys.readouterr().err
    target = tmp_path / "b.dump"
    assert f"pg_dump --format=custom --file={target} postgresql://ops@db.internal:5432/cosigner " in err
    assert "docs/operators.md#backup-and-restore" in err
    assert password not in err
    assert not (tmp_path / "b.dump").exists()


def _own_card(message: Any) -> bool:
    """A request's own card, not the batch card that offers several together."""
    return message.method == "chat.postMessage" and "cosigner.batch_approve" not in json.dumps(message.blocks)

"""The CLI fails with one clear line: no tracebacks, no passwords, no surprise migrations."""

from __future__ import annotations

import asyncio
import os
import secrets
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests.harness import postgres_url
from tests.processes import PROCESS_LIMIT, REPO, clean_env

SECRET = "cli-errors-secret-" + "c" * 32


def run(
    env_extra: dict[str, str], *args: str, tmp_path: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bot.cli", *args],
        env=clean_env(tmp_path, "c.db", **env_extra),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=PROCESS_LIMIT,
        input=stdin,
    )


def test_an_unreachable_database_is_one_line_without_the_password(tmp_path: Path) -> None:
    url = "postgresql+asyncpg://postgres:hunter2@127.0.0.1:1/nowhere"
    out = run({"COSIGNER_DATABASE_URL": url}, "tenants", "list", tmp_path=tmp_path)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and "hunter2" not in out.stderr
    assert "cannot use the database" in out.stderr and "COSIGNER_DATABASE_URL" in out.stderr


def test_a_wrong_driver_message_hides_the_password(tmp_path: Path) -> None:
    out = run(
        {"COSIGNER_DATABASE_URL": "postgresql://postgres:hunter2@127.0.0.1/test"},
        "tenants",
        "list",
        tmp_path=tmp_path,
    )
    assert out.returncode == 2 and "hunter2" not in out.stderr and "asyncpg" in out.stderr


def test_export_into_a_closed_pipe_is_not_an_error(tmp_path: Path) -> None:
    env = {"COSIGNER_SECRET": SECRET}
    assert run(env, "tenants", "create", "acme", tmp_path=tmp_path).returncode == 0
    with sqlite3.connect(tmp_path / "c.db") as conn:  # far more than a pipe buffer holds
        conn.executemany(
            "INSERT INTO audit_events (approval_id, tenant, seq, at, event, actor, data, "
            "prev_hash, hash) VALUES (?, 'acme', ?, ?, 'requested', '{}', ?, '', '')",
            [(f"apv_{i}", 1, float(i), '{"pad": "' + "x" * 400 + '"}') for i in range(2000)],
        )
    script = (
        f"{sys.executable} -m bot.cli audit export | head -1 > /dev/null; "
        f"{sys.executable} -m bot.cli policy check {REPO / 'policy.example.toml'} | head -1"
    )
    full = {
        **{k: v for k, v in os.environ.items() if not k.startswith("COSIGNER_")},
        "COSIGNER_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'c.db'}",
        # The SDK of this tree too, not whichever copy is installed in the environment.
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "sdk" / "python")]),
    }
    out = subprocess.run(
        ["bash", "-c", script], env=full, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert "Traceback" not in out.stderr and "BrokenPipe" not in out.stderr


def test_tenant_secret_is_recoverable_and_needs_the_server_secret(tmp_path: Path) -> None:
    created = run({}, "tenants", "create", "acme", tmp_path=tmp_path)
    assert created.returncode == 0 and "tenants secret acme" in created.stderr
    shown = run({"COSIGNER_SECRET": SECRET}, "tenants", "secret", "acme", tmp_path=tmp_path)
    assert shown.returncode == 0 and shown.stdout.strip().startswith("whsec_")
    again = run({"COSIGNER_SECRET": SECRET}, "tenants", "secret", "acme", tmp_path=tmp_path)
    assert again.stdout == shown.stdout, "derived, so stable"
    assert run({}, "tenants", "secret", "acme", tmp_path=tmp_path).returncode == 2
    missing = run({"COSIGNER_SECRET": SECRET}, "tenants", "secret", "nobody", tmp_path=tmp_path)
    assert missing.returncode == 2 and "no tenant" in missing.stderr


@pytest.mark.skipif(not postgres_url(), reason="needs PostgreSQL: set COSIGNER_TEST_POSTGRES_URL")
@pytest.mark.slow
def test_postgres_is_never_migrated_by_surprise(tmp_path: Path) -> None:
    import asyncpg

    base = make_url(postgres_url() or "")
    name = f"cosigner_cli_{secrets.token_hex(4)}"
    admin_dsn = base.set(drivername="postgresql").render_as_string(hide_password=False)

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(admin_dsn)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    async def tables() -> int:
        conn = await asyncpg.connect(
            base.set(drivername="postgresql", database=name).render_as_string(hide_password=False)
        )
        try:
            return int(
                await conn.fetchval(
                    "SELECT count(*) FROM information_schema.tables WHERE table_schema='public'"
                )
            )
        finally:
            await conn.close()

    asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    try:
        env = {
            "COSIGNER_DATABASE_URL": base.set(database=name).render_as_string(hide_password=False),
            "COSIGNER_SECRET": SECRET,
        }
        listed = run(env, "tenants", "list", tmp_path=tmp_path)
        assert listed.returncode == 2 and "cosigner migrate" in listed.stderr
        served = run(env, "serve", "--port", "1", tmp_path=tmp_path)
        assert served.returncode == 2 and "cosigner migrate" in served.stderr
        assert "Traceback" not in listed.stderr + served.stderr
        assert asyncio.run(tables()) == 0, "nothing was created"
        assert run(env, "migrate", tmp_path=tmp_path).returncode == 0
        assert run(env, "tenants", "create", "acme", tmp_path=tmp_path).returncode == 0
    finally:
        asyncio.run(admin(f'DROP DATABASE "{name}" WITH (FORCE)'))


def test_export_survives_a_row_edited_into_non_json(tmp_path: Path) -> None:
    assert run({}, "migrate", tmp_path=tmp_path).returncode == 0
    with sqlite3.connect(tmp_path / "c.db") as conn:
        conn.execute(
            "INSERT INTO audit_events (approval_id, tenant, seq, at, event, actor, "
            "data, prev_hash, hash) VALUES ('apv_1', 'acme', 1, 1.0, 'requested', "
            "'{}', 'not json', '', '')"
        )
    out = run({}, "audit", "export", tmp_path=tmp_path)
    assert out.returncode == 0 and '"unparseable": "not json"' in out.stdout


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("10.0.0.1/8", "did you mean 10.0.0.0/8"),
        ("hooks.internal,,10.0.0.0/8", "empty entry"),
        ("https://hooks.internal", "without scheme"),
    ],
)
def test_an_invalid_callback_allow_list_stops_the_server_with_one_line(
    value: str, says: str, tmp_path: Path
) -> None:
    env = {"COSIGNER_SECRET": SECRET, "COSIGNER_CALLBACK_ALLOW": value}
    out = run(env, "serve", "--port", "1", tmp_path=tmp_path)
    assert out.returncode == 2, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error: COSIGNER_CALLBACK_ALLOW") and says in last, out.stderr
    assert "Traceback" not in out.stderr


def _one_error_line(out: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1, out.stderr
    for text in expected:
        assert text in out.stderr, out.stderr


@pytest.mark.slow
def test_every_mistake_is_one_error_line_and_exit_2(tmp_path: Path) -> None:
    assert run({}, "migrate", tmp_path=tmp_path).returncode == 0
    latin1 = tmp_path / "latin1.toml"
    latin1.write_bytes('[tools.caf\xe9]\nkind = "read"\n'.encode("latin-1"))
    cases = {
        ("audit", "export", "--since", "garbage"): ["--since 'garbage'", "ISO 8601"],
        ("audit", "show", "apv_nope"): ["no audit events for 'apv_nope'"],
        ("tenants", "rotate", "nobody"): ["no tenant 'nobody'"],
        ("serve", "--port", "70000"): ["'70000' is not a port", "0 to 65535"],
        ("dev", "--port", "eighty"): ["'eighty' is not a port"],
        ("audit", "frobnicate"): ["invalid choice", "cosigner audit --help"],
        (): ["required: command", "cosigner --help"],
    }
    for args, expected in cases.items():
        _one_error_line(run({"COSIGNER_SECRET": SECRET}, *args, tmp_path=tmp_path), *expected)
    # A policy's problems are listed one per line under the `error:` line.
    policy = run({}, "policy", "check", str(latin1), tmp_path=tmp_path)
    assert policy.returncode == 2 and policy.stderr.startswith("error: "), policy.stderr
    assert "not UTF-8" in policy.stderr and "Traceback" not in policy.stderr


def test_reading_commands_refuse_a_missing_sqlite_file(tmp_path: Path) -> None:
    missing = tmp_path / "typo" / "cosigner.db"
    env = {"COSIGNER_DATABASE_URL": f"sqlite+aiosqlite:///{missing}", "COSIGNER_SECRET": SECRET}
    for args in (("audit", "verify"), ("audit", "export"), ("tenants", "list"), ("audit", "show", "apv_1")):
        _one_error_line(run(env, *args, tmp_path=tmp_path), f"no database at {missing}", "cosigner migrate")
    assert not missing.exists() and not missing.parent.exists(), "nothing was created"
    assert run(env, "tenants", "create", "acme", tmp_path=tmp_path).returncode == 0, "creating still may"

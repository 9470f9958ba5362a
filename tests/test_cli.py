"""The `cosigner` command: policy check, tenants create, audit verify/export/show, migrate."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from bot.cli import main
from bot.grants import callback_secret
from storage.database import Database
from storage.tables import audit_events, tenants
from tests.harness import cosigner_app

REPO = Path(__file__).resolve().parents[1]
SECRET = "cli-test-secret-" + "s" * 32


@pytest.fixture
def db_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "c.db"
    monkeypatch.setenv("COSIGNER_DATABASE_URL", f"sqlite+aiosqlite:///{path}")
    monkeypatch.setenv("COSIGNER_SECRET", SECRET)
    monkeypatch.delenv("COSIGNER_POLICY", raising=False)
    return path


def sync_engine(path: Path) -> sa.Engine:
    return sa.create_engine(f"sqlite:///{path}")


def populate(path: Path) -> list[str]:
    """Create and decide approvals through the real API on the CLI's database file."""

    async def go() -> list[str]:
        db = Database(f"sqlite+aiosqlite:///{path}")
        await db.migrate()
        try:
            async with cosigner_app(db=db) as h:
                key = await h.create_tenant("acme")
                ids = []
                for call_id, tool in [("c1", "issue_refund"), ("c2", "lookup_order")]:
                    r = await h.client.post(
                        "/v1/approvals",
                        headers=h.auth(key),
                        json={
                            "executionId": "run_1",
                            "toolCallId": call_id,
                            "toolName": tool,
                            "parameters": {"orderId": "o1", "cardToken": "tok_secret_cli"},
                            "reason": "r",
                            "surface": {"type": "dashboard", "userId": "u_1"},
                        },
                    )
                    assert r.status_code in (200, 201), r.text
                    ids.append(r.json()["approvalId"])
                    h.advance(1.0)  # events at distinct times, for --since
                r = await h.client.post(
                    f"/v1/approvals/{ids[0]}/decision",
                    headers=h.auth(key),
                    json={"decision": "deny", "userId": "u_1"},
                )
                assert r.status_code == 200, r.text
                return ids
        finally:
            await db.close()

    return asyncio.run(go())


# --- policy check ----------------------------------------------------------------------------


def test_policy_check_accepts_the_example(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "check", str(REPO / "policy.example.toml")]) == 0
    out = capsys.readouterr().out
    assert "OK" in out
    assert "issue_refund (ask_always)" in out and "lookup_order (none)" in out


def test_policy_check_lists_every_problem_with_its_path(
    tmp_path: Path, db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("""
[defaults]
timeout = "5 minutes"

[tools.a]
kind = "dangerous"

[tools.b]
kind = "read"
colour = "red"

[tenants.acme]
sms_from = "555"
""")
    assert main(["policy", "check", str(bad)]) == 2
    captured = capsys.readouterr()
    assert "OK" not in captured.out
    for path in ["defaults.timeout", "tools.a.kind", "tools.b.colour", "tenants.acme.sms_from"]:
        assert re.search(rf"^\s+{re.escape(path)}: ", captured.err, re.M), (path, captured.err)
    assert "4 problem" in captured.err


def test_policy_check_of_a_missing_file(
    tmp_path: Path, db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["policy", "check", str(tmp_path / "nope.toml")]) == 2
    assert "nope.toml" in capsys.readouterr().err


# --- tenants -----------------------------------------------------------------------------------


def test_tenants_create_prints_the_key_once_and_stores_only_its_hash(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tenants", "create", "acme"]) == 0
    out = capsys.readouterr().out
    keys = re.findall(r"csk_[A-Za-z0-9_-]+", out)
    assert len(keys) == 1, out
    key = keys[0]
    assert out.count(key) == 1
    assert callback_secret(SECRET, "acme") in out
    with sync_engine(db_path).connect() as conn:
        rows = conn.execute(sa.select(tenants)).all()
    assert [r.name for r in rows] == ["acme"]
    assert rows[0].api_key_hash == hashlib.sha256(key.encode()).hexdigest()
    assert key.encode() not in db_path.read_bytes(), "the plain key must not be stored"
    assert main(["tenants", "list"]) == 0
    assert capsys.readouterr().out.split() == ["acme"]


def test_tenants_create_twice_fails_clearly(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tenants", "create", "acme"]) == 0
    first = capsys.readouterr().out
    assert main(["tenants", "create", "acme"]) == 2
    captured = capsys.readouterr()
    assert "already exists" in captured.err and "acme" in captured.err
    assert "csk_" not in captured.out
    with sync_engine(db_path).connect() as conn:
        hashes = conn.execute(sa.select(tenants.c.api_key_hash)).scalars().all()
    key = re.findall(r"csk_[A-Za-z0-9_-]+", first)[0]
    assert hashes == [hashlib.sha256(key.encode()).hexdigest()], "the first key still works"


def test_tenants_create_rejects_a_bad_name(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tenants", "create", "Not A Name"]) == 2
    assert "lower case" in capsys.readouterr().err


# --- audit -------------------------------------------------------------------------------------


def test_audit_verify_clean_and_after_an_edit(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate"]) == 0
    assert main(["audit", "verify"]) == 0, "an empty database verifies"
    assert "0 events" in capsys.readouterr().out
    ids = populate(db_path)
    assert main(["audit", "verify"]) == 0
    assert "audit OK" in capsys.readouterr().out
    with sync_engine(db_path).begin() as conn:
        conn.execute(
            audit_events.update()
            .where(sa.and_(audit_events.c.approval_id == ids[0], audit_events.c.seq == 1))
            .values(data=json.dumps({"parameters": {}}))
        )
    assert main(["audit", "verify"]) == 1
    captured = capsys.readouterr()
    assert f"BROKEN {ids[0]} seq 1" in captured.out
    assert ids[1] not in captured.out
    assert "1 problem" in captured.err


def test_audit_verify_after_a_deletion(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = populate(db_path)
    with sync_engine(db_path).begin() as conn:
        conn.execute(audit_events.delete().where(audit_events.c.approval_id == ids[1]))
    assert main(["audit", "verify"]) == 1
    assert f"BROKEN {ids[1]}" in capsys.readouterr().out


def _export(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, Any]]:
    assert main(["audit", "export", *args]) == 0
    out = capsys.readouterr().out
    return [json.loads(line) for line in out.splitlines()]


def test_audit_export_prints_json_lines(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = populate(db_path)
    with sync_engine(db_path).connect() as conn:
        total = conn.execute(sa.select(sa.func.count()).select_from(audit_events)).scalar_one()
        ats = sorted(set(conn.execute(sa.select(audit_events.c.at)).scalars()))
    everything = _export(capsys)
    assert len(everything) == total >= 4
    assert {e["approvalId"] for e in everything} == set(ids)
    assert all({"seq", "at", "event", "actor", "data", "hash", "prevHash"} <= set(e) for e in everything)
    assert [e["at"] for e in everything] == sorted(e["at"] for e in everything)
    assert "tok_secret_cli" not in json.dumps(everything), "the export is redacted"
    assert _export(capsys, "--since", "2000-01-01T00:00:00Z") == everything
    assert _export(capsys, "--since", "2999-01-01T00:00:00Z") == []
    assert len(ats) >= 2
    middle = datetime.fromtimestamp((ats[0] + ats[1]) / 2, UTC).isoformat()
    later = _export(capsys, "--since", middle)
    assert later and all(e["at"] > ats[0] for e in later)
    assert len(later) == sum(1 for e in everything if e["at"] > ats[0])


def test_audit_export_rejects_a_bad_since(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "export", "--since", "last tuesday"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --since 'last tuesday'") and "ISO 8601" in err and err.count("\n") == 1


def test_audit_show(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = populate(db_path)
    assert main(["audit", "show", ids[0]]) == 0
    out = capsys.readouterr().out
    assert "requested" in out and "denied" in out
    assert main(["audit", "show", "apv_nope"]) == 2
    assert capsys.readouterr().err.startswith("error: no audit events for 'apv_nope'")


# --- migrate ---------------------------------------------------------------------------------


def test_migrate_creates_a_fresh_database(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert not db_path.exists()
    assert main(["migrate"]) == 0
    first = capsys.readouterr().out
    assert re.search(r"database is at revision \S+", first) and "None" not in first
    with sync_engine(db_path).connect() as conn:
        names = set(sa.inspect(conn).get_table_names())
    assert {"tenants", "approvals", "audit_events"} <= names
    assert main(["migrate"]) == 0, "migrating again is a no-op"
    assert capsys.readouterr().out == first


def test_bad_database_url_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COSIGNER_DATABASE_URL", "mysql://nope")
    assert main(["migrate"]) == 2
    assert "sqlite+aiosqlite" in capsys.readouterr().err

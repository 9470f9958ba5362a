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

from bot.approvals.grants import callback_secret
from bot.cli import main
from storage.database import Database
from storage.tables import api_keys, audit_events, tenants
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
                    headers=h.auth(h.approver_of(key)),
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


def test_policy_check_of_the_sandbox_policy_names_every_unset_variable_in_one_run(
    db_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sample = str(REPO / "bot" / "dev" / "sandbox_policy.toml")
    for name in ("COSIGNER_DEMO_ORDERS_SECRET", "APP_EXPECT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    assert main(["policy", "check", sample]) == 2
    err = capsys.readouterr().err
    assert "2 problem" in err
    assert re.search(
        r"^\s+tools\.publish_changes\.handoff\.expect\.secret_env: .*APP_EXPECT_SECRET", err, re.M
    )
    assert re.search(
        r'^\s+operations\."order\.refund_missing_discount"\.secret_env: .*COSIGNER_DEMO', err, re.M
    )
    # Set as docs/sandbox.md says: the file is sound.
    monkeypatch.setenv("COSIGNER_DEMO_ORDERS_SECRET", "x")
    monkeypatch.setenv("APP_EXPECT_SECRET", "x")
    assert main(["policy", "check", sample]) == 0
    assert "OK" in capsys.readouterr().out


def test_policy_check_of_a_missing_file(
    tmp_path: Path, db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["policy", "check", str(tmp_path / "nope.toml")]) == 2
    assert "nope.toml" in capsys.readouterr().err


# --- tenants -----------------------------------------------------------------------------------


AGENT_LINE = re.compile(r"^agent key \(.*id (key_[0-9a-f]+)\): (csk_[A-Za-z0-9_-]+)$", re.M)
APPROVER_LINE = re.compile(r"^approver key \(.*id (key_[0-9a-f]+)\): (csa_[A-Za-z0-9_-]+)$", re.M)


def key_hashes(path: Path) -> dict[str, tuple[str, str]]:
    """The stored keys: hash -> (scope, id)."""
    with sync_engine(path).connect() as conn:
        return {r.key_hash: (r.scope, r.id) for r in conn.execute(sa.select(api_keys))}


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def scoped_answers(path: Path, agent: str, approver: str) -> dict[str, int]:
    """What the real API answers each key on the CLI's database: ask, decide, list denies."""

    async def go() -> dict[str, int]:
        db = Database(f"sqlite+aiosqlite:///{path}")
        try:
            async with cosigner_app(db=db) as h:
                call = {
                    "executionId": "run_1",
                    "toolCallId": "c1",
                    "toolName": "issue_refund",
                    "parameters": {"orderId": "o1"},
                    "surface": {"type": "dashboard", "userId": "u_1"},
                }
                got: dict[str, int] = {}
                asked = await h.client.post("/v1/approvals", json=call, headers=h.auth(approver))
                got["approver asks"] = asked.status_code
                asked = await h.client.post("/v1/approvals", json=call, headers=h.auth(agent))
                got["agent asks"] = asked.status_code
                decision = f"/v1/approvals/{asked.json()['approvalId']}/decision"
                body = {"decision": "deny", "userId": "u_1"}
                for who, key in (("agent", agent), ("approver", approver)):
                    got[f"{who} decides"] = (
                        await h.client.post(decision, json=body, headers=h.auth(key))
                    ).status_code
                    got[f"{who} lists"] = (await h.client.get("/v1/denials", headers=h.auth(key))).status_code
                return got
        finally:
            await db.close()

    result: dict[str, int] = asyncio.run(go())
    return result


def test_tenants_create_prints_a_labelled_agent_key_and_approver_key_once(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tenants", "create", "acme"]) == 0
    out = capsys.readouterr().out
    ((agent_id, agent),) = AGENT_LINE.findall(out)
    ((approver_id, approver),) = APPROVER_LINE.findall(out)
    assert out.count(agent) == 1 and out.count(approver) == 1
    assert callback_secret(SECRET, "acme") in out
    with sync_engine(db_path).connect() as conn:
        assert [r.name for r in conn.execute(sa.select(tenants))] == ["acme"]
    assert key_hashes(db_path) == {sha(agent): ("agent", agent_id), sha(approver): ("approver", approver_id)}
    stored = db_path.read_bytes()
    assert agent.encode() not in stored and approver.encode() not in stored, "only hashes are stored"
    assert scoped_answers(db_path, agent, approver) == {
        "approver asks": 403,
        "agent asks": 201,
        "agent decides": 403,
        "agent lists": 403,
        "approver decides": 200,
        "approver lists": 200,
    }
    assert main(["tenants", "list"]) == 0
    assert capsys.readouterr().out.split() == ["acme"]


def test_tenants_create_twice_fails_clearly(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tenants", "create", "acme"]) == 0
    first = capsys.readouterr().out
    assert main(["tenants", "create", "acme"]) == 2
    captured = capsys.readouterr()
    assert "already exists" in captured.err and "tenants key create acme" in captured.err
    assert "csk_" not in captured.out and "csa_" not in captured.out
    ((_, agent),) = AGENT_LINE.findall(first)
    ((_, approver),) = APPROVER_LINE.findall(first)
    assert set(key_hashes(db_path)) == {sha(agent), sha(approver)}, "the first keys still work"


def test_tenants_key_create_adds_a_scoped_key_and_revoke_removes_it(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tenants", "create", "acme"]) == 0
    ((agent_id, agent),) = AGENT_LINE.findall(capsys.readouterr().out)
    assert main(["tenants", "key", "create", "acme", "--scope", "approver"]) == 0
    out = capsys.readouterr().out
    ((key_id, second),) = re.findall(r"approver key \(.*id (key_[0-9a-f]+)\): (csa_[A-Za-z0-9_-]+)", out)
    assert out.count(second) == 1 and key_hashes(db_path)[sha(second)] == ("approver", key_id)
    assert scoped_answers(db_path, agent, second)["approver decides"] == 200
    assert main(["tenants", "key", "revoke", "acme", key_id]) == 0
    assert f"revoked {key_id}" in capsys.readouterr().out
    assert sha(second) not in key_hashes(db_path)
    assert scoped_answers(db_path, agent, second)["approver decides"] == 401
    assert main(["tenants", "key", "revoke", "acme", key_id]) == 2
    assert "has no key" in capsys.readouterr().err
    assert main(["tenants", "key", "revoke", "globex", agent_id]) == 2, "another tenant's id revokes nothing"
    assert sha(agent) in key_hashes(db_path)
    assert main(["tenants", "key", "create", "nobody", "--scope", "agent"]) == 2
    assert "no tenant 'nobody'" in capsys.readouterr().err


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

"""`cosigner denials list` and `cosigner denials lift` on the database file a server used."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from contracts.enums import KeyScope
from storage.database import Database
from tests.harness import cosigner_app

SECRET = "cli-test-secret-" + "s" * 32
U1 = {"type": "dashboard", "userId": "u_1"}


@pytest.fixture
def db_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "c.db"
    monkeypatch.setenv("COSIGNER_DATABASE_URL", f"sqlite+aiosqlite:///{path}")
    monkeypatch.setenv("COSIGNER_SECRET", SECRET)
    monkeypatch.delenv("COSIGNER_POLICY", raising=False)
    return path


def call(call_id: str) -> dict[str, Any]:
    return {
        "executionId": "run_1",
        "toolCallId": call_id,
        "toolName": "issue_refund",
        "parameters": {"orderId": "o1", "amountCents": 12900},
        "surface": U1,
    }


def serve(path: Path, step: Any) -> Any:
    """Run `step(harness, key)` against an app on the database file (a server's lifetime)."""

    async def go() -> Any:
        db = Database(f"sqlite+aiosqlite:///{path}")
        await db.migrate()
        try:
            async with cosigner_app(db=db) as h:
                return await step(h)
        finally:
            await db.close()

    return asyncio.run(go())


async def set_one(h: Any) -> str:
    key = await h.create_tenant("acme")
    await h.create_tenant("globex")
    r = await h.client.post("/v1/approvals", json=call("c1"), headers=h.auth(key))
    decided = await h.client.post(
        f"/v1/approvals/{r.json()['approvalId']}/decision",
        json={"decision": "always_deny", "userId": "u_1"},
        headers=h.auth(h.approver_of(key)),
    )
    assert decided.status_code == 200, decided.text
    return str(key)


def test_the_operator_lists_and_lifts_a_standing_deny(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = serve(db_path, set_one)
    assert main(["denials", "list"]) == 0
    (listed,) = capsys.readouterr().out.splitlines()
    denial_id = listed.split()[0]
    assert denial_id.startswith("den_")
    assert "acme  issue_refund  set by dashboard:u_1  for runs of dashboard:u_1" in listed
    assert main(["denials", "list", "--tenant", "globex"]) == 0
    assert capsys.readouterr().out == "no standing denies in force\n"
    assert main(["denials", "list", "--tenant", "nope"]) == 2
    assert "no tenant 'nope'" in capsys.readouterr().err

    assert main(["denials", "lift", denial_id]) == 0
    assert f"lifted {denial_id}" in capsys.readouterr().out
    assert main(["denials", "lift", "den_" + "x" * 20]) == 2
    assert "DENIAL_NOT_FOUND" not in (err := capsys.readouterr().err) and "no standing deny" in err
    assert main(["denials", "list"]) == 0
    assert capsys.readouterr().out == "no standing denies in force\n"

    async def asked_again(h: Any) -> None:
        r = await h.client.post("/v1/approvals", json=call("c2"), headers=h.auth(key))
        assert r.status_code == 201, r.text
        approver = (await h.parts.keys.add_key("acme", KeyScope.APPROVER)).key
        listed = (await h.client.get("/v1/denials", headers=h.auth(approver))).json()
        assert listed == {"denials": []}

    serve(db_path, asked_again)

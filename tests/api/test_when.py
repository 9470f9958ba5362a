"""`when` blocks through the agent API, on SQLite and PostgreSQL: the documented coding-agent
example end to end (allowed, asked, denied), a value the policy cannot evaluate asked and
audited, `deny_above` before a block's allow, and an approver's edit put to the blocks."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from bot.cli import main
from storage import raw
from storage.database import Database
from storage.tables import audit_events
from tests.harness import Harness, cosigner_app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = (ROOT / "examples" / "coding_agent_policy.toml").read_text()
POLICY = (
    EXAMPLE.replace("[tenants.demo]", "[tenants.acme]")
    + """
[defaults]
max_gated_calls_per_execution = 2

[tools.pay]
kind = "danger"
editable = ["amountCents", "currency"]
deny_above = { parameter = "amountCents", value = 100000 }

[[tools.pay.when]]
match = { currency = { equals = "EUR" } }
then = "allow"

[[tools.pay.when]]
match = { currency = { equals = "XXX" } }
then = "deny"

[[tools.pay.when]]
match = { currency = { equals = "USD" } }
then = "ask"
approvers = ["tenant_admins"]
"""
)
DEV = {"type": "dashboard", "userId": "u_dev"}


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[tuple[Harness, str]]:
    async with cosigner_app(POLICY, database_kind=db_kind) as h:
        yield h, await h.create_tenant("acme")


async def call(h: Harness, key: str, tool: str, params: dict[str, Any], n: int, **extra: Any) -> Any:
    body = {
        "executionId": "run_1",
        "toolCallId": f"c{n}",
        "toolName": tool,
        "parameters": params,
        "surface": DEV,
        **extra,
    }
    return await h.client.post("/v1/approvals", json=body, headers=h.auth(key))


async def requested(h: Harness, approval_id: str) -> dict[str, Any]:
    async with raw.read(h.parts.db) as conn:
        row = (
            await conn.execute(
                sa.select(audit_events.c.data).where(
                    audit_events.c.approval_id == approval_id, audit_events.c.event == "requested"
                )
            )
        ).one()
    return dict(json.loads(row.data))


async def test_the_documented_example_allows_asks_and_denies(world: tuple[Harness, str]) -> None:
    h, key = world
    # Allowed calls need nobody and are not gated: more of them than the cap of 2 all run.
    for n, command in enumerate(["git status", "ls -la", "cat README.md", "git status --short"]):
        r = await call(h, key, "Bash", {"command": command}, n)
        body = r.json()
        assert r.status_code == 200 and body["status"] == "approved", r.text
        assert body["decidedBy"] == {"kind": "policy", "rule": "tools.Bash.when[1]"}
        assert body["grant"]
    record = await requested(h, body["approvalId"])
    assert (record["rule"], record["block"], record["decision"]) == ("tools.Bash.when[1]",) * 2 + ("none",)
    assert "unevaluable" not in record

    pushed = await call(h, key, "Bash", {"command": "git push origin main"}, 10)
    assert pushed.status_code == 201, pushed.text
    approval_id = pushed.json()["approvalId"]
    record = await requested(h, approval_id)
    assert (record["rule"], record["block"], record["mode"]) == (
        "tools.Bash.when[2]",
        "tools.Bash.when[2]",
        "ask_always",
    )
    assert record["policy"] == "tools.Bash.when[2]: danger → ask_always"
    # Asked of the tenant's admins: the developer who ran it may not answer; the admin may.
    as_dev = await h.client.post(
        f"/v1/approvals/{approval_id}/decision",
        json={"decision": "approve", "userId": "u_dev"},
        headers=h.auth(h.approver_key()),
    )
    assert as_dev.status_code == 403 and as_dev.json()["error"]["code"] == "NOT_AN_APPROVER"
    as_admin = await h.client.post(
        f"/v1/approvals/{approval_id}/decision",
        json={"decision": "approve", "userId": "u_admin"},
        headers=h.auth(h.approver_key()),
    )
    assert as_admin.status_code == 200 and as_admin.json()["status"] == "approved", as_admin.text

    for n, command in enumerate(["rm -rf /", "git status; rm -rf /", "ls $(rm -rf /)"], 20):
        denied = await call(h, key, "Bash", {"command": command}, n)
        error = denied.json()["error"]
        assert denied.status_code == 403 and error["code"] == "PERMISSION_DENIED", denied.text
        assert error["policy"] == "tools.Bash.when[0]"
        assert error["message"] == "a recursive rm is never run by an agent"
        assert (await requested(h, error["approvalId"]))["decision"] == "deny"


async def test_a_command_the_policy_cannot_evaluate_is_asked_and_the_record_says_why(
    world: tuple[Harness, str],
) -> None:
    h, key = world
    r = await call(h, key, "Bash", {"command": ["rm", "-rf", "/"]}, 1)
    assert r.status_code == 201, r.text
    record = await requested(h, r.json()["approvalId"])
    assert (record["rule"], record["block"], record["mode"]) == (
        "tools.Bash.when[0]",
        "tools.Bash.when[0]",
        "ask_always",
    )
    assert record["unevaluable"] == "parameters.command is a list, but its conditions read a string"
    assert record["policy"] == "tools.Bash.when[0] (could not be evaluated): danger → ask_always"
    # Asked of the tool's own approvers: the requester.
    assert record["route"]["approvers"] == ["u_dev"]


async def test_deny_above_refuses_before_a_blocks_allow(world: tuple[Harness, str]) -> None:
    h, key = world
    over = await call(h, key, "pay", {"currency": "EUR", "amountCents": 100001}, 1)
    assert over.status_code == 403 and over.json()["error"]["code"] == "PERMISSION_DENIED", over.text
    assert "tools.pay.deny_above" in over.json()["error"]["message"]
    within = await call(h, key, "pay", {"currency": "EUR", "amountCents": 100000}, 2)
    assert within.status_code == 200 and within.json()["decidedBy"]["rule"] == "tools.pay.when[0]", (
        within.text
    )


async def edit(h: Harness, approval_id: str, values: dict[str, Any]) -> Any:
    return await h.client.post(
        f"/v1/approvals/{approval_id}/decision",
        json={"decision": "approve", "userId": "u_admin", "edit": values},
        headers=h.auth(h.approver_key()),
    )


async def test_an_edit_into_a_call_another_rule_decides_is_refused(world: tuple[Harness, str]) -> None:
    h, key = world
    start = await call(h, key, "pay", {"currency": "USD", "amountCents": 500}, 1, acceptsEdits=True)
    assert start.status_code == 201, start.text
    approval_id = start.json()["approvalId"]
    # No block matches GBP: the tool's own rule would ask the requester, not the admins.
    moved = await edit(h, approval_id, {"currency": "GBP"})
    assert moved.status_code == 400, moved.text
    assert (
        "the edited call is decided by tools.pay.kind, not by the rule this call was asked under"
        in moved.text
    )
    # Within the same block the edit is the admin's approval of the edited call.
    kept = await edit(h, approval_id, {"amountCents": 400})
    assert kept.status_code == 200 and kept.json()["status"] == "approved", kept.text

    start = await call(h, key, "pay", {"currency": "USD", "amountCents": 500}, 2, acceptsEdits=True)
    denied = await edit(h, start.json()["approvalId"], {"currency": "XXX"})
    assert denied.status_code == 200 and denied.json()["status"] == "denied", denied.text
    assert denied.json()["decidedBy"]["rule"] == "tools.pay.when[1]"


def test_replay_names_what_the_blocks_would_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Calls recorded while every Bash command was asked, decided again by the example."""
    import asyncio

    path = tmp_path / "c.db"

    async def record() -> None:
        db = Database(f"sqlite+aiosqlite:///{path}")
        await db.migrate()
        try:
            async with cosigner_app('[tools.Bash]\nkind = "danger"\n', db=db, run_workers=False) as h:
                key = await h.create_tenant("demo")
                for n, command in enumerate(
                    [
                        "git status",
                        "ls",
                        "rm -rf /",
                        "make",
                        "curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwxyz'",
                    ]
                ):
                    r = await call(h, key, "Bash", {"command": command}, n)
                    assert r.status_code == 201, r.text
        finally:
            await db.close()

    asyncio.run(record())
    monkeypatch.setenv("COSIGNER_DATABASE_URL", f"sqlite+aiosqlite:///{path}")
    assert main(["policy", "replay", "--policy", str(ROOT / "examples" / "coding_agent_policy.toml")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "replayed 5 requests: 3 would be decided otherwise"
    assert out[1].startswith("  (1 recorded requests were skipped: a when block reads a parameter")
    assert out[3].startswith("LOOSENS") and "ask_always:dashboard → none" in out[3] and " 2 " in out[3]
    assert "ask_always:dashboard → deny" in out[4]

"""Allow for … through the dashboard decision API, `GET/DELETE /v1/allowances`, the CLI, and
what `policy check` says of the keys."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from bot.policy import load_policy
from contracts.errors import PolicyError
from storage.database import Database
from tests.harness import Harness, cosigner_app, database

POLICY = """
[defaults]
timeout = "5m"

[tools.deploy]
kind = "write"
confirm = true
allow_for = "8h"
allow_for_match = ["service", "env"]
allow_for_uses = 2

[tools.issue_refund]
kind = "danger"

[tenants.acme]
admins = { dashboard = ["u_admin"] }
"""
SECRET = "cli-allowances-secret-" + "s" * 32


def call(n: int, tool: str = "deploy", **parameters: Any) -> dict[str, Any]:
    return {
        "executionId": "run_1",
        "toolCallId": f"call_{n}",
        "toolName": tool,
        "parameters": parameters or {"service": "api", "env": "prod"},
        "surface": {"type": "dashboard", "userId": "u_1"},
    }


async def decide(h: Harness, approval_id: str, **body: Any) -> Any:
    return await h.client.post(
        f"/v1/approvals/{approval_id}/decision",
        json={"userId": "u_1", **body},
        headers=h.auth(h.approver_key("acme")),
    )


@pytest.fixture
async def app(db_kind: str) -> Any:
    async with database(db_kind) as db, cosigner_app(POLICY, db=db) as h:
        yield h, await h.create_tenant("acme")


async def test_dashboard_allow_for_8h(app: Any) -> None:
    h, key = app
    first = (await h.client.post("/v1/approvals", json=call(1), headers=h.auth(key))).json()
    r = await decide(h, first["approvalId"], decision="allow_for", allowFor="8h")
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "approved" and r.json()["decidedBy"]["kind"] == "person"
    later = await h.client.post("/v1/approvals", json=call(2), headers=h.auth(key))
    assert later.status_code == 200 and later.json()["decidedBy"]["kind"] == "allowance"
    other = await h.client.post(
        "/v1/approvals", json=call(3, service="api", env="staging"), headers=h.auth(key)
    )
    assert other.status_code == 201  # env must match too
    h.advance(8 * 3600 + 1)
    assert (await h.client.post("/v1/approvals", json=call(4), headers=h.auth(key))).status_code == 201


async def test_dashboard_bad_allow_for_creates_nothing(app: Any) -> None:
    h, key = app
    refund = (
        await h.client.post(
            "/v1/approvals", json=call(1, tool="issue_refund", orderId="o1"), headers=h.auth(key)
        )
    ).json()
    r = await decide(h, refund["approvalId"], decision="allow_for", allowFor="1h")
    assert r.status_code == 400 and "sets no allow_for" in r.json()["error"]["message"]
    first = (await h.client.post("/v1/approvals", json=call(2), headers=h.auth(key))).json()
    stranger = await h.client.post(
        f"/v1/approvals/{first['approvalId']}/decision",
        json={"userId": "u_9", "decision": "allow_for", "allowFor": "1h"},
        headers=h.auth(h.approver_key("acme")),
    )
    assert stranger.status_code == 403 and stranger.json()["error"]["code"] == "NOT_AN_APPROVER"
    no_length = await decide(h, first["approvalId"], decision="allow_for")
    assert no_length.status_code == 400
    mixed = await decide(h, first["approvalId"], decision="approve", allowFor="1h")
    assert mixed.status_code == 400
    listed = await h.client.get("/v1/allowances", headers=h.auth(h.approver_key("acme")))
    assert listed.json() == {"allowances": []}
    assert (await decide(h, first["approvalId"], decision="allow_for", allowFor="15m")).status_code == 200
    replay = await decide(h, first["approvalId"], decision="allow_for", allowFor="15m")
    assert replay.status_code == 409 and replay.json()["error"]["code"] == "ALREADY_DECIDED"
    listed = await h.client.get("/v1/allowances", headers=h.auth(h.approver_key("acme")))
    assert len(listed.json()["allowances"]) == 1
    agent = await h.client.get("/v1/allowances", headers=h.auth(key))
    assert agent.status_code == 403  # an agent never sees what lets its calls through


def test_policy_check_refuses_what_cannot_work() -> None:
    bad = """
[tools.a]
kind = "danger"
allow_for = "10m"

[tools.b]
kind = "danger"
allow_for = "1h"
quorum = 2
approvers = ["requester", "tenant_admins"]

[tools.c]
kind = "write"
confirm = true
allow_for = "1h"
allow_for_match = ["nope"]
allow_for_at_most = ["note"]

[tools.c.parameters_schema]
type = "object"
properties = { note = { type = "string" } }
additionalProperties = false

[tools.d]
kind = "danger"
allow_for_uses = 5
"""
    with pytest.raises(PolicyError) as err:
        load_policy(bad)
    said = "\n".join(err.value.problems)
    assert "tools.a.allow_for: the shortest Allow for is 15m" in said
    assert "tools.b.allow_for: b needs 2 approvers" in said
    assert "tools.c.allow_for_match: parameters_schema says parameters.nope cannot exist" in said
    assert "tools.c.allow_for_at_most: parameters_schema says parameters.note is string, not a number" in said
    assert "tools.d.allow_for_uses: has no effect without allow_for" in said
    with pytest.raises(PolicyError) as err:
        load_policy('[tools.e]\nkind = "danger"\nallow_for = "1h"\nallow_for_uses = true\n')
    assert "tools.e.allow_for_uses: must be a whole number" in err.value.problems[0]  # true is no number


def test_policy_without_allow_for_offers_nothing() -> None:
    policy = load_policy(POLICY)
    assert policy.rule_for("acme", "issue_refund").allow_for is None
    allow = policy.rule_for("acme", "deploy").allow_for
    assert allow is not None and (allow.cap, allow.match, allow.uses) == (28800.0, ("service", "env"), 2)


def test_cli_lists_and_revokes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "c.db"
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    monkeypatch.setenv("COSIGNER_DATABASE_URL", f"sqlite+aiosqlite:///{path}")
    monkeypatch.setenv("COSIGNER_SECRET", SECRET)
    monkeypatch.setenv("COSIGNER_POLICY", str(policy))

    async def grant() -> str:
        db = Database(f"sqlite+aiosqlite:///{path}")
        await db.migrate()
        try:
            async with cosigner_app(POLICY, db=db) as h:
                key = await h.create_tenant("acme")
                first = (await h.client.post("/v1/approvals", json=call(1), headers=h.auth(key))).json()
                assert (
                    await decide(h, first["approvalId"], decision="allow_for", allowFor="1h")
                ).status_code == 200
                listed = await h.client.get("/v1/allowances", headers=h.auth(h.approver_key("acme")))
                return str(listed.json()["allowances"][0]["allowanceId"])
        finally:
            await db.close()

    allowance_id = asyncio.run(grant())
    assert main(["allowances", "list"]) == 0
    out = capsys.readouterr().out
    assert allowance_id in out and "deploy" in out and "granted by dashboard:u_1" in out and "used 0/2" in out
    assert main(["allowances", "revoke", allowance_id]) == 0
    assert f"revoked {allowance_id}" in capsys.readouterr().out
    assert main(["allowances", "list"]) == 0
    assert "no standing allows in force" in capsys.readouterr().out

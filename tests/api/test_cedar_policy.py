"""The agent API on a Cedar policy: the agent's key is the principal, and a call is allowed,
asked or refused as the Cedar policies say (real app over httpx's ASGI transport, SQLite)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.harness import cosigner_app, database

SCHEMA = """namespace Cosigner {
  entity Tenant;
  entity Agent in [Tenant];
  entity Tool;
  type Context = {
    parameters: { amountCents?: Long },
    surface: String,
    requester: String,
    time: Long,
  };
  action "call", "operation" appliesTo { principal: [Agent], resource: [Tool], context: Context };
}
"""

POLICIES = """@id("mine")
permit (principal == Cosigner::Agent::"{KEY_ID}", action, resource == Cosigner::Tool::"whoami");

@id("refunds")
@approval("ask_always")
permit (principal in Cosigner::Tenant::"acme", action, resource == Cosigner::Tool::"issue_refund");

@id("tips")
permit (principal, action, resource == Cosigner::Tool::"tip")
when { context.parameters has amountCents && context.parameters.amountCents < 100 };

@id("deletes")
@reason("accounts are deleted by the support team")
forbid (principal, action, resource == Cosigner::Tool::"delete_account");
"""

DASH = {"type": "dashboard", "userId": "u_1"}


def call(tool: str, call_id: str, params: dict[str, Any]) -> dict[str, Any]:
    return {
        "executionId": "run_1",
        "toolCallId": call_id,
        "toolName": tool,
        "parameters": params,
        "surface": DASH,
    }


async def test_cedar_allows_asks_and_refuses_with_the_agent_key_as_principal(tmp_path: Path) -> None:
    async with database("sqlite") as db:
        async with cosigner_app(db=db) as h:
            key = await h.create_tenant("acme")
            other = await h.create_tenant("globex")
            key_id = (await h.parts.keys.resolve(f"Bearer {key}")).key_id
        (tmp_path / "agents.cedar").write_text(POLICIES.replace("{KEY_ID}", key_id), encoding="utf-8")
        (tmp_path / "agents.cedarschema").write_text(SCHEMA, encoding="utf-8")
        toml = f'[cedar]\npolicies = "{tmp_path / "agents.cedar"}"\n\n'
        toml += '[tenants.acme]\nadmins = { dashboard = ["u_admin"] }\n'
        async with cosigner_app(toml, db=db) as h:
            mine = await h.client.post("/v1/approvals", headers=h.auth(key), json=call("whoami", "c1", {}))
            assert mine.status_code == 200, mine.text
            assert mine.json()["status"] == "approved"
            assert mine.json()["decidedBy"] == {"kind": "policy", "rule": "agents.cedar#mine"} | {
                k: v for k, v in mine.json()["decidedBy"].items() if k not in ("kind", "rule")
            }
            # Another tenant's key is another principal: no permit, so a person is asked.
            theirs = await h.client.post(
                "/v1/approvals", headers=h.auth(other), json=call("whoami", "c1", {})
            )
            assert theirs.status_code == 201, theirs.text
            asked = await h.client.post(
                "/v1/approvals", headers=h.auth(key), json=call("issue_refund", "c2", {"amountCents": 500})
            )
            assert asked.status_code == 201, asked.text
            refused = await h.client.post(
                "/v1/approvals", headers=h.auth(key), json=call("delete_account", "c3", {})
            )
            assert refused.status_code == 403
            err = refused.json()["error"]
            assert (err["code"], err["policy"]) == ("PERMISSION_DENIED", "agents.cedar#deletes")
            assert "support team" in err["message"]
            tip = await h.client.post(
                "/v1/approvals", headers=h.auth(key), json=call("tip", "c4", {"amountCents": 50})
            )
            assert tip.status_code == 200, tip.text
            # A fraction Cedar cannot type: asked, never allowed.
            odd = await h.client.post(
                "/v1/approvals", headers=h.auth(key), json=call("tip", "c5", {"amountCents": 1.5})
            )
            assert odd.status_code == 201, odd.text

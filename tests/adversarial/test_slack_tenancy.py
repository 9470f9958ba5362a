"""An agent must not widen who may decide its request by naming another tenant's Slack org."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from surfaces.slack.emulator import SlackEmulator
from tests.databases import DESK, SLACK_STATE, postgres_elsewhere
from tests.harness import Harness, press, slack_app, until

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK, SLACK_STATE)

SECRET = "adversarial-signing-secret"
APP_ID = "A0COSIGNER"
POLICY = """
[tools.issue_refund]
kind = "danger"

[tenants.acme]
slack_team = "T0ACME"

[tenants.globex]
slack_enterprise = "E0GLOBEX"
"""


@pytest.fixture
async def world(db_kind: str) -> AsyncIterator[tuple[Harness, SlackEmulator, str]]:
    async with slack_app(POLICY, secret=SECRET, app_id=APP_ID, database_kind=db_kind) as (h, emu):
        await h.create_tenant("globex")
        yield h, emu, await h.create_tenant("acme")


async def test_an_agent_naming_another_tenants_enterprise_is_refused(world: Any) -> None:
    """acme owns only workspace T0ACME. Its agent adds globex's Enterprise Grid id to the
    surface, routes the card to a globex channel and names a globex user as requester: a
    click from globex's org must never decide acme's request (nor may the request be made)."""
    h, emu, key = world
    body = {
        "executionId": "run_1",
        "toolCallId": "c1",
        "toolName": "issue_refund",
        "parameters": {"amountCents": 990000},
        "surface": {
            "type": "slack",
            "teamId": "T0ACME",
            "enterpriseId": "E0GLOBEX",
            "channelId": "C0GLOBEX",
            "userId": "W0GLOBEX",
        },
    }
    r = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
    if r.status_code != 201:
        assert r.status_code == 403, r.text
        assert r.json()["error"]["code"] == "WRONG_TENANT"
        assert r.json()["error"]["field"] == "surface.enterpriseId"
        return
    approval_id = r.json()["approvalId"]
    (card,) = await until(lambda: [m for m in emu.messages if m.method == "chat.postMessage"])
    await h.delivered(approval_id)
    await press(
        h.client,
        card,
        secret=SECRET,
        app_id=APP_ID,
        user="W0GLOBEX",
        user_team="T0GLOBEX1",
        team="T0GLOBEX1",
        enterprise="E0GLOBEX",
    )
    got = await h.client.get(f"/v1/approvals/{approval_id}", headers=h.auth(key))
    assert got.json()["status"] == "pending", "a person of another tenant decided acme's request"


async def test_admit_refuses_another_tenants_enterprise_too(world: Any) -> None:
    h, _, key = world
    r = await h.client.post(
        "/v1/runs/admit",
        headers=h.auth(key),
        json={
            "executionId": "run_1",
            "tools": ["issue_refund"],
            "surface": {
                "type": "slack",
                "teamId": "T0ACME",
                "enterpriseId": "E0GLOBEX",
                "channelId": "C0GLOBEX",
                "userId": "W0GLOBEX",
            },
        },
    )
    assert r.status_code == 403, r.text
    assert r.json()["error"]["code"] == "WRONG_TENANT"

"""A Cosigner app whose Teams surface talks to a fresh Teams emulator, on one manual clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from contracts.ports import ApprovalDesk
from surfaces.teams import ClientCertificate, TeamsAdapter, TeamsConfig
from surfaces.teams.emulator import Posted, TeamsEmulator
from tests.harness import Harness, ManualClock, cosigner_app, until

APP_ID = "00000000-0000-4000-8000-00000000a001"
PASSWORD = "emulated-app-password"
HOME = "00000000-0000-4000-8000-0000000000f0"  # the bot's home tenant
AAD = "72f988bf-86f1-41af-91ab-2d7cd011db47"  # acme's Microsoft Entra tenant
OTHER_AAD = "11111111-2222-4333-8444-555555555555"
ALICE = "aaaaaaaa-0000-4000-8000-000000000001"  # the requester
ADMIN = "aaaaaaaa-0000-4000-8000-0000000000ad"
MALLORY = "aaaaaaaa-0000-4000-8000-0000000000ee"
CONVERSATION = "19:acme-ops@thread.tacv2"

POLICY = f"""
[defaults]
timeout = "5m"

[tools.issue_refund]
kind = "danger"
approvers = ["requester", "tenant_admins"]

[tools.issue_credit]
kind = "write"
confirm = true

[tenants.acme]
teams_tenant = "{AAD}"
admins = {{ teams = ["{ADMIN}"] }}
"""


@asynccontextmanager
async def teams_app(
    db_kind: str = "sqlite", policy: str = POLICY, certificate: ClientCertificate | None = None
) -> AsyncIterator[tuple[Harness, TeamsEmulator]]:
    """A started app with the Teams surface on an emulator: yields (harness, emulator). With
    `certificate` the app proves itself with it (the emulator trusts it) instead of a password."""
    clock = ManualClock()
    async with TeamsEmulator.running(
        app_id=APP_ID, app_password=PASSWORD, tenant_id=HOME, clock=clock
    ) as emu:
        if certificate is not None:
            emu.trust_certificate(certificate.der)
        config = TeamsConfig(
            app_id=APP_ID,
            app_password=None if certificate else PASSWORD,
            app_tenant_id=HOME,
            api_url=emu.api_url,
            clock=clock,
            certificate=certificate,
        )

        def factory(desk: ApprovalDesk) -> TeamsAdapter:
            return TeamsAdapter(config, desk)

        async with cosigner_app(policy, surfaces=[factory], database_kind=db_kind, clock=clock) as h:
            yield h, emu


async def request(
    h: Harness, key: str, call: str = "call_7", tool: str = "issue_refund", **surface: Any
) -> str:
    """Ask for approval of a call from Alice's Teams conversation; the approval id."""
    body = {
        "executionId": "run_81",
        "toolCallId": call,
        "toolName": tool,
        "parameters": {
            "orderId": "ord_4421",
            "amountCents": 12900,
            "note": "**bold** [link](https://x.test)",
        },
        "reason": "Customer says the discount was not applied",
        "surface": {
            "type": "teams",
            "tenantId": AAD,
            "conversationId": CONVERSATION,
            "userId": ALICE,
            **surface,
        },
    }
    response = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
    assert response.status_code == 201, response.text
    return str(response.json()["approvalId"])


async def posted(h: Harness, emu: TeamsEmulator, approval_id: str) -> Posted:
    """The card of an approval once its delivery receipt is stored."""
    await h.delivered(approval_id)
    cards: list[Posted] = await until(lambda: [p for p in emu.cards() if approval_id in str(p.versions[0])])
    return cards[0]


async def state(h: Harness, key: str, approval_id: str) -> dict[str, Any]:
    """The approval as the agent reads it."""
    response: httpx.Response = await h.client.get(f"/v1/approvals/{approval_id}", headers=h.auth(key))
    body: dict[str, Any] = response.json()
    return body

"""The Teams surface inside a real Cosigner app: agent request → Adaptive Card → signed click → decision.

Every click is an `adaptiveCard/action` invoke the emulator signs with its own JWKS, posted
to `/teams/messages` as the Bot Connector posts it; the answer checks are the desk's.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from surfaces.teams.emulator import TeamsEmulator
from tests.databases import DESK, postgres_elsewhere, sqlite_all_postgres_some
from tests.harness import until
from tests.surfaces.teams.world import (
    AAD,
    ADMIN,
    ALICE,
    APP_ID,
    CONVERSATION,
    HOME,
    MALLORY,
    OTHER_AAD,
    PASSWORD,
    posted,
    request,
    state,
    teams_app,
)

# On PostgreSQL, this module's storage path runs in the tests these name.
pytestmark = postgres_elsewhere(DESK)


async def test_the_requester_approves_and_every_copy_of_the_card_closes(db_kind: str) -> None:
    async with teams_app(db_kind) as (h, emu):
        key = await h.create_tenant("acme")
        approval_id = await request(h, key)
        card = await posted(h, emu, approval_id)
        assert card.conversation_id == CONVERSATION
        assert card.buttons == ["approve", "deny"]  # danger: no "approve for this run"
        flat = json.dumps(card.card)
        # Agent-controlled text is escaped, the reason labelled as the agent's claim.
        assert r"\\*\\*bold\\*\\* \\[link\\]" in flat and "its claim, not verified" in flat
        response = await emu.click(h.client, card, "approve", ALICE)
        assert response.status_code == 200
        answer = response.json()
        assert answer["statusCode"] == 200 and answer["type"] == "application/vnd.microsoft.card.adaptive"
        assert "actions" not in answer["value"] and "Approved" in json.dumps(answer["value"])
        decided = await state(h, key, approval_id)
        assert decided["status"] == "approved"
        assert decided["decidedBy"] == {"kind": "person", "surface": "teams", "userId": ALICE}
        updated = await until(lambda: len(card.versions) == 2 and card)
        assert updated.buttons == [] and f"**Approved** by {ALICE} on teams" in json.dumps(updated.card)


async def test_a_deny_carries_its_comment(db_kind: str) -> None:
    async with teams_app(db_kind) as (h, emu):
        key = await h.create_tenant("acme")
        approval_id = await request(h, key)
        card = await posted(h, emu, approval_id)
        response = await emu.click(h.client, card, "deny", ALICE, comment="  wrong order  ")
        assert response.json()["statusCode"] == 200
        decided = await state(h, key, approval_id)
        assert decided["status"] == "denied" and decided["comment"] == "wrong order"


async def test_a_tenant_admin_may_answer_in_the_requesters_conversation(db_kind: str) -> None:
    async with teams_app(db_kind) as (h, emu):
        key = await h.create_tenant("acme")
        approval_id = await request(h, key)
        card = await posted(h, emu, approval_id)
        await emu.click(h.client, card, "approve", ADMIN)
        assert (await state(h, key, approval_id))["decidedBy"]["userId"] == ADMIN


async def test_approve_for_this_run_is_offered_in_mode_ask_only(db_kind: str) -> None:
    async with teams_app(db_kind) as (h, emu):
        key = await h.create_tenant("acme")
        approval_id = await request(h, key, tool="issue_credit")
        card = await posted(h, emu, approval_id)
        assert card.buttons == ["approve", "approve_for_run", "deny"]
        await emu.click(h.client, card, "approve_for_run", ALICE)
        assert (await state(h, key, approval_id))["status"] == "approved"


FORGERIES: dict[str, dict[str, Any]] = {
    "another issuer": {"iss": "https://sts.windows.net/evil/"},
    "another app": {"aud": "00000000-0000-4000-8000-00000000beef"},
    "expired beyond the skew": {"exp_in": -301},
    "not valid for minutes yet": {"nbf_in": 400},
    "no serviceUrl claim": {"serviceUrl": None},
    "another serviceUrl": {"serviceUrl": "https://smba.trafficmanager.net/evil/"},
}


# The token is refused on its signature and claims, before storage is asked anything,
# whichever claim is forged: PostgreSQL runs one of them (tests/databases.py).
@sqlite_all_postgres_some("forgery", list(FORGERIES), postgres=["another issuer"])
async def test_a_token_that_does_not_verify_decides_nothing(db_kind: str, forgery: str) -> None:
    async with teams_app(db_kind) as (h, emu):
        key = await h.create_tenant("acme")
        approval_id = await request(h, key)
        card = await posted(h, emu, approval_id)
        claims = dict(FORGERIES[forgery])
        now = int(h.clock())
        if "exp_in" in claims:
            claims["exp"] = now + claims.pop("exp_in")
        if "nbf_in" in claims:
            claims["nbf"] = now + claims.pop("nbf_in")
        token = emu.token_for(**claims)
        response = await emu.click(h.client, card, "approve", ALICE, token=token)
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "INVALID_SIGNATURE"
        assert (await state(h, key, approval_id))["status"] == "pending"


async def test_a_token_signed_by_another_key_or_none_decides_nothing(db_kind: str) -> None:
    async with teams_app(db_kind) as (h, emu):
        key = await h.create_tenant("acme")
        approval_id = await request(h, key)
        card = await posted(h, emu, approval_id)
        another = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        async with TeamsEmulator.running(
            app_id=APP_ID, app_password=PASSWORD, tenant_id=HOME, key=another
        ) as forger:
            forged = forger.token_for(emu.api_url)  # same kid, same claims, another key
        for token in (forged, ""):
            response = await emu.click(h.client, card, "approve", ALICE, token=token)
            assert response.status_code == 403
        assert (await state(h, key, approval_id))["status"] == "pending"


async def test_a_token_just_inside_the_skew_still_verifies(db_kind: str) -> None:
    async with teams_app(db_kind) as (h, emu):
        key = await h.create_tenant("acme")
        approval_id = await request(h, key)
        card = await posted(h, emu, approval_id)
        token = emu.token_for(emu.api_url, exp=int(h.clock()) - 290)
        response = await emu.click(h.client, card, "approve", ALICE, token=token)
        assert response.json()["statusCode"] == 200
        assert (await state(h, key, approval_id))["status"] == "approved"


WRONG_PLACES: dict[str, tuple[dict[str, Any], str]] = {
    "another tenant": ({"tenant": OTHER_AAD}, "WRONG_TENANT"),
    "another conversation": ({"conversation": "19:elsewhere@thread.tacv2"}, "WRONG_CONVERSATION"),
    "another message": ({"reply_to": "1999999999999"}, "WRONG_CONVERSATION"),
    "another bot": ({"app_id": "00000000-0000-4000-8000-00000000beef"}, "WRONG_CONVERSATION"),
}


# The places differ in what the click says, not in what storage does (one read of the
# approval, one refusal): PostgreSQL runs one place per code (tests/databases.py).
@sqlite_all_postgres_some("place", list(WRONG_PLACES), postgres=["another tenant", "another conversation"])
async def test_a_click_from_the_wrong_place_decides_nothing(db_kind: str, place: str) -> None:
    async with teams_app(db_kind) as (h, emu):
        key = await h.create_tenant("acme")
        approval_id = await request(h, key)
        card = await posted(h, emu, approval_id)
        fields, code = WRONG_PLACES[place]
        response = await emu.click(h.client, card, "approve", ALICE, **fields)
        answer = response.json()
        assert answer["statusCode"] == 403 and answer["value"]["code"] == code, answer
        if place == "another bot":
            assert "another teams app" in answer["value"]["message"]
        assert (await state(h, key, approval_id))["status"] == "pending"
        assert len(card.versions) == 1  # the card stays as it was


async def test_a_non_approver_decides_nothing_and_is_told_why(db_kind: str) -> None:
    async with teams_app(db_kind) as (h, emu):
        key = await h.create_tenant("acme")
        approval_id = await request(h, key)
        card = await posted(h, emu, approval_id)
        answer = (await emu.click(h.client, card, "approve", MALLORY)).json()
        assert answer["value"]["code"] == "NOT_AN_APPROVER" and MALLORY in answer["value"]["message"]
        assert (await state(h, key, approval_id))["status"] == "pending"
        audit = await h.client.get(f"/v1/approvals/{approval_id}/audit", headers=h.auth(key))
        assert "NOT_AN_APPROVER" in audit.text


async def test_a_replayed_click_changes_nothing(db_kind: str) -> None:
    async with teams_app(db_kind) as (h, emu):
        key = await h.create_tenant("acme")
        approval_id = await request(h, key)
        card = await posted(h, emu, approval_id)
        body = emu.invoke(card, "approve", ALICE)
        headers = {"Authorization": f"Bearer {emu.token_for()}"}
        first = await h.client.post("/teams/messages", json=body, headers=headers)
        assert first.json()["statusCode"] == 200
        denied = emu.invoke(card, "deny", ALICE)
        again = [await h.client.post("/teams/messages", json=b, headers=headers) for b in (body, denied)]
        assert [r.json()["value"]["code"] for r in again] == ["ALREADY_DECIDED", "ALREADY_DECIDED"]
        assert (await state(h, key, approval_id))["status"] == "approved"


async def test_a_late_click_is_refused_and_the_card_shows_expiry(db_kind: str) -> None:
    async with teams_app(db_kind) as (h, emu):
        key = await h.create_tenant("acme")
        approval_id = await request(h, key)
        card = await posted(h, emu, approval_id)
        h.advance(301)
        updated = await until(lambda: len(card.versions) == 2 and card)
        assert updated.buttons == [] and "Expired" in json.dumps(updated.card)
        answer = (await emu.click(h.client, card, "approve", ALICE)).json()
        assert answer["value"]["code"] == "APPROVAL_EXPIRED"
        assert (await state(h, key, approval_id))["status"] == "expired"


async def test_a_cancel_by_the_agent_closes_the_card(db_kind: str) -> None:
    async with teams_app(db_kind) as (h, emu):
        key = await h.create_tenant("acme")
        approval_id = await request(h, key)
        card = await posted(h, emu, approval_id)
        cancelled = await h.client.post(f"/v1/approvals/{approval_id}/cancel", headers=h.auth(key))
        assert cancelled.status_code == 200, cancelled.text
        updated = await until(lambda: len(card.versions) == 2 and card)
        assert updated.buttons == [] and "Cancelled" in json.dumps(updated.card)


async def test_a_refresh_shows_the_current_card_and_decides_nothing(db_kind: str) -> None:
    async with teams_app(db_kind) as (h, emu):
        key = await h.create_tenant("acme")
        approval_id = await request(h, key)
        card = await posted(h, emu, approval_id)
        pending = (await emu.click(h.client, card, "refresh", ALICE)).json()
        assert [a["verb"] for a in pending["value"]["actions"]] == ["approve", "deny"]
        stranger = (await emu.click(h.client, card, "refresh", MALLORY)).json()
        assert stranger["value"]["code"] == "NOT_AN_APPROVER"
        assert (await state(h, key, approval_id))["status"] == "pending"


@pytest.mark.parametrize("fault", ["bot connector down", "conversation gone", "bad password"])
async def test_a_card_that_cannot_be_sent_fails_closed(db_kind: str, fault: str) -> None:
    async with teams_app(db_kind) as (h, emu):
        key = await h.create_tenant("acme")
        if fault == "bot connector down":
            emu.fail_next(503, times=10)
        elif fault == "conversation gone":
            emu.missing_conversations.add(CONVERSATION)
        else:
            emu.app_password = "rotated"
        approval_id = await request(h, key)
        decided = await until_closed(h, key, approval_id)
        assert decided["status"] == "denied"
        assert decided["decidedBy"] == {"kind": "system", "code": "SURFACE_UNAVAILABLE"}
        assert emu.cards() == []
        assert PASSWORD not in json.dumps(decided)


async def until_closed(h: Any, key: str, approval_id: str) -> dict[str, Any]:
    response = await h.client.get(f"/v1/approvals/{approval_id}?wait=5", headers=h.auth(key))
    body: dict[str, Any] = response.json()
    return body


async def test_a_surface_in_another_entra_tenant_is_refused_at_the_request(db_kind: str) -> None:
    async with teams_app(db_kind) as (h, _):
        key = await h.create_tenant("acme")
        body = {
            "executionId": "run_1",
            "toolCallId": "c1",
            "toolName": "issue_refund",
            "parameters": {},
            "surface": {
                "type": "teams",
                "tenantId": OTHER_AAD,
                "conversationId": CONVERSATION,
                "userId": ALICE,
            },
        }
        response = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
        assert response.status_code == 403
        error = response.json()["error"]
        assert error["code"] == "WRONG_TENANT" and "teams_tenant" in error["message"]
        assert AAD not in error["message"]


async def test_approve_for_this_run_covers_only_the_same_requester_and_conversation(db_kind: str) -> None:
    async with teams_app(db_kind) as (h, emu):
        key = await h.create_tenant("acme")
        first = await request(h, key, call="c1", tool="issue_credit")
        await emu.click(h.client, await posted(h, emu, first), "approve_for_run", ALICE)
        assert (await state(h, key, first))["status"] == "approved"
        again = await h.client.post(
            "/v1/approvals",
            json={
                "executionId": "run_81",
                "toolCallId": "c2",
                "toolName": "issue_credit",
                "parameters": {},
                "surface": {
                    "type": "teams",
                    "tenantId": AAD,
                    "conversationId": CONVERSATION,
                    "userId": ALICE,
                },
            },
            headers=h.auth(key),
        )
        assert again.status_code == 200 and again.json()["decidedBy"]["kind"] == "policy"
        other = await request(h, key, call="c3", tool="issue_credit", userId=MALLORY)
        assert (await state(h, key, other))["status"] == "pending"  # Mallory's call needs a person

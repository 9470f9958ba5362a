"""The sandbox's Teams pane: the cards the Teams emulator holds, and presses of their buttons.

A press is what Teams would send: an `adaptiveCard/action` invoke signed by the emulator's
Bot Connector key, posted to this server's `/teams/messages`, so the pane goes through
every check a real click does.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from surfaces.teams.emulator import TeamsEmulator

APP_ID = "00000000-0000-4000-8000-00000000c051"
APP_PASSWORD = "cosigner-dev-teams-app-password"
HOME_TENANT = "00000000-0000-4000-8000-0000000000de"  # the bot's own (emulated) tenant
DEMO_TENANT = "00000000-0000-4000-8000-00000000de70"  # [tenants.demo] teams_tenant
CONVERSATION = "19:demo-ops@thread.tacv2"
PEOPLE = {
    "alice": "00000000-0000-4000-8000-0000000a11ce",  # the requester in the sample request
    "admin": "00000000-0000-4000-8000-00000000ad01",  # [tenants.demo] admins.teams
    "mallory": "00000000-0000-4000-8000-0000000ba11e",  # nobody's approver
}
# What the pane shows for each id, as Teams shows a person by name, never by object id
# (cards write the requester `teams:<id>`, the approver `<id>`: the longer form first).
_NAMED = {PEOPLE["alice"]: "Alice", PEOPLE["admin"]: "Ada", PEOPLE["mallory"]: "Mallory"}
NAMES = {**{f"teams:{i}": n for i, n in _NAMED.items()}, **_NAMED}
# What "Ask here" asks: the sample refund, as Alice, in this conversation.
SAMPLE = {
    "toolName": "issue_refund",
    "parameters": {"orderId": "ord_4421", "amountCents": 12900, "cardToken": "tok_x"},
    "reason": "Customer says the discount was not applied",
}


class TeamsPane:
    """`GET /sandbox/api/teams` and `POST /sandbox/api/teams/click`, bound to the emulator."""

    def __init__(self, teams: TeamsEmulator, http: httpx.AsyncClient) -> None:
        self.teams, self.http = teams, http
        self.api_key: str | None = None  # the demo tenant's agent key, once the sandbox made it

    def routes(self) -> list[BaseRoute]:
        """The pane's JSON API."""
        return [
            Route("/sandbox/api/teams", self.state, methods=["GET"]),
            Route("/sandbox/api/teams/click", self.click, methods=["POST"]),
            Route("/sandbox/api/teams/ask", self.ask, methods=["POST"]),
        ]

    async def state(self, request: Request) -> Response:
        """The conversation's cards as they read now, and who may press as whom."""
        cards = [
            {"id": p.activity_id, "card": p.card, "buttons": p.buttons, "edited": len(p.versions) > 1}
            for p in self.teams.cards()
        ]
        body = {
            "conversation": CONVERSATION,
            "tenant": DEMO_TENANT,
            "people": PEOPLE,
            "names": NAMES,
            "cards": cards,
        }
        return JSONResponse(body, headers={"Cache-Control": "no-store"})

    async def click(self, request: Request) -> Response:
        """Press `verb` on card `id` as `as` (alice, admin or mallory), with an optional comment."""
        try:
            body = json.loads(await request.body())
        except json.JSONDecodeError:
            body = None
        if not isinstance(body, dict):
            return JSONResponse({"error": "send a JSON object"}, status_code=400)
        posted = self.teams.posted.get(str(body.get("id")))
        person = PEOPLE.get(str(body.get("as")))
        verb = body.get("verb")
        if posted is None or person is None or not isinstance(verb, str):
            return JSONResponse({"error": "id (a card), as (alice|admin|mallory) and verb are required"}, 400)
        comment = body.get("comment") if isinstance(body.get("comment"), str) else None
        response = await self.teams.click(self.http, posted, verb, person, comment=comment)
        answer: Any = (
            response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
        )
        return JSONResponse({"status": response.status_code, "answer": answer})

    async def ask(self, request: Request) -> Response:
        """ "Ask here": the sample refund requested as Alice in this conversation, through the
        agent API with the demo tenant's key, as an agent would."""
        if request.headers.get("content-type", "").split(";")[0] != "application/json":
            # JSON only: a cross-site form post cannot send it without a CORS preflight.
            return JSONResponse({"error": "send application/json"}, status_code=415)
        if self.api_key is None:
            return JSONResponse({"error": "the demo tenant has no key yet"}, status_code=409)
        body = {
            # A new run each time, also across restarts (the record outlives the process).
            "executionId": f"run_teams_{uuid.uuid4().hex[:12]}",
            "toolCallId": "call_1",
            **SAMPLE,
            "surface": {
                "type": "teams",
                "tenantId": DEMO_TENANT,
                "conversationId": CONVERSATION,
                "userId": PEOPLE["alice"],
            },
        }
        response = await self.http.post(
            "/v1/approvals", json=body, headers={"Authorization": f"Bearer {self.api_key}"}
        )
        answer: Any = response.json()
        return JSONResponse({"status": response.status_code, "answer": answer})

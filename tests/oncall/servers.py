"""PagerDuty and Opsgenie on loopback: real HTTP servers answering the documented shapes.

Each answer is the provider's reference example (`fixtures/`), with the people the test puts
on call in place of the example's. A test changes the rotation (`put`), takes the provider
down (`down`), and reads what was asked (`asked`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from surfaces.loopback import LoopbackServer

FIXTURES = Path(__file__).parent / "fixtures"
PAGERDUTY_TOKEN = "pd-test-token"
OPSGENIE_KEY = "og-test-key"


def fixture(name: str) -> dict[str, Any]:
    """A provider's documented example response."""
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


class OnCallServers:
    """Both providers on one loopback server: `/pagerduty/oncalls`, `/opsgenie/v2/schedules/…`."""

    def __init__(self) -> None:
        # (target, level or None) -> the emails on call; a level of None is a schedule.
        self.rotations: dict[tuple[str, int | None], list[str]] = {}
        self.down_status: int | None = None
        self.asked: list[str] = []
        self.server = LoopbackServer(
            Starlette(
                routes=[
                    Route("/pagerduty/oncalls", self._pagerduty),
                    Route("/opsgenie/v2/schedules/{schedule}/on-calls", self._opsgenie),
                ]
            ),
            "on-call providers",
        )
        self.base = ""

    def put(self, target: str, emails: list[str], level: int | None = None) -> None:
        """Who is on call now for a schedule (or a level of an escalation policy)."""
        self.rotations[(target, level)] = emails

    def down(self, status: int | None = 503) -> None:
        """Answer every request with `status` (None: back up)."""
        self.down_status = status

    @property
    def pagerduty_url(self) -> str:
        """COSIGNER_PAGERDUTY_URL for this server."""
        return f"{self.base}/pagerduty"

    @property
    def opsgenie_url(self) -> str:
        """COSIGNER_OPSGENIE_URL for this server."""
        return f"{self.base}/opsgenie"

    async def _pagerduty(self, request: Request) -> Response:
        self.asked.append(str(request.url))
        if self.down_status is not None:
            return JSONResponse({"error": {"message": "Service Unavailable"}}, self.down_status)
        if request.headers.get("authorization") != f"Token token={PAGERDUTY_TOKEN}":
            return JSONResponse({"error": {"message": "Unauthorized", "code": 2006}}, 401)
        q = request.query_params
        example = fixture("pagerduty_oncalls.json")
        template = example["oncalls"][0]
        entries = []
        for (target, level), emails in self.rotations.items():
            if level is None and target not in q.getlist("schedule_ids[]"):
                continue
            if level is not None and (
                target not in q.getlist("escalation_policy_ids[]")
                or str(level) not in q.getlist("escalation_levels[]")
            ):
                continue
            for n, email in enumerate(emails):
                entry = copy.deepcopy(template)
                entry["user"].update(
                    id=f"PU{n}{abs(hash(email)) % 10000}", email=email, name=email.split("@")[0]
                )
                entry["user"]["summary"] = entry["user"]["name"]
                if "users" not in q.getlist("include[]"):
                    entry["user"] = {
                        k: entry["user"][k] for k in ("id", "type", "summary", "self", "html_url")
                    }
                    entry["user"]["type"] = "user_reference"
                entry["schedule"]["id"] = target if level is None else "PSCHED1"
                entry["escalation_policy"]["id"] = target if level is not None else "PPOLICY1"
                entry["escalation_level"] = level or 1
                entries.append(entry)
        return JSONResponse({**example, "oncalls": entries, "limit": 100, "offset": 0, "more": False})

    async def _opsgenie(self, request: Request) -> Response:
        self.asked.append(str(request.url))
        if self.down_status is not None:
            return JSONResponse({"message": "Service Unavailable", "took": 0.0}, self.down_status)
        if request.headers.get("authorization") != f"GenieKey {OPSGENIE_KEY}":
            return JSONResponse({"message": "Could not authenticate", "took": 0.0}, 401)
        schedule = request.path_params["schedule"]
        if (schedule, None) not in self.rotations:
            return JSONResponse({"message": f"Schedule with name [{schedule}] does not exist"}, 404)
        example = fixture("opsgenie_on_calls.json")
        example["data"]["_parent"]["name"] = schedule
        example["data"]["onCallRecipients"] = list(self.rotations[(schedule, None)])
        return JSONResponse(example)


@asynccontextmanager
async def on_call_servers() -> AsyncIterator[OnCallServers]:
    """Both providers, started on a free loopback port."""
    servers = OnCallServers()
    port = await servers.server.start()
    servers.base = f"http://127.0.0.1:{port}"
    try:
        yield servers
    finally:
        await servers.server.stop()

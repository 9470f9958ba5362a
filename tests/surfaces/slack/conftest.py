"""Shared pieces for the Slack surface tests: a card, a route, a recording desk, an emulator."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from contracts.enums import ApprovalMode, ApprovalStatus, SurfaceType, ToolKind
from contracts.errors import CosignerError
from contracts.ports import Answer, ApprovalCard, Look, SlackRoute
from surfaces.slack import SlackAdapter, SlackConfig
from surfaces.slack.emulator import SlackEmulator

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TOKEN = "xoxb-test-token"
T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _card(**changes: Any) -> ApprovalCard:
    """A pending danger card for `issue_refund`."""
    card = ApprovalCard(
        approval_id="apr_01",
        short_code="K7Q",
        tenant="acme",
        execution_id="run_81",
        tool_call_id="call_7",
        tool_name="issue_refund",
        kind=ToolKind.DANGER,
        mode=ApprovalMode.ASK_ALWAYS,
        parameters={"orderId": "ord_4421", "amountCents": 12900, "cardToken": "[redacted]"},
        reason="Customer says the discount was not applied",
        triggered_by="slack:U1",
        policy_rule="tools.issue_refund: danger → ask_always",
        created_at=T0,
        expires_at=T0 + timedelta(minutes=5),
        status=ApprovalStatus.PENDING,
    )
    return replace(card, **changes)


def _route(**changes: Any) -> SlackRoute:
    """A route to channel C1 in workspace T1 for requester U1."""
    route = SlackRoute(
        surface=SurfaceType.SLACK,
        team_id="T1",
        enterprise_id=None,
        channel_id="C1",
        thread_ts=None,
        approvers=("U1",),
        approver_teams=("T1",),
        requester="U1",
    )
    return replace(route, **changes)


class FakeDesk:
    """Records answers; raises `refuse` instead when set; maps `orgs` to tenants."""

    def __init__(self) -> None:
        self.answers: list[Answer] = []
        self.refuse: CosignerError | None = None
        self.orgs: dict[str, str] = {"T1": "acme"}

    async def answer(self, answer: Answer) -> ApprovalCard:
        if self.refuse is not None:
            raise self.refuse
        self.answers.append(answer)
        return _card()

    def tenant_for_org(self, surface: SurfaceType, org: str) -> str | None:
        return self.orgs.get(org) if surface is SurfaceType.SLACK else None

    async def full_call(self, look: Look) -> ApprovalCard:
        if self.refuse is not None:
            raise self.refuse
        return _card(approval_id=look.approval_id)


@pytest.fixture
def make_card() -> Callable[..., ApprovalCard]:
    """Build a card, overriding any field."""
    return _card


@pytest.fixture
def make_route() -> Callable[..., SlackRoute]:
    """Build a route, overriding any field."""
    return _route


@pytest.fixture
def t0() -> datetime:
    """When the sample card was created."""
    return T0


@pytest.fixture
def secret() -> str:
    """The signing secret the adapter under test verifies with."""
    return SECRET


@pytest.fixture
async def emu() -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator.running(team_id="T1", app_id="A1") as emulator:
        yield emulator


@pytest.fixture
def desk() -> FakeDesk:
    return FakeDesk()


@pytest.fixture
async def adapter(emu: SlackEmulator, desk: FakeDesk) -> AsyncIterator[SlackAdapter]:
    config = SlackConfig(signing_secret=SECRET, bot_token=TOKEN, api_url=emu.api_url, app_id="A1")
    slack = SlackAdapter(config, desk)
    await slack.start()
    yield slack
    await slack.stop()


@pytest.fixture
async def http(adapter: SlackAdapter) -> AsyncIterator[httpx.AsyncClient]:
    app = Starlette(routes=adapter.routes())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://cosigner.test") as client:
        yield client

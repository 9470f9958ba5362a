"""`cosigner dev --slack-socket-mode`: the sandbox with Slack over Socket Mode. The app opens
a WebSocket to the emulator with an app-level token and serves no `/slack/events`; the
page's presses travel as Socket Mode envelopes and are acknowledged after the decision."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.cli.commands import parser
from bot.dev.sandbox import Sandbox, banner, sandbox
from tests.sandbox.conftest import until
from tests.sandbox.test_page_api import ask, card_of, click, state


@pytest.fixture
async def socket_sb(tmp_path: Path) -> AsyncIterator[Sandbox]:
    async with sandbox("127.0.0.1", 0, tmp_path / "cosigner-data", socket_mode=True) as running:
        yield running


@pytest.fixture
async def socket_http(socket_sb: Sandbox) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {socket_sb.api_key}"}
    async with httpx.AsyncClient(base_url=socket_sb.url, headers=headers, timeout=30) as client:
        yield client


async def test_clicks_and_the_deny_modal_travel_over_socket_mode(
    socket_sb: Sandbox, socket_http: httpx.AsyncClient
) -> None:
    http = socket_http
    assert socket_sb.slack.socket_connections == 1
    assert "Slack runs over Socket Mode" in banner(socket_sb, "127.0.0.1")
    # No public URL is needed: the events route is not served at all.
    assert (await http.post("/slack/events", content=b"{}")).status_code == 404
    approval = await ask(http, "issue_refund", {"orderId": "o1", "amountCents": 12900, "cardToken": "tok_x"})
    card = await card_of(http, "issue_refund")
    # Mallory's press is acknowledged and refused by the same checks; she is told why.
    refused = await click(http, card, "cosigner.approve", "outsider")
    assert refused.json() == {"status": 200}
    assert "NOT_AN_APPROVER" in json.dumps((await state(http))["ephemerals"])
    assert (await click(http, card, "cosigner.approve", "requester")).json() == {"status": 200}
    # Acknowledged only after the decision was committed: it is decided already.
    decided = (await http.get(f"/v1/approvals/{approval}")).json()
    assert decided["status"] == "approved" and decided["decidedBy"]["userId"] == "U0ALICE"
    activity = (await state(http))["activity"]
    assert activity[-1]["route"] == "Socket Mode" and activity[-1]["status"] == 200
    # The deny modal: a submission with errors comes back in the envelope's acknowledgement.
    credit = await ask(http, "issue_credit", {"orderId": "o1", "amountCents": 500}, call="call_2")
    await click(http, await card_of(http, "issue_credit"), "cosigner.deny", "requester")
    await until(lambda: socket_sb.slack.views)
    (view,) = (await state(http))["views"]
    outsider = await http.post(
        "/sandbox/api/submit", json={"viewId": view["id"], "comment": "no", "as": "outsider"}
    )
    assert "NOT_AN_APPROVER" in json.dumps(outsider.json()["errors"])
    ok = await http.post(
        "/sandbox/api/submit", json={"viewId": view["id"], "comment": "Ask first", "as": "requester"}
    )
    assert ok.json() == {"status": 200, "errors": None}
    denied = (await http.get(f"/v1/approvals/{credit}")).json()
    assert denied["status"] == "denied" and denied["comment"] == "Ask first"
    # The Home tab opens over the socket too (an events_api envelope).
    assert (await http.post("/sandbox/api/home", json={"as": "requester"})).json() == {"status": 200}
    await until(lambda: "U0ALICE" in socket_sb.slack.home_tabs)


def test_the_flag_is_on_cosigner_dev() -> None:
    args: Any = parser().parse_args(["dev", "--slack-socket-mode", "--port", "0"])
    assert args.slack_socket_mode is True
    assert parser().parse_args(["dev"]).slack_socket_mode is False

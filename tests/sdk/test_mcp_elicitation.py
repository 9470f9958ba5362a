"""The MCP gateway sends the person at the client to the inbox (URL-mode elicitation), and
takes nothing the client answers as a decision.

The agent is `mcp.Client` with an elicitation callback (it then declares the form and URL
modes), the upstream the recording shop, Cosigner the harness app over loopback with a
policy in which `close_account` goes to the tenant's admins and `transfer_funds` keeps the
requester's own Approve from counting (separation of duties). The same policy names the
admins as the approvers of tool definitions (`mcp.definition`), as an operator would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.types import ElicitRequestParams, ElicitRequestURLParams, ElicitResult, ErrorData

from cosigner import AsyncCosigner
from cosigner.errors import NotAnApprover
from tests.harness import DEFAULT_POLICY, until
from tests.loopback import LiveServer, loopback_server
from tests.sdk.conftest import Target
from tests.sdk.mcp_shop import Recording, Shelf, gateway, shop
from tests.sdk.test_mcp_gateway import REFUND, Calls, approval_of, decide, text

POLICY = (
    DEFAULT_POLICY
    + """
[tools.close_account]
kind = "danger"
approvers = ["tenant_admins"]

[tools."mcp.definition"]
kind = "danger"
approvers = ["tenant_admins"]

[tenants.acme.tools.transfer_funds]
kind = "danger"
approvers = ["requester", "tenant_admins"]
separate_duties = true
"""
)


@pytest.fixture(scope="module")
def live() -> Iterator[LiveServer]:
    """The harness app on loopback with this module's policy (overrides conftest's)."""
    with loopback_server(POLICY, callback_allow="127.0.0.0/8") as server:
        yield server


class Answering:
    """A client's elicitation callback: records each request and answers `answer`."""

    def __init__(self, answer: ElicitResult) -> None:
        self.answer = answer
        self.asked: list[ElicitRequestParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        self.asked.append(params)
        return self.answer


def sent_to_inbox(target: Target, asked: ElicitRequestParams, approval_id: str) -> None:
    """`asked` is the URL elicitation of `approval_id`'s inbox page, and carries nothing else."""
    assert isinstance(asked, ElicitRequestURLParams)
    assert asked.url == f"{target.url}/inbox/approvals/{approval_id}"
    parts = urlsplit(asked.url)
    assert (parts.username, parts.password, parts.query, parts.fragment) == (None, None, "", "")
    assert target.acme not in asked.url and target.acme_approver not in asked.url
    assert approval_id in asked.message and "approves nothing" in asked.message


async def status_of(target: Target, approval_id: str) -> str:
    async with AsyncCosigner(url=target.url, api_key=target.acme) as c:
        return (await c.get(approval_id)).status.value


async def test_a_waiting_call_sends_its_approver_to_the_inbox_and_still_waits_for_the_decision(
    inprocess: Target,
) -> None:
    calls: Calls = []
    client = Answering(ElicitResult(action="accept"))
    async with (
        gateway(inprocess.url, inprocess.acme, shop(calls), hold_seconds=60) as gw,
        Client(gw.server, mode="legacy", elicitation_callback=client) as agent,
    ):
        waiting = asyncio.create_task(agent.call_tool("issue_refund", REFUND))
        (asked,) = await until(lambda: client.asked, seconds=20)
        (approval_id,) = gw.ledger.pending_approvals()
        sent_to_inbox(inprocess, asked, approval_id)
        assert await status_of(inprocess, approval_id) == "pending" and calls == []
        await decide(inprocess, approval_id, "approve")
        result = await waiting
    assert not result.is_error and text(result) == "refunded 12900 on ord_1"
    assert calls == [("issue_refund", REFUND)] and len(client.asked) == 1


async def test_a_form_answer_accepting_is_never_taken_as_an_approval(inprocess: Target) -> None:
    calls: Calls = []
    client = Answering(ElicitResult(action="accept", content={"decision": "approve", "approved": True}))
    async with (
        gateway(inprocess.url, inprocess.acme, shop(calls)) as gw,
        Client(gw.server, mode="legacy", elicitation_callback=client) as agent,
    ):
        first = await agent.call_tool("issue_refund", REFUND)
        await until(lambda: client.asked)
        again = await agent.call_tool("issue_refund", REFUND)  # after the client said "approve"
        approval_id = approval_of(first)
        assert await status_of(inprocess, approval_id) == "pending"
        await decide(inprocess, approval_id, "deny")
        denied = await agent.call_tool("issue_refund", REFUND)
    assert "pending" in text(first) and "pending" in text(again) and approval_of(again) == approval_id
    assert "denied by u_1" in text(denied) and calls == []
    assert len(client.asked) == 1  # once per call, not once per re-call
    sent_to_inbox(inprocess, client.asked[0], approval_id)


async def test_a_multi_round_trip_client_gets_the_inbox_as_an_input_request_and_keeps_waiting(
    inprocess: Target,
) -> None:
    calls: Calls = []
    sent = Recording()
    client = Answering(ElicitResult(action="accept", content={"decision": "approve"}))
    async with (
        gateway(inprocess.url, inprocess.acme, shop(calls), rounds=100_000, transport=sent) as gw,
        Client(gw.server, elicitation_callback=client, input_required_max_rounds=100_000) as agent,
    ):
        waiting = asyncio.create_task(agent.call_tool("issue_refund", REFUND))
        (asked,) = await until(lambda: client.asked, seconds=20)
        (approval_id,) = gw.ledger.pending_approvals()
        sent_to_inbox(inprocess, asked, approval_id)
        rounds = sent.sent.count("POST /v1/approvals")
        # The client retried with its "accept" and content, and more rounds followed: still waiting.
        await until(lambda: sent.sent.count("POST /v1/approvals") >= rounds + 3, seconds=20)
        assert not waiting.done() and calls == []
        assert await status_of(inprocess, approval_id) == "pending"
        await decide(inprocess, approval_id, "approve")
        result = await waiting
    assert text(result) == "refunded 12900 on ord_1" and calls == [("issue_refund", REFUND)]
    assert len(client.asked) == 1


@pytest.mark.parametrize("tool", ["close_account", "transfer_funds"])
async def test_no_elicitation_where_the_requester_cannot_approve(inprocess: Target, tool: str) -> None:
    """close_account goes to the admins; transfer_funds lets the requester see it but not count."""
    shelf = Shelf([])
    shelf.change(tool, description="Move money or close an account.")
    shelf.change("wipe_disk", description="Wipe a disk.")
    sent = Recording()
    client = Answering(ElicitResult(action="accept"))
    async with (
        gateway(inprocess.url, inprocess.acme, shelf.server, transport=sent) as gw,
        Client(gw.server, mode="legacy", elicitation_callback=client) as agent,
    ):
        refused = await agent.call_tool(tool, {"orderId": "acc_1"})
        control = await agent.call_tool("wipe_disk", {"orderId": "sda"})  # the requester approves it
        await until(lambda: client.asked)
    assert "pending" in text(refused) and "pending" in text(control)
    assert [s for s in sent.sent if s.endswith("/audit")] == [
        f"GET /v1/approvals/{approval_of(refused)}/audit",
        f"GET /v1/approvals/{approval_of(control)}/audit",
    ]
    (asked,) = client.asked
    sent_to_inbox(inprocess, asked, approval_of(control))


async def test_no_elicitation_to_a_client_that_does_not_take_urls_or_when_turned_off(
    inprocess: Target,
) -> None:
    sent = Recording()
    client = Answering(ElicitResult(action="accept"))
    async with (
        gateway(inprocess.url, inprocess.acme, shop([]), transport=sent) as gw,
        Client(gw.server, mode="legacy") as plain,
    ):
        pending = await plain.call_tool("issue_refund", REFUND)
    async with (
        gateway(inprocess.url, inprocess.acme, shop([]), elicit=False) as gw,
        Client(gw.server, mode="legacy", elicitation_callback=client) as declaring,
    ):
        off = await declaring.call_tool("issue_refund", REFUND)
    assert "pending" in text(pending) and "pending" in text(off) and client.asked == []
    assert not [s for s in sent.sent if s.endswith("/audit")]  # not even looked up


async def test_the_inbox_url_option_names_where_approvers_browse(inprocess: Target) -> None:
    client = Answering(ElicitResult(action="decline"))
    async with (
        gateway(inprocess.url, inprocess.acme, shop([]), inbox_url="https://cosigner.example/inbox/") as gw,
        Client(gw.server, mode="legacy", elicitation_callback=client) as agent,
    ):
        approval_id = approval_of(await agent.call_tool("issue_refund", REFUND))
        (asked,) = await until(lambda: client.asked)
    assert isinstance(asked, ElicitRequestURLParams)
    assert asked.url == f"https://cosigner.example/inbox/approvals/{approval_id}"


async def test_an_operator_names_the_approvers_of_definitions_in_the_policy(
    inprocess: Target, tmp_path: Path
) -> None:
    shelf = Shelf([])
    async with (
        gateway(inprocess.url, inprocess.acme, shelf.server, pin=tmp_path / "tools.lock.json") as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        await agent.list_tools()
        assert gw.definitions is not None
        definitions = gw.definitions
        held = await until(
            lambda: (h := definitions.held().get("lookup_order")) is not None and h.approval_id
        )
        async with AsyncCosigner(url=inprocess.url, api_key=inprocess.acme) as c:
            (requested, *_) = await c.audit(held)
        async with AsyncCosigner(url=inprocess.url, api_key=inprocess.acme_approver) as dashboard:
            with pytest.raises(NotAnApprover):  # the requester is not the one who approves tools
                await dashboard.decide(held, decision="approve", user_id="u_1")
            await dashboard.decide(held, decision="approve", user_id="u_admin")
        await until(lambda: "lookup_order" not in definitions.held())
        listed = [t.name for t in (await agent.list_tools()).tools]
    assert requested["data"]["toolName"] == "mcp.definition"
    assert requested["data"]["route"]["approvers"] == ["u_admin"]
    assert listed == ["lookup_order"]

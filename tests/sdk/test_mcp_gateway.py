"""The MCP gateway against a real Cosigner: every outcome of a gated tool call over MCP.

The agent is `mcp.Client`, the upstream an in-process MCP server that records each call
(tests/sdk/mcp_shop.py), Cosigner the harness app over loopback; a person decides through
the dashboard decision route. Clients in the handshake era (`mode="legacy"`) get the
"pending" tool error and call again; the others get the multi-round-trip flow.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from mcp import Client
from mcp.types import CallToolResult, InputRequiredResult, TextContent

from cosigner import AsyncCosigner, SlackSurface
from cosigner._core import Send
from cosigner._keepalive import Started
from tests.harness import until
from tests.sdk.conftest import Target, results_of
from tests.sdk.mcp_shop import USER, Recording, gateway, orchard, shop

REFUND = {"orderId": "ord_1", "amountCents": 12900}
Calls = list[tuple[str, dict[str, Any]]]


def text(result: CallToolResult) -> str:
    """The text of a tool result."""
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


def approval_of(result: CallToolResult) -> str:
    """The approval id a gateway answer names."""
    assert result.meta is not None
    return str(result.meta["cosigner"]["approvalId"])


async def decide(target: Target, approval_id: str, verdict: str, comment: str | None = None) -> None:
    """A person answers on the dashboard."""
    async with AsyncCosigner(url=target.url, api_key=target.acme_approver) as dashboard:
        await dashboard.decide(approval_id, decision=verdict, user_id=USER, comment=comment)  # type: ignore[arg-type]


async def test_tools_are_listed_as_the_upstream_lists_them(inprocess: Target) -> None:
    calls: Calls = []
    upstream = shop(calls)
    async with gateway(inprocess.url, inprocess.acme, upstream) as gw, Client(gw.server) as agent:
        async with Client(upstream) as direct:
            expected = (await direct.list_tools()).tools
        listed = (await agent.list_tools()).tools
    assert [t.model_dump() for t in listed] == [t.model_dump() for t in expected]
    assert [t.name for t in listed] == ["lookup_order", "issue_refund", "delete_account", "wipe_disk"]


async def test_a_read_tool_is_forwarded_after_the_policy_answer_with_nobody_asked(inprocess: Target) -> None:
    calls: Calls = []
    async with gateway(inprocess.url, inprocess.acme, shop(calls)) as gw, Client(gw.server) as agent:
        result = await agent.call_tool("lookup_order", {"orderId": "ord_9"})
    assert not result.is_error and text(result) == "order ord_9: delivered"
    assert calls == [("lookup_order", {"orderId": "ord_9"})]


async def test_a_reads_result_is_reported_after_its_policy_answer(inprocess: Target) -> None:
    sent = Recording()
    async with (
        gateway(inprocess.url, inprocess.acme, shop([]), transport=sent) as gw,
        Client(gw.server) as agent,
    ):
        await agent.call_tool("lookup_order", {"orderId": "ord_9"})
        await gw.drain()
    (report,) = [s for s in sent.sent if s.endswith("/result")]
    assert sent.sent.index(report) > sent.sent.index("POST /v1/approvals")
    async with AsyncCosigner(url=inprocess.url, api_key=inprocess.acme) as c:
        (reported,) = results_of(await c.audit(report.split("/")[3]))
    assert reported["result"]["content"][0]["text"] == "order ord_9: delivered"


async def test_a_reads_report_is_written_at_once_and_its_answer_read_later(inprocess: Target) -> None:
    async with gateway(inprocess.url, inprocess.acme, shop([])) as gw, Client(gw.server) as agent:
        outbox = gw.cosigner._outbox
        assert outbox is not None
        written: list[tuple[str, bool]] = []  # (report path, written at once)
        start = outbox._start

        def recording(request: Send) -> Started | None:
            started = start(request)
            written.append((request.path, started is not None))
            return started

        outbox._start = recording  # type: ignore[method-assign]
        await agent.call_tool("lookup_order", {"orderId": "ord_9"})
        await asyncio.to_thread(outbox.flush)  # the first opened the reporting connection
        await agent.call_tool("lookup_order", {"orderId": "ord_10"})
        await gw.drain()
        assert not outbox._owed
        async with AsyncCosigner(url=inprocess.url, api_key=inprocess.acme) as c:
            texts = [(results_of(await c.audit(path.split("/")[3])))[0]["result"] for path, _ in written]
    # No idle connection for the first report: the worker sent it. The second was written
    # on that connection at once, and its answer read by drain().
    assert [at_once for _, at_once in written] == [False, True]
    assert [t["content"][0]["text"] for t in texts] == ["order ord_9: delivered", "order ord_10: delivered"]


async def test_approved_call_goes_through_on_the_re_call_with_exactly_its_arguments(
    inprocess: Target,
) -> None:
    calls: Calls = []
    async with (
        gateway(inprocess.url, inprocess.acme, shop(calls)) as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        first = await agent.call_tool("issue_refund", REFUND)
        assert first.is_error and calls == []
        approval_id = approval_of(first)
        assert approval_id in text(first) and "pending" in text(first)
        assert "same arguments" in text(first) and "once approved" in text(first)
        again = await agent.call_tool("issue_refund", REFUND)  # still pending: the same approval
        assert again.is_error and approval_of(again) == approval_id and calls == []
        await decide(inprocess, approval_id, "approve")
        done = await agent.call_tool("issue_refund", REFUND)
    assert not done.is_error and text(done) == "refunded 12900 on ord_1"
    assert calls == [("issue_refund", REFUND)]
    async with AsyncCosigner(url=inprocess.url, api_key=inprocess.acme) as c:
        reported = results_of(await c.audit(approval_id))
        decision = await c.get(approval_id)
    assert reported and reported[0]["result"]["content"][0]["text"] == "refunded 12900 on ord_1"
    assert decision.execution_id.startswith("mcp-") and decision.tool_name == "issue_refund"


async def test_a_call_held_open_returns_the_result_once_a_person_approves(inprocess: Target) -> None:
    calls: Calls = []
    async with (
        gateway(inprocess.url, inprocess.acme, shop(calls), hold_seconds=60) as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        waiting = asyncio.create_task(agent.call_tool("issue_refund", REFUND))
        (approval_id,) = await until(gw.ledger.pending_approvals, seconds=20)
        await decide(inprocess, approval_id, "approve")
        result = await waiting
    assert not result.is_error and text(result) == "refunded 12900 on ord_1"
    assert calls == [("issue_refund", REFUND)]


async def test_denied_call_answers_with_the_comment_and_never_reaches_the_upstream(inprocess: Target) -> None:
    calls: Calls = []
    async with (
        gateway(inprocess.url, inprocess.acme, shop(calls)) as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        approval_id = approval_of(await agent.call_tool("issue_refund", REFUND))
        await decide(inprocess, approval_id, "deny", "not for a delivered order")
        denied = await agent.call_tool("issue_refund", REFUND)
        assert denied.is_error and approval_of(denied) == approval_id
        assert "denied by u_1" in text(denied) and "not for a delivered order" in text(denied)
        assert "not called" in text(denied)
        asked_again = await agent.call_tool("issue_refund", REFUND)  # a new request
    assert approval_of(asked_again) != approval_id and "pending" in text(asked_again)
    assert calls == []


async def test_expired_call_is_refused_and_never_reaches_the_upstream(inprocess: Target) -> None:
    calls: Calls = []
    async with (
        gateway(inprocess.url, inprocess.acme, shop(calls)) as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        approval_id = approval_of(await agent.call_tool("wipe_disk", {"device": "sda"}))
        inprocess.expire(approval_id)
        expired = await agent.call_tool("wipe_disk", {"device": "sda"})
    assert expired.is_error and approval_of(expired) == approval_id
    assert "expired" in text(expired) and "not called" in text(expired)
    assert calls == []


async def test_concurrent_re_calls_run_the_approved_call_once_and_a_later_one_asks_again(
    inprocess: Target,
) -> None:
    calls: Calls = []
    async with (
        gateway(inprocess.url, inprocess.acme, shop(calls)) as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        approval_id = approval_of(await agent.call_tool("issue_refund", REFUND))
        await decide(inprocess, approval_id, "approve")
        results = await asyncio.gather(*(agent.call_tool("issue_refund", REFUND) for _ in range(6)))
        assert [text(r) for r in results] == ["refunded 12900 on ord_1"] * 6
        assert calls == [("issue_refund", REFUND)]
        later = await agent.call_tool("issue_refund", REFUND)
    assert later.is_error and "pending" in text(later) and approval_of(later) != approval_id
    assert calls == [("issue_refund", REFUND)]


async def test_other_arguments_are_another_call(inprocess: Target) -> None:
    calls: Calls = []
    async with (
        gateway(inprocess.url, inprocess.acme, shop(calls)) as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        approval_id = approval_of(await agent.call_tool("issue_refund", REFUND))
        await decide(inprocess, approval_id, "approve")
        other = await agent.call_tool("issue_refund", {**REFUND, "amountCents": 99999})
    assert other.is_error and approval_of(other) != approval_id and calls == []


async def test_standing_deny_answers_with_its_code(inprocess: Target) -> None:
    calls: Calls = []
    async with gateway(inprocess.url, inprocess.acme, shop(calls)) as gw, Client(gw.server) as agent:
        result = await agent.call_tool("delete_account", {"accountId": "acc_1"})
    assert result.is_error and text(result).startswith("PERMISSION_DENIED:")
    assert "support staff only" in text(result) and calls == []


async def test_a_surface_that_cannot_host_a_person_answers_with_its_code(inprocess: Target) -> None:
    calls: Calls = []
    slack = SlackSurface(team_id="T0ACME", channel_id="C1", user_id="U1")  # Slack is off on this server
    async with (
        gateway(inprocess.url, inprocess.acme, shop(calls), surface=slack) as gw,
        Client(gw.server) as agent,
    ):
        result = await agent.call_tool("issue_refund", REFUND)
    assert result.is_error and text(result).startswith("APPROVAL_MODE_UNSUPPORTED:") and calls == []


async def test_the_prefix_names_tools_for_the_policy(inprocess: Target) -> None:
    calls: Calls = []
    async with (
        gateway(inprocess.url, inprocess.acme, shop(calls), tool_prefix="shop.") as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        # `shop.lookup_order` is not in the policy: unknown tools are danger.
        result = await agent.call_tool("lookup_order", {"orderId": "ord_9"})
    assert result.is_error and "pending" in text(result) and calls == []
    async with AsyncCosigner(url=inprocess.url, api_key=inprocess.acme) as c:
        assert (await c.get(approval_of(result))).tool_name == "shop.lookup_order"


async def test_a_multi_round_trip_client_waits_through_input_required_rounds(inprocess: Target) -> None:
    calls: Calls = []
    async with (
        gateway(inprocess.url, inprocess.acme, shop(calls), rounds=100_000) as gw,
        Client(gw.server, input_required_max_rounds=100_000) as agent,
    ):
        first = await agent.session.call_tool("issue_refund", REFUND, allow_input_required=True)
        assert isinstance(first, InputRequiredResult) and first.request_state and calls == []
        waiting = asyncio.create_task(agent.call_tool("issue_refund", REFUND))
        (approval_id,) = await until(gw.ledger.pending_approvals)
        await decide(inprocess, approval_id, "approve")
        result = await waiting
    assert not result.is_error and text(result) == "refunded 12900 on ord_1"
    assert calls == [("issue_refund", REFUND)]


async def test_after_its_rounds_a_multi_round_trip_client_gets_the_pending_answer(inprocess: Target) -> None:
    calls: Calls = []
    async with (
        gateway(inprocess.url, inprocess.acme, shop(calls), rounds=3) as gw,
        Client(gw.server) as agent,  # gives up after 10 rounds
    ):
        pending = await agent.call_tool("issue_refund", REFUND)
        assert pending.is_error and "pending" in text(pending)
        await decide(inprocess, approval_of(pending), "approve")
        done = await agent.call_tool("issue_refund", REFUND)
    assert text(done) == "refunded 12900 on ord_1" and calls == [("issue_refund", REFUND)]


async def test_a_forged_round_state_is_refused(inprocess: Target) -> None:
    calls: Calls = []
    async with gateway(inprocess.url, inprocess.acme, shop(calls)) as gw, Client(gw.server) as agent:
        with pytest.raises(Exception, match="requestState"):
            await agent.session.call_tool(
                "issue_refund", REFUND, request_state='["mcp-x", "mcp-y"]', allow_input_required=True
            )
    assert calls == []


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_tool_the_upstream_does_not_list_is_answered_as_it_would_with_nobody_asked(
    inprocess: Target, mode: Any
) -> None:
    sent = Recording()
    calls: Calls = []
    upstream = shop(calls)
    async with (
        gateway(inprocess.url, inprocess.acme, upstream, transport=sent) as gw,
        Client(gw.server, mode=mode) as agent,
    ):
        async with Client(upstream) as direct:
            expected = await direct.call_tool("issue_refunds", REFUND)  # the upstream's own answer
        first = await agent.call_tool("issue_refunds", REFUND)  # before any listing
        await agent.list_tools()
        again = await agent.call_tool("issue_refunds", REFUND)  # after one, over a proven connection
        known = await agent.call_tool("lookup_order", {"orderId": "ord_9"})
        await gw.drain()
    for result in (first, again):
        assert result.is_error and text(result) == text(expected) == "Unknown tool: issue_refunds"
        assert "cosigner" not in (result.meta or {})  # no approval to name
    assert text(known) == "order ord_9: delivered" and calls == [("lookup_order", {"orderId": "ord_9"})]
    assert sent.sent.count("POST /v1/approvals") == 1  # the known tool only: no card for the other


async def test_an_edited_call_reaches_the_upstream_once_with_exactly_the_edited_arguments(
    inprocess: Target,
) -> None:
    calls: Calls = []
    async with (
        gateway(inprocess.url, inprocess.acme, shop(calls)) as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        await agent.list_tools()  # the gateway sends each tool's schema with its calls
        first = await agent.call_tool("issue_refund", REFUND)
        approval_id = approval_of(first)
        async with AsyncCosigner(url=inprocess.url, api_key=inprocess.acme_approver) as dashboard:
            pending = await dashboard.get(approval_id)
            assert pending.editable == ("amountCents",)
            # Below acme's allow_below: still a person's approval of the edited call, never the policy's.
            decided = await dashboard.decide(
                approval_id, decision="approve", user_id=USER, edit={"amountCents": 4000}
            )
        assert decided.decided_by is not None and decided.decided_by.kind.value == "person"
        done = await agent.call_tool("issue_refund", REFUND)
    assert not done.is_error and text(done) == "refunded 4000 on ord_1"
    assert calls == [("issue_refund", {**REFUND, "amountCents": 4000})]  # never the original
    async with AsyncCosigner(url=inprocess.url, api_key=inprocess.acme) as c:
        requested = (await c.audit(approval_id))[0]["data"]
    assert requested["editable"] == ["amountCents"]
    assert inprocess.live is not None
    stored = inprocess.live.call(inprocess.live.harness.engine.record(approval_id))
    assert stored.edit is not None and stored.edit.json_schema is not None
    assert stored.edit.json_schema["properties"]["amountCents"]["type"] == "integer"


TREE = {"tree": {"name": "oak", "children": [{"name": "left", "children": []}]}}


async def test_a_tool_whose_schema_cosigner_refuses_is_asked_without_it_and_not_editable(
    inprocess: Target,
) -> None:
    calls: Calls = []
    sent = Recording()
    upstream = orchard(calls)
    async with Client(upstream) as direct:
        (listed,) = (await direct.list_tools()).tools
    assert "$ref" in json.dumps(listed.input_schema)  # recursive: Cosigner refuses it as a parametersSchema
    async with (
        gateway(inprocess.url, inprocess.acme, upstream, transport=sent) as gw,
        Client(gw.server, mode="legacy") as agent,
    ):
        await agent.list_tools()
        first = await agent.call_tool("plant_tree", TREE)
        assert first.is_error and "pending" in text(first), text(first)
        approval_id = approval_of(first)
        asked_first = sent.sent.count("POST /v1/approvals")
        async with AsyncCosigner(url=inprocess.url, api_key=inprocess.acme_approver) as dashboard:
            pending = await dashboard.get(approval_id)
            assert pending.editable == ()  # approved or denied as sent, never edited
            await dashboard.decide(approval_id, decision="approve", user_id=USER)
        done = await agent.call_tool("plant_tree", TREE)
        assert not done.is_error and text(done) == "planted oak with 1 branches"
        asked_before = sent.sent.count("POST /v1/approvals")
        other = await agent.call_tool("plant_tree", {"tree": {"name": "elm", "children": []}})
        assert other.is_error and "pending" in text(other)
    # Refused once with the schema, then asked without it; later calls skip the schema.
    assert asked_first == 2
    assert sent.sent.count("POST /v1/approvals") == asked_before + 1
    assert calls == [("plant_tree", TREE)]
    assert inprocess.live is not None
    stored = inprocess.live.call(inprocess.live.harness.engine.record(approval_id))
    assert stored.edit is None

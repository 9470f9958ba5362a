"""Pydantic AI: `CosignerApprovals` answers deferred approvals, on `FunctionModel` and a real Cosigner."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import DeferredToolRequests, DeferredToolResults, RunContext, ToolApproved

from cosigner import AsyncCosigner, Cosigner
from cosigner.adapters.pydantic_ai import CosignerApprovals
from cosigner.errors import ParametersMismatch
from tests.adapters.conftest import HEADLESS, SURFACE, Person, results_of, run_script
from tests.adapters.pydantic_ai_agent import REFUND, Script, agent
from tests.harness import until
from tests.sdk.conftest import Polling, Target


async def test_an_approved_call_runs_once_with_the_arguments_shown(
    agent_client: Cosigner, polling: Polling, person: Person, run_id: str
) -> None:
    ran: list[Any] = []
    script = Script()
    support = agent(script, CosignerApprovals(agent_client, SURFACE), ran)
    running = asyncio.create_task(support.run("refund", conversation_id=run_id))
    await until(polling.polling.is_set, seconds=30)
    shown = person.find(run_id, "call_1", "issue_refund", REFUND)
    assert shown.parameters == REFUND
    person.approve(shown.approval_id)
    result = await running
    assert result.output == "done" and ran == [("issue_refund", REFUND)]
    assert script.tool_returns() == ["refunded 12900 on ord_1"]
    assert agent_client.flush_reports(timeout=30)  # the report leaves the call's path
    assert results_of(person.audit(shown.approval_id))[0]["result"] == "refunded 12900 on ord_1"


async def test_a_denied_call_never_runs_and_the_model_reads_the_comment(
    agent_client: Cosigner, polling: Polling, person: Person, run_id: str
) -> None:
    ran: list[Any] = []
    script = Script()
    running = asyncio.create_task(
        agent(script, CosignerApprovals(agent_client, SURFACE), ran).run("refund", conversation_id=run_id)
    )
    await until(polling.polling.is_set, seconds=30)
    person.deny(person.find(run_id, "call_1", "issue_refund", REFUND).approval_id, "ask finance first")
    await running
    assert ran == []
    (said,) = script.tool_returns()
    assert "ask finance first" in said and "Do not retry" in said


async def test_an_expired_call_never_runs(
    agent_client: Cosigner, polling: Polling, person: Person, run_id: str
) -> None:
    ran: list[Any] = []
    script = Script()
    running = asyncio.create_task(
        agent(script, CosignerApprovals(agent_client, SURFACE), ran).run("refund", conversation_id=run_id)
    )
    await until(polling.polling.is_set, seconds=30)
    person.expire(person.find(run_id, "call_1", "issue_refund", REFUND).approval_id)
    await running
    assert ran == [] and "expiry means deny" in script.tool_returns()[0]


async def test_a_read_the_policy_allows_runs_without_anyone(
    inprocess: Target, person: Person, run_id: str
) -> None:
    ran: list[Any] = []
    script = Script("lookup_order", {"order_id": "ord_9"})
    async with AsyncCosigner(inprocess.url, inprocess.acme) as client:
        result = await agent(script, CosignerApprovals(client, SURFACE), ran).run(
            "look", conversation_id=run_id
        )
    assert result.output == "done" and ran == [("lookup_order", {"order_id": "ord_9"})]
    decided = person.find(run_id, "call_1", "lookup_order", {"order_id": "ord_9"})
    assert decided.decided_by is not None and decided.decided_by.kind.value == "policy"
    assert results_of(person.audit(decided.approval_id))[0]["result"] == "order ord_9: 12900"


class Counted(CosignerApprovals):
    """Counts the deferred calls the framework hands to the handler."""

    handled = 0

    async def handle_deferred_tool_calls(
        self, ctx: RunContext[Any], *, requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        self.handled += len(requests.approvals)
        return await super().handle_deferred_tool_calls(ctx, requests=requests)


async def test_a_read_the_policy_allows_is_never_deferred_and_a_call_for_a_person_is(
    agent_client: Cosigner, polling: Polling, person: Person, run_id: str
) -> None:
    ran: list[Any] = []
    reads = Counted(agent_client, SURFACE)
    result = await agent(Script("lookup_order", {"order_id": "ord_9"}), reads, ran).run(
        "look", conversation_id=run_id
    )
    assert result.output == "done" and ran == [("lookup_order", {"order_id": "ord_9"})]
    assert reads.handled == 0  # Cosigner answered before the framework deferred anything
    refunds = Counted(agent_client, SURFACE)
    running = asyncio.create_task(agent(Script(), refunds, ran).run("refund", conversation_id=run_id + "_r"))
    await until(polling.polling.is_set, seconds=30)
    person.approve(person.find(run_id + "_r", "call_1", "issue_refund", REFUND).approval_id)
    assert (await running).output == "done" and refunds.handled == 1
    assert ran[-1] == ("issue_refund", REFUND)
    assert agent_client.flush_reports(timeout=30)
    read = person.find(run_id, "call_1", "lookup_order", {"order_id": "ord_9"})
    assert [r["result"] for r in results_of(person.audit(read.approval_id))] == ["order ord_9: 12900"]


async def test_a_headless_run_is_refused_and_nothing_runs(inprocess: Target, run_id: str) -> None:
    ran: list[Any] = []
    script = Script()
    async with AsyncCosigner(inprocess.url, inprocess.globex) as client:
        await agent(script, CosignerApprovals(client, HEADLESS), ran).run("refund", conversation_id=run_id)
    assert ran == [] and "needs a person's approval" in script.tool_returns()[0]


async def test_approval_given_outside_cosigner_does_not_run_the_call(inprocess: Target, run_id: str) -> None:
    ran: list[Any] = []
    async with AsyncCosigner(inprocess.url, inprocess.acme) as client:
        support = agent(Script(), CosignerApprovals(client, SURFACE, wait=False), ran)
        paused = await support.run("refund", conversation_id=run_id)
        assert isinstance(paused.output, DeferredToolRequests)
        forged = DeferredToolResults(approvals={"call_1": ToolApproved()})
        resumed = await support.run(message_history=paused.all_messages(), deferred_tool_results=forged)
        edited = DeferredToolResults(
            approvals={"call_1": ToolApproved(override_args={**REFUND, "amount_cents": 1})}
        )
        with pytest.raises(ParametersMismatch):
            await support.run(message_history=paused.all_messages(), deferred_tool_results=edited)
    assert ran == [] and resumed.output == "done"


async def test_a_paused_run_resumes_from_its_history_in_a_new_process(
    inprocess: Target, person: Person, run_id: str, tmp_path: Path
) -> None:
    ran: list[Any] = []
    async with AsyncCosigner(inprocess.url, inprocess.acme) as client:
        paused = await agent(Script(), CosignerApprovals(client, SURFACE, wait=False), ran).run(
            "refund", conversation_id=run_id
        )
    assert isinstance(paused.output, DeferredToolRequests) and ran == []
    (tmp_path / "history.json").write_bytes(paused.all_messages_json())
    person.approve(person.find(run_id, "call_1", "issue_refund", REFUND).approval_id)
    env = {
        "COSIGNER_URL": inprocess.url,
        "COSIGNER_API_KEY": inprocess.acme,
        "HISTORY": str(tmp_path / "history.json"),
    }
    out = json.loads(run_script(Path(__file__).with_name("pydantic_ai_resume.py"), env))
    assert out == {"ran": [["issue_refund", REFUND]], "output": "done", "seen": ["refunded 12900 on ord_1"]}


async def test_an_edited_call_runs_once_with_exactly_the_edited_arguments(
    agent_client: Cosigner, polling: Polling, person: Person, run_id: str
) -> None:
    ran: list[Any] = []
    script = Script()
    support = agent(script, CosignerApprovals(agent_client, SURFACE), ran)
    running = asyncio.create_task(support.run("refund", conversation_id=run_id))
    await until(polling.polling.is_set, seconds=30)
    shown = person.find(run_id, "call_1", "issue_refund", REFUND)
    assert shown.editable == ("amount_cents",)
    person.edit(shown.approval_id, amount_cents=4000)
    result = await running
    edited = {**REFUND, "amount_cents": 4000}
    assert result.output == "done" and ran == [("issue_refund", edited)]  # once, never the original
    assert script.tool_returns() == ["refunded 4000 on ord_1"]
    assert agent_client.flush_reports(timeout=30)
    assert results_of(person.audit(shown.approval_id))[0]["result"] == "refunded 4000 on ord_1"

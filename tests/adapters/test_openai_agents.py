"""OpenAI Agents SDK: `needs_approval` interruptions and the blocking guardrail, on `ScriptedModel`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner

from cosigner import AsyncCosigner, Cosigner
from cosigner.adapters.openai_agents import CosignerApprovals, CosignerGuardrail
from cosigner.errors import InvalidRequest
from tests.adapters.conftest import HEADLESS, SURFACE, Person, results_of, run_script
from tests.adapters.openai_agents_agent import REFUND, agent, config, model, seen
from tests.harness import until
from tests.sdk.conftest import Polling, Target


async def test_an_approved_call_runs_once_with_the_arguments_shown(
    agent_client: Cosigner, polling: Polling, person: Person, run_id: str
) -> None:
    ran: list[Any] = []
    scripted = model()
    running = asyncio.create_task(
        CosignerApprovals(agent_client, SURFACE).run(
            agent(scripted, ran), "refund", run_config=config(run_id)
        )
    )
    await until(polling.polling.is_set, seconds=30)
    shown = person.find(run_id, "call_1", "issue_refund", REFUND)
    assert shown.parameters == REFUND
    person.approve(shown.approval_id)
    result = await running
    assert result.final_output == "done" and ran == [("issue_refund", REFUND)]
    assert seen(scripted) == ["refunded 12900 on ord_1"]
    assert agent_client.flush_reports(timeout=30)  # the report leaves the call's path
    assert results_of(person.audit(shown.approval_id))[0]["result"] == "refunded 12900 on ord_1"


async def test_a_denied_call_never_runs_and_the_model_reads_the_comment(
    agent_client: Cosigner, polling: Polling, person: Person, run_id: str
) -> None:
    ran: list[Any] = []
    scripted = model()
    running = asyncio.create_task(
        CosignerApprovals(agent_client, SURFACE).run(
            agent(scripted, ran), "refund", run_config=config(run_id)
        )
    )
    await until(polling.polling.is_set, seconds=30)
    person.deny(person.find(run_id, "call_1", "issue_refund", REFUND).approval_id, "already refunded")
    await running
    assert ran == []
    (said,) = seen(scripted)
    assert "already refunded" in said and "Do not retry" in said


async def test_an_expired_call_never_runs(
    agent_client: Cosigner, polling: Polling, person: Person, run_id: str
) -> None:
    ran: list[Any] = []
    scripted = model()
    running = asyncio.create_task(
        CosignerApprovals(agent_client, SURFACE).run(
            agent(scripted, ran), "refund", run_config=config(run_id)
        )
    )
    await until(polling.polling.is_set, seconds=30)
    person.expire(person.find(run_id, "call_1", "issue_refund", REFUND).approval_id)
    await running
    assert ran == [] and "expiry means deny" in seen(scripted)[0]


async def test_a_read_the_policy_allows_runs_without_anyone(
    inprocess: Target, person: Person, run_id: str
) -> None:
    ran: list[Any] = []
    scripted = model("lookup_order", {"order_id": "ord_9"})
    async with AsyncCosigner(inprocess.url, inprocess.acme) as client:
        result = await CosignerApprovals(client, SURFACE).run(
            agent(scripted, ran), "look", run_config=config(run_id)
        )
    assert result.final_output == "done" and ran == [("lookup_order", {"order_id": "ord_9"})]
    decided = person.find(run_id, "call_1", "lookup_order", {"order_id": "ord_9"})
    assert decided.decided_by is not None and decided.decided_by.kind.value == "policy"
    assert results_of(person.audit(decided.approval_id))[0]["result"] == "order ord_9: 12900"


class Counted(CosignerApprovals):
    """Counts the interruptions the runner answers."""

    interrupted = 0

    async def decide(self, state: Any, execution_id: str, *, wait: bool = True) -> Any:
        self.interrupted += len(state.get_interruptions())
        return await super().decide(state, execution_id, wait=wait)


async def test_a_gated_tool_runs_a_read_at_once_and_interrupts_only_for_a_person(
    agent_client: Cosigner, polling: Polling, person: Person, run_id: str
) -> None:
    ran: list[Any] = []
    approvals = Counted(agent_client, SURFACE)
    tools = [approvals.gate(t) for t in agent(model(), ran).tools]  # type: ignore[arg-type]
    result = await approvals.run(
        Agent(name="support", model=model("lookup_order", {"order_id": "ord_9"}), tools=list(tools)),
        "look",
        run_config=config(run_id),
    )
    assert result.final_output == "done" and ran == [("lookup_order", {"order_id": "ord_9"})]
    assert approvals.interrupted == 0  # Cosigner answered inside needs_approval
    scripted = model()
    running = asyncio.create_task(
        approvals.run(
            Agent(name="support", model=scripted, tools=list(tools)),
            "refund",
            run_config=config(run_id + "_r"),
        )
    )
    await until(polling.polling.is_set, seconds=30)
    shown = person.find(run_id + "_r", "call_1", "issue_refund", REFUND)
    person.approve(shown.approval_id)
    assert (await running).final_output == "done" and approvals.interrupted == 1
    assert ran[-1] == ("issue_refund", REFUND) and seen(scripted) == ["refunded 12900 on ord_1"]
    assert agent_client.flush_reports(timeout=30)
    read = person.find(run_id, "call_1", "lookup_order", {"order_id": "ord_9"})
    assert [r["result"] for r in results_of(person.audit(read.approval_id))] == ["order ord_9: 12900"]
    # Asked again by its needs_approval on resume, the approved call is still reported once.
    assert [r["result"] for r in results_of(person.audit(shown.approval_id))] == ["refunded 12900 on ord_1"]


def test_a_gated_tool_outside_the_runner_always_interrupts(agent_client: Cosigner) -> None:
    (tool, _) = agent(model(), []).tools
    CosignerApprovals(agent_client, SURFACE).gate(tool)  # type: ignore[arg-type]
    support = Agent(name="support", model=model(), tools=[tool])
    result = asyncio.run(Runner.run(support, "refund", run_config=config("run_outside")))
    assert [i.name for i in result.interruptions] == ["issue_refund"]


async def test_a_headless_run_is_refused_and_nothing_runs(inprocess: Target, run_id: str) -> None:
    ran: list[Any] = []
    scripted = model()
    async with AsyncCosigner(inprocess.url, inprocess.globex) as client:
        await CosignerApprovals(client, HEADLESS).run(
            agent(scripted, ran), "refund", run_config=config(run_id)
        )
    assert ran == [] and "needs a person's approval" in seen(scripted)[0]


def test_a_run_without_an_id_is_refused_before_anything_is_asked(inprocess: Target) -> None:
    with pytest.raises(ValueError, match="group_id"), inprocess.client() as client:
        asyncio.run(CosignerApprovals(client, SURFACE).run(agent(model(), []), "refund"))


async def test_a_paused_run_resumes_from_its_string_in_a_new_process(
    inprocess: Target, person: Person, run_id: str, tmp_path: Path
) -> None:
    ran: list[Any] = []
    async with AsyncCosigner(inprocess.url, inprocess.acme) as client:
        paused = await CosignerApprovals(client, SURFACE).run(
            agent(model(answer=False), ran), "refund", run_config=config(run_id), wait=False
        )
    (item,) = paused.interruptions
    (tmp_path / "state.json").write_text(paused.to_state().to_string())
    person.deny(person.find(run_id, item.call_id or "", "issue_refund", REFUND).approval_id, "not this one")
    env = {"COSIGNER_URL": inprocess.url, "COSIGNER_API_KEY": inprocess.acme}
    out = json.loads(
        run_script(
            Path(__file__).with_name("openai_agents_resume.py"),
            {**env, "STATE": str(tmp_path / "state.json"), "THREAD": run_id},
        )
    )
    assert ran == [] and out["ran"] == [] and out["output"] == "done"
    (said,) = out["seen"]
    assert "not this one" in said


@pytest.mark.parametrize("approve", [True, False], ids=["approved", "denied"])
async def test_the_guardrail_blocks_until_decided(
    agent_client: Cosigner, polling: Polling, person: Person, run_id: str, approve: bool
) -> None:
    ran: list[Any] = []
    scripted = model()
    support = agent(scripted, ran, needs_approval=False)
    guard = CosignerGuardrail(agent_client, SURFACE)
    for tool in support.tools:
        guard.gate(tool)  # type: ignore[arg-type]
    running = asyncio.create_task(Runner.run(support, "refund", run_config=config(run_id)))
    await until(polling.polling.is_set, seconds=30)
    shown = person.find(run_id, "call_1", "issue_refund", REFUND)
    if approve:
        person.approve(shown.approval_id)
    else:
        person.deny(shown.approval_id, "no refunds today")
    await running
    if approve:
        assert ran == [("issue_refund", REFUND)] and seen(scripted) == ["refunded 12900 on ord_1"]
        assert agent_client.flush_reports(timeout=30)
        assert results_of(person.audit(shown.approval_id))[0]["result"] == "refunded 12900 on ord_1"
    else:
        assert ran == [] and "no refunds today" in seen(scripted)[0]


async def test_the_adapter_says_it_cannot_run_an_edited_call(
    agent_client: Cosigner, polling: Polling, person: Person, run_id: str
) -> None:
    # RunState.approve runs the call as the model made it: no edit is offered, so none can run.
    ran: list[Any] = []
    scripted = model()
    running = asyncio.create_task(
        CosignerApprovals(agent_client, SURFACE).run(
            agent(scripted, ran), "refund", run_config=config(run_id)
        )
    )
    await until(polling.polling.is_set, seconds=30)
    shown = person.find(run_id, "call_1", "issue_refund", REFUND)
    assert shown.editable == ()  # the policy marks amount_cents editable, but the agent cannot run an edit
    with pytest.raises(InvalidRequest, match="offers no edit"):
        person.edit(shown.approval_id, amount_cents=4000)
    person.approve(shown.approval_id)
    await running
    assert ran == [("issue_refund", REFUND)]

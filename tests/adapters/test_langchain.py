"""LangChain v1: `CosignerMiddleware` in `create_agent`, on LangChain's fake chat model, a real Cosigner."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from cosigner import AsyncCosigner, Cosigner
from cosigner.adapters.langchain import CosignerMiddleware, hitl_decision, pending_approvals
from tests.adapters.conftest import HEADLESS, SURFACE, Person, in_background, results_of, run_script
from tests.adapters.langchain_agent import ScriptedChat, agent, calls
from tests.sdk.conftest import Polling, Target

REFUND = {"order_id": "ord_1", "amount_cents": 12900}


def refund_run(client: Cosigner, run: str, ran: list[Any], **options: Any) -> tuple[ScriptedChat, Any]:
    """A scripted model that asks for one refund, then answers; and the agent's invoke."""
    model = ScriptedChat(messages=iter([calls(("issue_refund", REFUND, "call_r1")), AIMessage(content="ok")]))
    graph = agent(model, CosignerMiddleware(client, SURFACE, **options), ran, InMemorySaver())
    return model, lambda: graph.invoke(
        {"messages": [("user", "refund ord_1")]}, {"configurable": {"thread_id": run}}
    )


def test_an_approved_call_runs_once_with_the_arguments_shown(
    agent_client: Cosigner, polling: Polling, person: Person, run_id: str
) -> None:
    ran: list[Any] = []
    model, invoke = refund_run(agent_client, run_id, ran)
    running = in_background(invoke)
    assert polling.polling.wait(30)
    shown = person.find(run_id, "call_r1", "issue_refund", REFUND)
    assert shown.parameters == REFUND and shown.execution_id == run_id
    person.approve(shown.approval_id)
    running.result(timeout=30)
    assert ran == [("issue_refund", REFUND)]
    assert model.tool_messages() == ["refunded 12900 on ord_1"]
    assert agent_client.flush_reports(timeout=30)  # the report leaves the call's path
    assert results_of(person.audit(shown.approval_id)) == [
        {"outcome": "succeeded", "result": "refunded 12900 on ord_1", "error": None}
    ]


def test_a_denied_call_never_runs_and_the_model_reads_the_comment(
    agent_client: Cosigner, polling: Polling, person: Person, run_id: str
) -> None:
    ran: list[Any] = []
    model, invoke = refund_run(agent_client, run_id, ran)
    running = in_background(invoke)
    assert polling.polling.wait(30)
    shown = person.find(run_id, "call_r1", "issue_refund", REFUND)
    person.deny(shown.approval_id, "refund already issued last week")
    running.result(timeout=30)
    assert ran == []
    (seen,) = model.tool_messages()
    assert "refund already issued last week" in seen and "Do not retry" in seen


def test_an_expired_call_never_runs(
    agent_client: Cosigner, polling: Polling, person: Person, run_id: str
) -> None:
    ran: list[Any] = []
    model, invoke = refund_run(agent_client, run_id, ran)
    running = in_background(invoke)
    assert polling.polling.wait(30)
    person.expire(person.find(run_id, "call_r1", "issue_refund", REFUND).approval_id)
    running.result(timeout=30)
    assert ran == []
    (seen,) = model.tool_messages()
    assert "expired" in seen and "expiry means deny" in seen


def test_a_read_the_policy_allows_runs_without_anyone(inprocess: Target, person: Person, run_id: str) -> None:
    ran: list[Any] = []
    model = ScriptedChat(
        messages=iter([calls(("lookup_order", {"order_id": "ord_9"}, "call_l1")), AIMessage(content="ok")])
    )
    with inprocess.client() as client:
        graph = agent(model, CosignerMiddleware(client, SURFACE), ran)
        graph.invoke({"messages": [("user", "look")]}, {"configurable": {"thread_id": run_id}})
    assert ran == [("lookup_order", {"order_id": "ord_9"})]
    decided = person.find(run_id, "call_l1", "lookup_order", {"order_id": "ord_9"})
    assert decided.approved and decided.decided_by is not None and decided.decided_by.kind.value == "policy"
    (report,) = results_of(person.audit(decided.approval_id))
    assert json.loads(report["result"]) == {"orderId": "ord_9", "total": 12900}


@pytest.mark.parametrize(
    ("tenant", "surface", "tool", "args", "said"),
    [
        ("globex", HEADLESS, "issue_refund", REFUND, "needs a person's approval"),
        ("acme", SURFACE, "delete_account", {"account_id": "a1"}, "support staff only"),
    ],
    ids=["headless-run-refused", "standing-deny"],
)
def test_a_refused_call_ends_closed_with_its_message(
    inprocess: Target, run_id: str, tenant: str, surface: Any, tool: str, args: dict[str, Any], said: str
) -> None:
    ran: list[Any] = []
    model = ScriptedChat(messages=iter([calls((tool, args, "call_x")), AIMessage(content="ok")]))
    with inprocess.client(getattr(inprocess, tenant)) as client:
        graph = agent(model, CosignerMiddleware(client, surface), ran)
        graph.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": run_id}})
    assert ran == []
    (seen,) = model.tool_messages()
    assert said in seen and "Do not retry" in seen


def test_only_the_named_tools_are_asked_about(inprocess: Target, run_id: str) -> None:
    ran: list[Any] = []
    model = ScriptedChat(
        messages=iter([calls(("delete_account", {"account_id": "a1"}, "call_d")), AIMessage(content="ok")])
    )
    with inprocess.client() as client:
        graph = agent(model, CosignerMiddleware(client, SURFACE, tools=["issue_refund"]), ran)
        graph.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": run_id}})
    assert ran == [("delete_account", {"account_id": "a1"})]


def test_an_interrupted_run_resumes_in_a_new_process(
    inprocess: Target, person: Person, run_id: str, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "checkpoints.db"
    ran: list[Any] = []
    model = ScriptedChat(messages=iter([calls(("issue_refund", REFUND, "call_r1"))]))
    config: Any = {"configurable": {"thread_id": run_id}}
    with inprocess.client() as client, sqlite3.connect(checkpoint, check_same_thread=False) as db:
        graph = agent(model, CosignerMiddleware(client, SURFACE, interrupt=True), ran, SqliteSaver(db))
        paused = graph.invoke({"messages": [("user", "refund ord_1")]}, config)
        # The node runs again from its start on resume: asking twice must not make a second approval.
        (waiting,) = pending_approvals(paused["__interrupt__"])
        again = graph.invoke(None, config)
        (still,) = pending_approvals(again["__interrupt__"])
    assert ran == [] and still["approval_id"] == waiting["approval_id"]
    assert waiting["args"] == REFUND and waiting["tool_call_id"] == "call_r1"
    person.approve(waiting["approval_id"])
    env = {"COSIGNER_URL": inprocess.url, "COSIGNER_API_KEY": inprocess.acme}
    out = json.loads(
        run_script(
            Path(__file__).with_name("langchain_resume.py"),
            {**env, "CHECKPOINT": str(checkpoint), "THREAD": run_id},
        )
    )
    assert out == {"ran": [["issue_refund", REFUND]], "seen": ["refunded 12900 on ord_1"]}
    assert results_of(person.audit(waiting["approval_id"]))[0]["result"] == "refunded 12900 on ord_1"


async def test_the_async_agent_asks_with_the_async_client(
    inprocess: Target, person: Person, run_id: str
) -> None:
    ran: list[Any] = []
    model = ScriptedChat(
        messages=iter([calls(("delete_account", {"account_id": "a1"}, "call_d")), AIMessage(content="ok")])
    )
    async with AsyncCosigner(inprocess.url, inprocess.acme) as client:
        graph = agent(model, CosignerMiddleware(client, SURFACE), ran)
        await graph.ainvoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": run_id}})
    assert ran == [] and "support staff only" in model.tool_messages()[0]


def test_a_run_without_a_thread_id_is_refused_before_anything_runs(inprocess: Target) -> None:
    ran: list[Any] = []
    model = ScriptedChat(
        messages=iter([calls(("lookup_order", {"order_id": "o"}, "call_l")), AIMessage("ok")])
    )
    with inprocess.client() as client, pytest.raises(ValueError, match="thread_id"):
        agent(model, CosignerMiddleware(client, SURFACE), ran).invoke({"messages": [("user", "go")]})
    assert ran == []


def test_an_edited_call_runs_once_with_exactly_the_edited_arguments(
    agent_client: Cosigner, polling: Polling, person: Person, run_id: str
) -> None:
    ran: list[Any] = []
    model, invoke = refund_run(agent_client, run_id, ran)
    running = in_background(invoke)
    assert polling.polling.wait(30)
    shown = person.find(run_id, "call_r1", "issue_refund", REFUND)
    assert shown.editable == ("amount_cents",)  # the middleware accepts edits; `note` is not in the call
    decided = person.edit(shown.approval_id, amount_cents=4000)
    running.result(timeout=30)
    edited = {**REFUND, "amount_cents": 4000}
    assert ran == [("issue_refund", edited)]  # once, with the edit; the original never ran
    (seen,) = model.tool_messages()
    assert seen.startswith("refunded 4000 on ord_1") and "edited" in seen and "12900" not in seen
    assert hitl_decision(decided.with_original(REFUND)) == {
        "type": "edit",
        "edited_action": {"name": "issue_refund", "args": edited},
    }
    # The request carried the tool's schema, so the approver gets typed inputs.
    requested = person.audit(shown.approval_id)[0]["data"]
    assert requested["editable"] == ["amount_cents"]

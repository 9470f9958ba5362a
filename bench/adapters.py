"""What each framework adapter adds to a tool call that needs nobody, on loopback.

    .venv/bin/python bench/adapters.py [--runs 200] [--rounds 3]

It starts `cosigner serve` on SQLite pinned to one core (as bench/roundtrip.py does) and,
from this process pinned to the other core, runs one-tool agent runs one at a time: the
framework's own fake model asks for `lookup_order` (a read the policy allows), the tool
runs, the model answers. Each framework runs the same agent without Cosigner and with its
adapter, alternating in rounds; the adapter's cost is the difference of the p50 wall times
of a whole run, so it includes the framework's own extra work (an interruption and resume,
a deferral and its handler) as well as Cosigner's answer and the `/result` report (which
the adapters send off the call's path: its CPU counts, the wait for its answer does not).
The agent process's CPU time per run is shown beside it: that part does not depend on how
busy the server's core is. The Agents SDK runner is measured twice: with a tool left at
`needs_approval=True` (an interruption first) and with `approvals.gate(tool)` (Cosigner
asked before any interruption).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from roundtrip import READ_POLICY, Server, machine, pick_cores, running_server

from cosigner import AsyncCosigner, Cosigner, DashboardSurface

POLICY = READ_POLICY
SURFACE = DashboardSurface(user_id="u_bench")
Run = Callable[[int], Awaitable[None]]


def langchain_runs(client: Cosigner) -> tuple[Run, Run]:
    """LangChain v1 `create_agent` on a fake chat model, without and with `CosignerMiddleware`."""
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
    from langchain_core.tools import tool

    from cosigner.adapters.langchain import CosignerMiddleware

    class Looping(GenericFakeChatModel):
        def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Looping:
            return self

        def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
            if isinstance(messages[-1], ToolMessage):
                reply = AIMessage(content="done")
            else:
                reply = AIMessage(
                    content="", tool_calls=[{"name": "lookup_order", "args": {"order_id": "o1"}, "id": "c1"}]
                )
            self.messages = iter([reply])
            return super()._generate(messages, *args, **kwargs)

    @tool
    def lookup_order(order_id: str) -> str:
        """Read an order."""
        return f"order {order_id}"

    model = Looping(messages=iter([]))
    bare = create_agent(model, [lookup_order])
    gated = create_agent(model, [lookup_order], middleware=[CosignerMiddleware(client, SURFACE)])

    def runner(agent: Any, tag: str) -> Run:
        async def run(i: int) -> None:
            agent.invoke({"messages": [("user", "look")]}, {"configurable": {"thread_id": f"lc_{tag}_{i}"}})

        return run

    return runner(bare, "bare"), runner(gated, "gated")


def openai_runs(client: AsyncCosigner, runs: int) -> tuple[Run, Run, Run, Run]:
    """OpenAI Agents SDK on `ScriptedModel`: bare, the guardrail, `needs_approval=True` with the
    runner, and the runner with `approvals.gate(tool)` (Cosigner asked before any interruption)."""
    from agents import Agent, RunConfig, Runner, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    from cosigner.adapters.openai_agents import CosignerApprovals, CosignerGuardrail

    def script() -> ScriptedModel:
        step = [
            [function_call("lookup_order", {"order_id": "o1"}, call_id="c1")],
            [assistant_message("done")],
        ]
        return ScriptedModel(step * runs)

    def tools(needs_approval: bool) -> Any:
        @function_tool(needs_approval=needs_approval)
        def lookup_order(order_id: str) -> str:
            """Read an order."""
            return f"order {order_id}"

        return lookup_order

    bare = Agent(name="bare", model=script(), tools=[tools(False)])
    guarded_tool = tools(False)
    CosignerGuardrail(client, SURFACE).gate(guarded_tool)
    guarded = Agent(name="guarded", model=script(), tools=[guarded_tool])
    interrupted = Agent(name="interrupted", model=script(), tools=[tools(True)])
    approvals = CosignerApprovals(client, SURFACE)
    asked = Agent(name="asked", model=script(), tools=[approvals.gate(tools(True))])

    async def run_bare(i: int) -> None:
        await Runner.run(bare, "look", run_config=RunConfig(tracing_disabled=True, group_id=f"oa_b_{i}"))

    async def run_guarded(i: int) -> None:
        await Runner.run(guarded, "look", run_config=RunConfig(tracing_disabled=True, group_id=f"oa_g_{i}"))

    async def run_interrupted(i: int) -> None:
        await approvals.run(
            interrupted, "look", run_config=RunConfig(tracing_disabled=True, group_id=f"oa_i_{i}")
        )

    async def run_asked(i: int) -> None:
        await approvals.run(asked, "look", run_config=RunConfig(tracing_disabled=True, group_id=f"oa_a_{i}"))

    return run_bare, run_guarded, run_interrupted, run_asked


def pydantic_ai_runs(client: AsyncCosigner) -> tuple[Run, Run]:
    """Pydantic AI on `FunctionModel`, without and with `CosignerApprovals`."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from cosigner.adapters.pydantic_ai import CosignerApprovals

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("lookup_order", {"order_id": "o1"}, tool_call_id="c1")])

    def lookup_order(order_id: str) -> str:
        """Read an order."""
        return f"order {order_id}"

    bare: Agent[None, str] = Agent(FunctionModel(respond), tools=[lookup_order])
    gated: Agent[None, str] = Agent(
        FunctionModel(respond), tools=[lookup_order], capabilities=[CosignerApprovals(client, SURFACE)]
    )

    async def run_bare(i: int) -> None:
        await bare.run("look", conversation_id=f"pa_b_{i}")

    async def run_gated(i: int) -> None:
        await gated.run("look", conversation_id=f"pa_g_{i}")

    return run_bare, run_gated


Figures = dict[str, tuple[float, float, float, float]]


def floor_runs(client: AsyncCosigner) -> tuple[Run, Run, Run]:
    """The floor, with the SDK alone: nothing; one policy read; the read and its `/result` report."""

    async def nothing(i: int) -> None:
        return None

    async def read(i: int) -> None:
        await client.request_approval(
            execution_id=f"sdk_r_{i}",
            tool_call_id="c1",
            tool_name="lookup_order",
            parameters={"order_id": "o1"},
            surface=SURFACE,
        )

    async def read_and_report(i: int) -> None:
        decision = await client.request_approval(
            execution_id=f"sdk_rr_{i}",
            tool_call_id="c1",
            tool_name="lookup_order",
            parameters={"order_id": "o1"},
            surface=SURFACE,
        )
        await client.report_result(decision, result="order o1")

    return nothing, read, read_and_report


async def measure(pairs: dict[str, tuple[Run, Run]], runs: int, rounds: int) -> Figures:
    """p50 wall ms and p50 agent-process CPU ms of a bare and of a gated run, per framework."""
    wall: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in pairs}
    cpu: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in pairs}
    for r in range(rounds):
        for name, (bare, gated) in pairs.items():
            for which, run in ((0, bare), (1, gated)):
                await run(-1 - r)  # warm: the first run of a round opens connections
                for i in range(runs):
                    started, started_cpu = time.perf_counter(), time.process_time()
                    await run(r * runs + i)
                    wall[name][which].append((time.perf_counter() - started) * 1000)
                    cpu[name][which].append((time.process_time() - started_cpu) * 1000)
    return {
        n: (
            statistics.median(wall[n][0]),
            statistics.median(wall[n][1]),
            statistics.median(cpu[n][0]),
            statistics.median(cpu[n][1]),
        )
        for n in pairs
    }


async def main_async(args: argparse.Namespace) -> None:
    server_core, client_core = pick_cores()
    print(machine().split("; client:")[0])
    async with running_server("sqlite", "", server_core, "WARNING", policy_text=POLICY) as server:
        if client_core is not None:
            os.sched_setaffinity(0, {client_core})
        figures = await run_all(server, args.runs, args.rounds)
    print(f"{args.rounds} rounds x {args.runs} runs each, one read per run, sequential, SQLite")
    print("ms per run, p50: wall time bare / gated / added; this process's CPU bare / gated / added")
    for name, (bare, gated, bare_cpu, gated_cpu) in figures.items():
        print(
            f"{name:<38} {bare:7.2f} {gated:7.2f} {gated - bare:7.2f}   "
            f"{bare_cpu:6.2f} {gated_cpu:6.2f} {gated_cpu - bare_cpu:6.2f}"
        )


async def run_all(server: Server, runs: int, rounds: int) -> Figures:
    with Cosigner(server.url, server.key) as blocking:
        async with AsyncCosigner(server.url, server.key) as client:
            oa_bare, oa_guard, oa_interrupt, oa_asked = openai_runs(client, 3 * (runs + 1) * rounds + 2)
            nothing, read, read_and_report = floor_runs(client)
            pairs = {
                "SDK alone: one read": (nothing, read),
                "SDK alone: read + /result": (nothing, read_and_report),
                "langchain CosignerMiddleware": langchain_runs(blocking),
                "openai-agents CosignerGuardrail": (oa_bare, oa_guard),
                "openai-agents CosignerApprovals.run": (oa_bare, oa_interrupt),
                "openai-agents run + approvals.gate": (oa_bare, oa_asked),
                "pydantic-ai CosignerApprovals": pydantic_ai_runs(client),
            }
            return await measure(pairs, runs, rounds)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--rounds", type=int, default=3)
    asyncio.run(main_async(p.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Resume a paused OpenAI Agents SDK run in a fresh process, from its `RunState.to_string()`.

Reads COSIGNER_URL, COSIGNER_API_KEY, STATE (a file holding the string) and THREAD; prints
JSON: the calls the tools ran, the final output and the tool outputs the model then saw.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from agents import RunState
from agents.testing import ScriptedModel, assistant_message

from cosigner import AsyncCosigner, DashboardSurface
from cosigner.adapters.openai_agents import CosignerApprovals
from tests.adapters.openai_agents_agent import agent, config, seen


async def main(saved: str) -> None:
    ran: list[tuple[str, dict[str, Any]]] = []
    scripted = ScriptedModel([[assistant_message("done")]])
    support = agent(scripted, ran)
    state = await RunState.from_string(support, saved)
    async with AsyncCosigner() as client:
        approvals = CosignerApprovals(client, DashboardSurface(user_id="u_1"))
        result = await approvals.run(support, state, run_config=config(os.environ["THREAD"]))
    print(json.dumps({"ran": ran, "output": result.final_output, "seen": seen(scripted)}))


if __name__ == "__main__":
    asyncio.run(main(Path(os.environ["STATE"]).read_text()))

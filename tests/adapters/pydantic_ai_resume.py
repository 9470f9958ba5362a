"""Resume a paused Pydantic AI run in a fresh process, from its message history (JSON).

Reads COSIGNER_URL, COSIGNER_API_KEY and HISTORY (a file holding `all_messages_json()`);
prints JSON: the calls the tools ran, the output and the tool returns the model then saw.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessagesTypeAdapter

from cosigner import AsyncCosigner, DashboardSurface
from cosigner.adapters.pydantic_ai import CosignerApprovals
from tests.adapters.pydantic_ai_agent import Script, agent


async def main(saved: bytes) -> None:
    ran: list[tuple[str, dict[str, Any]]] = []
    script = Script()
    async with AsyncCosigner() as client:
        support = agent(script, CosignerApprovals(client, DashboardSurface(user_id="u_1")), ran)
        result = await support.run(message_history=ModelMessagesTypeAdapter.validate_json(saved))
    print(json.dumps({"ran": ran, "output": str(result.output), "seen": script.tool_returns()}))


if __name__ == "__main__":
    asyncio.run(main(Path(os.environ["HISTORY"]).read_bytes()))

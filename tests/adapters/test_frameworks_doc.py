"""Every snippet of docs/frameworks.md runs as shown, against a running sandbox (`./run dev`).

Each section's Python blocks run in order in one subprocess (`frameworks_doc.py`), with
COSIGNER_URL and COSIGNER_API_KEY pointing at the sandbox, as the docs say to export
them; the test presses Approve as the requester on each card the snippets make.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.dev.sandbox import sandbox

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "frameworks.md"
RUNNER = Path(__file__).with_name("frameworks_doc.py")


def sections() -> dict[str, list[str]]:
    """The Python blocks of each `## ` section of the page, in order."""
    found: dict[str, list[str]] = {}
    for part in re.split(r"^## ", DOC.read_text(encoding="utf-8"), flags=re.M)[1:]:
        title = part.splitlines()[0].strip()
        blocks = re.findall(r"^```python\n(.*?)^```", part, flags=re.M | re.S)
        if blocks:
            found[title] = blocks
    return found


def test_the_page_has_the_snippets_this_test_runs() -> None:
    assert {title: len(blocks) for title, blocks in sections().items()} == {
        "LangChain v1 / LangGraph": 2,
        "OpenAI Agents SDK": 3,
        "Pydantic AI": 1,
        "Temporal": 1,
    }


async def approve_each_card(http: httpx.AsyncClient, done: asyncio.Event) -> int:
    """Press Approve on every card with buttons until `done`; how many cards were pressed.

    A card still showing its buttons a second after a press is pressed again: a click that
    lands before Cosigner has recorded where the card was posted is refused (as in Slack),
    and a card cannot be told apart from the outside until it is updated."""
    loop = asyncio.get_running_loop()
    pressed: dict[tuple[str, str], float] = {}
    while not done.is_set():
        for message in (await http.get("/sandbox/api/state")).json()["messages"]:
            key = (message["channel"], message["ts"])
            buttons = any(block.get("type") == "actions" for block in message["blocks"])
            if buttons and loop.time() - pressed.get(key, -10.0) > 1.0:
                click = {"channel": key[0], "ts": key[1], "actionId": "cosigner.approve", "as": "requester"}
                assert (await http.post("/sandbox/api/click", json=click)).json() == {"status": 200}
                pressed[key] = loop.time()
        await asyncio.sleep(0.05)
    return len(pressed)


@pytest.mark.parametrize(
    ("section", "cards"),
    [("LangChain v1 / LangGraph", 2), ("OpenAI Agents SDK", 3), ("Pydantic AI", 1), ("Temporal", 0)],
)
async def test_each_snippet_runs_as_shown_against_the_sandbox(
    section: str, cards: int, tmp_path: Path
) -> None:
    snippets = tmp_path / "snippets.json"
    snippets.write_text(json.dumps(sections()[section]))
    async with (
        sandbox("127.0.0.1", 0, tmp_path / "cosigner-data") as sb,
        httpx.AsyncClient(base_url=sb.url, timeout=10) as http,
    ):
        env = {k: v for k, v in os.environ.items() if not k.startswith("COSIGNER_")}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(RUNNER),
            str(snippets),
            env={**env, "COSIGNER_URL": sb.url, "COSIGNER_API_KEY": sb.api_key},
            cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        done = asyncio.Event()
        approving = asyncio.create_task(approve_each_card(http, done))
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), 120)
        finally:
            done.set()
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        pressed = await approving
    printed: Any = out.decode()
    assert proc.returncode == 0, printed
    assert printed.count("ran\n") == len(sections()[section]), printed
    assert pressed == cards, printed

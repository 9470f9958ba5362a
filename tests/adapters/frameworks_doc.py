"""Run one section's snippets of docs/frameworks.md in order, in one namespace and one event
loop, as `python -m asyncio` runs what is pasted into it (top-level `await` allowed).

    python tests/adapters/frameworks_doc.py SNIPPETS.json
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import sys
from typing import Any


def run(blocks: list[str]) -> None:
    """Execute each block; a block's top-level awaits run on the one loop."""
    namespace: dict[str, Any] = {"__name__": "__main__"}
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    for n, block in enumerate(blocks, 1):
        code = compile(block, f"<snippet {n}>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, namespace)  # the documentation's own snippets
        if inspect.iscoroutine(result):
            loop.run_until_complete(result)
        print(f"snippet {n} ran", flush=True)


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        run(json.load(f))

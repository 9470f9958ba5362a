"""What the TypeScript SDK adds to a call that needs nobody, next to the same request made with bare `fetch`.

    .venv/bin/python bench/sdk_typescript.py [--calls 1500]

Needs `npm ci && npm run build` in sdk/typescript first. It starts `cosigner serve` on
SQLite pinned to one core (as bench/sdk.py does) and runs bench/sdk_typescript.mjs under
Node pinned to the other: a **read** the policy allows (`lookup_order`: one POST answered
200), made one at a time on keep-alive connections, alternately with bare `fetch` (post the
JSON, parse the answer) and with `@cosigner/sdk`'s `requestApproval` (checks the request,
maps errors, checks the answer is a decision). Medians of wall time and of Node's own CPU
per call; then the same calls against a canned answer (no network, no server), quickest of
five repeats: the SDK's own JavaScript per call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from roundtrip import _stop_all, machine, pick_cores, running_server

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "sdk_typescript.mjs"
BUILT = HERE.parent / "sdk" / "typescript" / "dist" / "src" / "index.js"
POLICY = """
[defaults]
timeout = "1h"
max_gated_calls_per_execution = 1000000

[tools.lookup_order]
kind = "read"
"""


async def main_async(calls: int) -> None:
    if not BUILT.exists():
        raise SystemExit("build the TypeScript SDK first: cd sdk/typescript && npm ci && npm run build")
    node = shutil.which("node")
    if node is None:
        raise SystemExit("node is not on PATH; install Node 18 or later")
    server_core, client_core = pick_cores()
    async with running_server("sqlite", "", server_core, "WARNING", policy_text=POLICY) as server:
        command = [node, str(SCRIPT), server.url, server.key, str(calls)]
        if client_core is not None and shutil.which("taskset"):
            command = ["taskset", "-c", str(client_core), *command]
        # The server runs in its own process, so blocking this loop while Node measures is harmless.
        out = await asyncio.to_thread(
            subprocess.run, command, capture_output=True, text=True, check=True, timeout=600
        )
    result = json.loads(out.stdout)
    wall, cpu, canned = result["wallMs"], result["cpuMs"], result["cannedMicros"]
    print(machine().split("; client:")[0])
    print(f"node {result['node']}, {calls} reads each")
    print(f"wall ms  raw {wall['raw']:.3f}  sdk {wall['sdk']:.3f}  (+{wall['sdk'] - wall['raw']:.3f})")
    print(f"cpu ms   raw {cpu['raw']:.3f}  sdk {cpu['sdk']:.3f}  (+{cpu['sdk'] - cpu['raw']:.3f})")
    extra = canned["sdk"] - canned["raw"]
    print(f"canned   raw {canned['raw']:.1f} µs  sdk {canned['sdk']:.1f} µs  (+{extra:.1f} µs)")


def main() -> int:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1500)
    args = parser.parse_args()
    try:
        asyncio.run(main_async(args.calls))
    finally:
        _stop_all()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())

"""Server CPU per create that asks a person, and per identical create coalesced with it
(`POST /v1/approvals` in process over httpx's ASGI transport, `tests.harness.cosigner_app`).

    .venv/bin/python bench/coalesce.py [--rounds 5] [--calls 800] [--base DIR] [--postgres]

"asked": a new dashboard request each time (a new execution), answered `201 approval_start`.
"coalesced": the same call again with a new `toolCallId` while the first is pending,
answered `201` with `coalesced: true` (a second read and the `coalesced` audit event).

With `--base DIR` (a checkout of the code before coalescing, e.g. `git archive main | tar -x
-C DIR`) each round runs once on DIR's code and once on this tree's, alternately, each in a
fresh process, so both see the same machine; DIR measures "asked" only (there, the same call
again is asked again: "again" in the table). The figure is process CPU time (not wall time)
per create, lowest and median of the rounds; on PostgreSQL (`--postgres`, the URL in
COSIGNER_TEST_POSTGRES_URL) the database's own CPU is not in it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
POLICY = """
[defaults]
max_gated_calls_per_execution = 100000

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]
"""


def child(tree: str, calls: int, kind: str) -> dict[str, float]:
    """Measure on the code of `tree` (run in a process of its own)."""
    sys.path[:0] = [tree, f"{tree}/sdk/python"]
    from tests.harness import cosigner_app

    def body(execution: str, call: str) -> dict[str, Any]:
        return {
            "executionId": execution,
            "toolCallId": call,
            "toolName": "issue_refund",
            "parameters": {"orderId": "ord_1", "amountCents": 12900},
            "surface": {"type": "dashboard", "userId": "u_dev"},
        }

    out: dict[str, float] = {}

    async def creates() -> None:
        async with cosigner_app(POLICY, run_workers=False, database_kind=kind) as h:
            key = await h.create_tenant("acme")

            async def timed(bodies: list[dict[str, Any]]) -> tuple[float, list[dict[str, Any]]]:
                for b in bodies[:50]:  # warm up: caches, the first statements
                    await h.client.post("/v1/approvals", json=b, headers=h.auth(key))
                answers = []
                start = time.process_time()
                for b in bodies[50:]:
                    r = await h.client.post("/v1/approvals", json=b, headers=h.auth(key))
                    answers.append(r.json())
                return (time.process_time() - start) / (len(bodies) - 50) * 1e3, answers

            asked, got = await timed([body(f"run_{i}", "c1") for i in range(calls + 50)])
            assert all(a["status"] == "pending" and not a.get("coalesced") for a in got)
            out["asked"] = asked
            again, got = await timed([body("run_same", f"c{i}") for i in range(calls + 50)])
            coalesced = [a.get("coalesced", False) for a in got]
            out["coalesced" if all(coalesced) else "again"] = again
            assert all(coalesced) or not any(coalesced)

    asyncio.run(creates())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=800)
    parser.add_argument("--base", help="a checkout of the code before coalescing")
    parser.add_argument("--postgres", action="store_true", help="on COSIGNER_TEST_POSTGRES_URL")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--kind", default="sqlite", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.calls, args.kind)))
        return
    kind = "postgres" if args.postgres else "sqlite"
    trees = ([("before", args.base)] if args.base else []) + [("after", str(ROOT))]
    found: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for label, tree in trees:
            env = {"PYTHONPATH": f"{tree}:{tree}/sdk/python", "PATH": "/usr/bin:/bin"}
            if os.environ.get("COSIGNER_TEST_POSTGRES_URL"):
                env["COSIGNER_TEST_POSTGRES_URL"] = os.environ["COSIGNER_TEST_POSTGRES_URL"]
            run = subprocess.run(
                [sys.executable, __file__, "--child", tree, "--calls", str(args.calls), "--kind", kind],
                capture_output=True,
                text=True,
                check=True,
                env=env,
            )
            measured: dict[str, float] = json.loads(run.stdout.strip().splitlines()[-1])
            for name, value in measured.items():
                found.setdefault((name, label), []).append(value)
    print(f"{'create':<10} {'tree':<7} {'lowest':>9} {'median':>9}   ({kind})")
    for (name, label), values in sorted(found.items(), key=lambda kv: (kv[0][0], kv[0][1] != "before")):
        low, mid = min(values), statistics.median(values)
        print(f"{name:<10} {label:<7} {low:>7.3f}ms {mid:>7.3f}ms")


if __name__ == "__main__":
    main()

"""Server CPU per call decided without a person: by the policy (a `read` tool) and by a
standing allow ("Allow for …"), in one run so both see the same machine: a whole create in
process (`POST /v1/approvals` answered `200 approved` with a grant, SQLite,
`tests.harness.cosigner_app` over httpx's ASGI transport).

    .venv/bin/python bench/allowance.py [--rounds 5] [--calls 1500]

Each round runs in a fresh process; the figure is process CPU time (not wall time) per call,
lowest and median of the rounds. The standing allow is granted once through the dashboard
decision (`"decision": "allow_for"`) with `allow_for_uses` high enough for every call, and
every measured call matches it (the same `customerId`, a smaller `amountCents`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
POLICY = """
[defaults]
max_gated_calls_per_execution = 100000

[tools.lookup_order]
kind = "read"

[tools.grant_credit]
kind = "write"
confirm = true
allow_for = "8h"
allow_for_match = ["customerId"]
allow_for_at_most = ["amountCents"]
allow_for_uses = 1000000

[tenants.acme]
admins = { dashboard = ["u_admin"] }
"""


def child(calls: int) -> dict[str, float]:
    """Measure each case (run in a process of its own)."""
    sys.path[:0] = [str(ROOT), f"{ROOT}/sdk/python"]
    from tests.harness import cosigner_app

    out: dict[str, float] = {}

    def body(tool: str, execution: str, call: str, amount: int = 900) -> dict[str, Any]:
        return {
            "executionId": execution,
            "toolCallId": call,
            "toolName": tool,
            "parameters": {"customerId": "cus_1", "amountCents": amount},
            "surface": {"type": "dashboard", "userId": "u_dev"},
        }

    async def creates() -> None:
        async with cosigner_app(POLICY, run_workers=False) as h:
            key = await h.create_tenant("acme")
            approver = h.auth(h.approver_key("acme"))

            async def granted(tool: str, decision: dict[str, Any], execution: str) -> None:
                r = await h.client.post(
                    "/v1/approvals", json=body(tool, execution, "first", 1500), headers=h.auth(key)
                )
                assert r.status_code == 201, r.text
                d = {"userId": "u_dev", **decision}
                r = await h.client.post(
                    f"/v1/approvals/{r.json()['approvalId']}/decision", json=d, headers=approver
                )
                assert r.status_code == 200, r.text

            await granted("grant_credit", {"decision": "allow_for", "allowFor": "8h"}, "allow")
            cases: dict[str, Callable[[int], dict[str, Any]]] = {
                "policy: read tool": lambda i: body("lookup_order", f"read_{i}", "c1"),
                "standing allow": lambda i: body("grant_credit", f"allow_{i}", "c1"),
            }
            for name, make in cases.items():
                for i in range(50):  # warm up: caches, the first statements
                    await h.client.post("/v1/approvals", json=make(-1 - i), headers=h.auth(key))
                start = time.process_time()
                for i in range(calls):
                    r = await h.client.post("/v1/approvals", json=make(i), headers=h.auth(key))
                    assert r.status_code == 200 and r.json()["status"] == "approved", r.text
                out[name] = (time.process_time() - start) / calls * 1e3

    asyncio.run(creates())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=1500)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.calls)))
        return
    found: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        run = subprocess.run(
            [sys.executable, __file__, "--child", "--calls", str(args.calls)],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONPATH": f"{ROOT}:{ROOT}/sdk/python", "PATH": "/usr/bin:/bin"},
        )
        for name, value in json.loads(run.stdout.strip().splitlines()[-1]).items():
            found.setdefault(name, []).append(value)
    print(f"{'call decided by':<22} {'lowest':>9} {'median':>9}")
    for name, values in found.items():
        print(f"{name:<22} {min(values):>7.2f}ms {statistics.median(values):>7.2f}ms")


if __name__ == "__main__":
    main()

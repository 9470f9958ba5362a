"""Server CPU per create routed through on-call (the provider's answer cached) against a plain
route, in one run: `POST /v1/approvals` answered `201`, SQLite, `tests.harness.cosigner_app`
over httpx's ASGI transport, PagerDuty answered by the loopback server of the tests.

    .venv/bin/python bench/oncall_cpu.py [--rounds 5] [--calls 400]

`plain` asks the tenant's admins in the inbox; `on call` names `oncall:pagerduty:PSCHED1`,
whose person `[people]` ties to an inbox identity, so both end on the same kind of route.
The first on-call create fills the cache (it is not counted); every counted one is a cache
hit, which is what a burst of requests within a minute costs. Rounds alternate the two;
the figure is process CPU time (not wall time) per create, lowest and median of the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "sdk" / "python")]

from tests.harness import cosigner_app  # noqa: E402
from tests.oncall.servers import PAGERDUTY_TOKEN, on_call_servers  # noqa: E402

POLICY = """
[defaults]
timeout = "1h"

[tools.plain]
kind = "danger"
approvers = ["tenant_admins"]

[tools.paged]
kind = "danger"
approvers = ["oncall:pagerduty:PSCHED1"]

[tenants.acme]
admins = { dashboard = ["u_admin"] }

[people]
alice = ["alice@acme.example"]
"""


async def measure(rounds: int, calls: int) -> dict[str, list[float]]:
    """CPU milliseconds per create, one value per round, for each tool."""
    found: dict[str, list[float]] = {"plain": [], "paged": []}
    async with on_call_servers() as servers:
        servers.put("PSCHED1", ["alice@acme.example"])
        async with cosigner_app(
            POLICY, run_workers=False, pagerduty_token=PAGERDUTY_TOKEN, pagerduty_url=servers.pagerduty_url
        ) as h:
            key = await h.create_tenant("acme")
            seq = 0

            async def create(tool: str) -> None:
                nonlocal seq
                seq += 1
                body = {
                    "executionId": f"run_{seq}",
                    "toolCallId": "c1",
                    "toolName": tool,
                    "parameters": {"service": "billing", "version": f"2.{seq}"},
                    "surface": {"type": "dashboard", "userId": "u_dev"},
                }
                r = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
                assert r.status_code == 201, r.text

            for tool in found:
                for _ in range(30):  # warm up: caches, the first statements
                    await create(tool)
            asked = len(servers.asked)
            for _ in range(rounds):
                for tool in found:
                    start = time.process_time()
                    for _ in range(calls):
                        await create(tool)
                    found[tool].append((time.process_time() - start) / calls * 1e3)
            assert len(servers.asked) == asked, "a counted create asked the provider"
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=400)
    args = parser.parse_args()
    found = asyncio.run(measure(args.rounds, args.calls))
    print(f"{'create':<10} {'lowest':>9} {'median':>9}")
    for tool, values in found.items():
        label = "on call" if tool == "paged" else tool
        print(f"{label:<10} {min(values):>7.3f}ms {statistics.median(values):>7.3f}ms")


if __name__ == "__main__":
    main()

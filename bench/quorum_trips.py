"""Quorum round trips: two approvers approve before the agent hears, against one approver.

    .venv/bin/python bench/quorum_trips.py [--db sqlite|postgres|both] [--concurrency 16,64,256]
                                           [--seconds 5]

One `cosigner serve` per database, pinned to one core (as bench/roundtrip.py runs it), with
a policy of two dashboard tools: `wire_money`, approved by its requester (one answer
decides: the single-approver round trip of bench/roundtrip.py), and `close_account`,
approved by two distinct tenant admins (`quorum = 2`, the requester never counts). At each
concurrency level both round trips run in turn, on the same server and connections:

- single: create, `GET …?wait=30`, one `POST …/decision` (approve), the long-poll answers.
- quorum: create, `GET …?wait=30`, the first admin approves (the answer is still
  `approval_start`, 1 of 2), the second approves (`approval_decided`, approved, naming both),
  the long-poll answers `approved` with a grant and both approvals.

Reported per level and kind: round trips/s, p50/p99, errors, server CPU (share of one core)
and server CPU ms per round trip; then the quorum's round trips/s as a share of the single
one's (the target: at least 60 %). Exit status 0 when no round trip failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import roundtrip as rt
from httpclients import Client, make_client

SINGLE, QUORUM = "wire_money", "close_account"
REQUESTER, ADMINS = "u_bench", ("u_admin_1", "u_admin_2")
TARGET = 0.60
POLICY = f"""
[defaults]
timeout = "1h"
max_gated_calls_per_execution = 1000000

[tools.{SINGLE}]
kind = "danger"
approvers = ["requester"]
redact = ["cardToken"]

[tools.{QUORUM}]
kind = "danger"
approvers = ["tenant_admins"]
quorum = 2
redact = ["cardToken"]

[tenants.bench]
admins = {{ dashboard = ["{ADMINS[0]}", "{ADMINS[1]}"] }}
"""


class Agent:
    """An agent and its approvers on one keep-alive client."""

    def __init__(self, client: Client, key: str, approver: str) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {key}"}
        self.approver = {"Authorization": f"Bearer {approver}"}
        self.run = os.urandom(4).hex()
        self.counter = 0

    async def _create(self, tool: str) -> str:
        self.counter += 1
        n = self.counter
        body = {
            "executionId": f"run_{self.run}_{n}",
            "toolCallId": f"call_{n}",
            "toolName": tool,
            "parameters": {"orderId": f"ord_{n}", "amountCents": 12900, "cardToken": "tok_x"},
            "reason": "benchmark",
            "surface": {"type": "dashboard", "userId": REQUESTER},
        }
        answer = rt._expect(
            await self.client.request("POST", "/v1/approvals", json=body, headers=self.headers), 201, "create"
        )
        return str(answer["approvalId"])

    async def _approve(self, approval_id: str, who: str) -> dict[str, Any]:
        r = await self.client.request(
            "POST",
            f"/v1/approvals/{approval_id}/decision",
            json={"decision": "approve", "userId": who},
            headers=self.approver,
        )
        return rt._expect(r, 200, "decision")

    async def trip(self, tool: str, approvers: tuple[str, ...]) -> tuple[float, float]:
        """One round trip of `tool`, approved by `approvers` in turn: (seconds, notify seconds)."""
        t0 = time.perf_counter()
        approval_id = await self._create(tool)
        on_wire = asyncio.Event()
        poll = asyncio.create_task(
            self.client.request(
                "GET", f"/v1/approvals/{approval_id}?wait=30", headers=self.headers, on_wire=on_wire
            )
        )
        try:
            if not on_wire.is_set():
                wire = asyncio.create_task(on_wire.wait())
                await asyncio.wait({poll, wire}, return_when=asyncio.FIRST_COMPLETED)
                wire.cancel()
            for i, who in enumerate(approvers):
                body = await self._approve(approval_id, who)
                last = i == len(approvers) - 1
                want = "approved" if last else "pending"
                if body.get("status") != want:
                    raise rt.Failure(f"decision {i + 1}: status {body.get('status')!r}, wanted {want}")
            t_decided = time.perf_counter()
            answer = rt._expect(await poll, 200, "long-poll")
        finally:
            if not poll.done():
                poll.cancel()
                with contextlib.suppress(BaseException):
                    await poll
        t_end = time.perf_counter()
        if answer.get("status") != "approved" or not answer.get("grant"):
            raise rt.Failure(f"long-poll: status {answer.get('status')!r}, wanted approved with a grant")
        named = [a.get("by") for a in answer.get("approvals") or ()]
        if len(approvers) > 1 and named != list(approvers):
            raise rt.Failure("long-poll: the decision does not name every approver")
        return t_end - t0, max(0.0, t_end - t_decided)


def trips_of(agents: list[Agent], tool: str, approvers: tuple[str, ...]) -> rt.Op:
    """Worker i runs round trips of `tool` as agent i."""
    return lambda i: agents[i].trip(tool, approvers)


async def bench_database(kind: str, args: argparse.Namespace, cores: tuple[int | None, int | None]) -> bool:
    """Both round trips at every level on one server; True when none failed."""
    ok = True
    async with rt.running_server(
        kind, args.pg_admin, cores[0], args.server_log_level, policy_text=POLICY
    ) as server:
        print(f"\n== {kind}: server pid {server.pid} pinned to core {cores[0]}; client on core {cores[1]}")
        print(
            f"{'conc':>5} {'kind':>7} {'rt/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} "
            f"{'srv cpu':>8} {'srv/rt ms':>9}"
        )
        for c in args.concurrency:
            async with contextlib.AsyncExitStack() as stack:
                agents = []
                for _ in range(c):
                    made = make_client(args.client, server.url, limit=2, timeout=60.0)
                    stack.push_async_callback(made.aclose)
                    agents.append(Agent(made, server.key, server.approver))
                trips: dict[str, rt.Op] = {
                    "single": trips_of(agents, SINGLE, (REQUESTER,)),
                    "quorum": trips_of(agents, QUORUM, ADMINS),
                }
                rates = {}
                for name, trip in trips.items():
                    await rt.run_phase(c, 0.5, 2 * c, server.pid, trip)  # warm-up, not measured
                    res = await rt.run_phase(c, args.seconds, args.max_ops, server.pid, trip)
                    rates[name] = res.rate
                    print(
                        f"{c:>5} {name:>7} {res.rate:>8.0f} {rt.percentile(res.latencies, 50) * 1000:>8.1f} "
                        f"{rt.percentile(res.latencies, 99) * 1000:>8.1f} {res.error_count:>7} "
                        f"{res.server_cpu:>8.0%} {res.server_ms_per_op:>9.2f}",
                        flush=True,
                    )
                    for what, n in res.errors.most_common():
                        print(f"      ! {n} x {what}")
                    ok = ok and not res.error_count
                share = rates["quorum"] / rates["single"] if rates["single"] else float("nan")
                verdict = "ok" if share >= TARGET else f"BELOW the {TARGET:.0%} target"
                print(f"{c:>5} {'ratio':>7} quorum = {share:.0%} of single ({verdict})", flush=True)
    return ok


async def bench(args: argparse.Namespace) -> int:
    cores = rt.pick_cores()
    if cores[1] is not None:
        os.sched_setaffinity(0, {cores[1]})
    print(rt.machine())
    kinds = ["sqlite", "postgres"] if args.db == "both" else [args.db]
    ok = True
    for kind in kinds:
        if kind == "postgres":
            why = await rt.postgres_unreachable(args.pg_admin)
            if why:
                print(f"\n== postgres: NOT RUN: {why}")
                continue
        ok = await bench_database(kind, args, cores) and ok
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    args = rt.parse_args(argv)
    if argv is None or "--concurrency" not in argv:
        args.concurrency = [16, 64, 256]
    try:
        return asyncio.run(bench(args))
    finally:
        rt._stop_all()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

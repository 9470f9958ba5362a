"""The agent SDK's own cost per gated call, next to the same requests made with bare httpx.

    .venv/bin/python bench/sdk.py [--calls 400] [--rounds 5]

It starts `cosigner serve` on SQLite pinned to one core (as bench/roundtrip.py does) and,
from this process pinned to the other core, makes the same calls one at a time with two
blocking clients on keep-alive connections:

- raw: `httpx.Client` posting the JSON and reading `json()`, nothing else;
- sdk: `cosigner.Cosigner`, which checks the request against the wire models, maps
  errors, and parses the answer into a Decision.

Two operations: a **read** (`lookup_order`, allowed by policy: one POST answered 200) and a
**round trip** (POST 201, then the long-poll `GET ?wait=30`, while a "person" thread posts
the dashboard decision as soon as the approval exists). The agent's CPU is the agent
thread's own CPU time (`time.thread_time`), so the person thread and the server do not
count. Clients alternate in rounds to spread machine noise over both. The quietest round of
each is compared as well as the mean, since other load on the machine only adds CPU time.
The bar: the SDK adds under 10% client CPU to a round trip, and answers a read in about a millisecond.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import statistics
import sys
import threading
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from roundtrip import Server, _stop_all, machine, pick_cores, running_server

from cosigner import Cosigner, DashboardSurface
from cosigner._http import approval_body
from cosigner.decision import parse_approval

USER = "u_bench"
POLICY = """
[defaults]
timeout = "1h"
max_gated_calls_per_execution = 1000000

[tools.lookup_order]
kind = "read"

[tools.wire_money]
kind = "danger"
"""
SURFACE = DashboardSurface(user_id=USER)
PARAMS = {"orderId": "ord_4421", "amountCents": 12900}


class Person(threading.Thread):
    """Approves each approval id it is handed, on its own client."""

    def __init__(self, server: Server) -> None:
        super().__init__(daemon=True)
        self.inbox: queue.Queue[str | None] = queue.Queue()
        self.http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.key}"})

    def run(self) -> None:
        while (approval_id := self.inbox.get()) is not None:
            r = self.http.post(
                f"/v1/approvals/{approval_id}/decision", json={"decision": "approve", "userId": USER}
            )
            assert r.status_code == 200, r.text


def raw_ops(server: Server, person: Person) -> tuple[Callable[[int], None], Callable[[int], None]]:
    """Read and round trip with bare httpx."""
    http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.key}"}, timeout=60)
    surface = SURFACE.to_json()

    def read(i: int) -> None:
        body = {
            "executionId": "raw_read",
            "toolCallId": f"c{i}",
            "toolName": "lookup_order",
            "parameters": PARAMS,
            "surface": surface,
        }
        r = http.post("/v1/approvals", json=body)
        assert r.status_code == 200 and r.json()["status"] == "approved", r.text

    def round_trip(i: int) -> None:
        body = {
            "executionId": "raw_rt",
            "toolCallId": f"c{i}",
            "toolName": "wire_money",
            "parameters": PARAMS,
            "surface": surface,
        }
        r = http.post("/v1/approvals", json=body)
        assert r.status_code == 201, r.text
        approval_id = r.json()["approvalId"]
        person.inbox.put(approval_id)
        r = http.get(f"/v1/approvals/{approval_id}", params={"wait": 30})
        assert r.status_code == 200 and r.json()["status"] == "approved", r.text

    return read, round_trip


def sdk_ops(server: Server, person: Person) -> tuple[Callable[[int], None], Callable[[int], None]]:
    """Read and round trip with the SDK."""
    client = Cosigner(url=server.url, api_key=server.key, timeout=60)

    def read(i: int) -> None:
        d = client.request_approval(
            execution_id="sdk_read",
            tool_call_id=f"c{i}",
            tool_name="lookup_order",
            parameters=PARAMS,
            surface=SURFACE,
        )
        assert d.approved

    def round_trip(i: int) -> None:
        d = client.request_approval(
            execution_id="sdk_rt",
            tool_call_id=f"c{i}",
            tool_name="wire_money",
            parameters=PARAMS,
            surface=SURFACE,
            wait=False,
        )
        person.inbox.put(d.approval_id)
        assert client.wait(d).approved

    return read, round_trip


def measure(op: Callable[[int], None], start: int, calls: int) -> tuple[float, list[float]]:
    """(agent CPU seconds, wall latencies) of `calls` sequential operations."""
    latencies = []
    cpu = time.thread_time()
    for i in range(start, start + calls):
        began = time.perf_counter()
        op(i)
        latencies.append(time.perf_counter() - began)
    return time.thread_time() - cpu, latencies


def run(server: Server, calls: int, rounds: int) -> dict[str, dict[str, Any]]:
    """Alternate the clients over `rounds`; totals per (client, operation)."""
    person = Person(server)
    person.start()
    clients = {"raw": raw_ops(server, person), "sdk": sdk_ops(server, person)}
    for read, trip in clients.values():  # warm up connections, imports and the key cache
        for i in range(20):
            read(10_000_000 + i)
            trip(10_000_000 + i)
    totals: dict[str, dict[str, Any]] = {
        f"{c} {o}": {"cpu": [], "lat": []} for c in clients for o in ("read", "round trip")
    }
    for r in range(rounds):
        for name, (read, trip) in clients.items():
            for label, op in (("read", read), ("round trip", trip)):
                cpu, lat = measure(op, r * calls, calls)
                totals[f"{name} {label}"]["cpu"].append(cpu / calls)
                totals[f"{name} {label}"]["lat"] += lat
    person.inbox.put(None)
    return totals


def report(totals: dict[str, dict[str, Any]]) -> None:
    """Print CPU per call (the quietest round, and the mean), latency, and the SDK's overhead."""
    print(f"{'client / operation':24} {'CPU ms/call min':>16} {'mean':>8} {'p50 ms':>8} {'p90 ms':>8}")
    for name, t in totals.items():
        lat = sorted(t["lat"])
        low, mean = min(t["cpu"]) * 1000, statistics.mean(t["cpu"]) * 1000
        p50, p90 = statistics.median(lat) * 1000, lat[len(lat) * 9 // 10] * 1000
        print(f"{name:24} {low:16.3f} {mean:8.3f} {p50:8.2f} {p90:8.2f}")
    for op in ("read", "round trip"):
        raw, sdk = totals[f"raw {op}"]["cpu"], totals[f"sdk {op}"]["cpu"]
        quiet = (min(sdk) - min(raw)) / min(raw) * 100
        mean = (statistics.mean(sdk) - statistics.mean(raw)) / statistics.mean(raw) * 100
        print(f"SDK overhead, {op}: {quiet:+.1f}% agent CPU (quietest rounds), {mean:+.1f}% (mean)")


def own_work() -> tuple[float, float]:
    """(SDK µs, bare µs) of the work around one read's HTTP exchange: the SDK checks the request
    against the wire model and parses the answer into a Decision; bare httpx dumps and loads JSON.
    The quickest of several repeats, so other load on the machine hardly shows."""
    answer = json.dumps(
        {
            "type": "approval_decided",
            **{k: "x" for k in ("approvalId", "executionId", "toolCallId", "toolName", "grant")},
            "status": "approved",
            "decidedBy": {"kind": "policy", "rule": "tools.lookup_order"},
            "decidedAt": "2026-01-01T00:00:00.000Z",
            "comment": None,
            "parametersDigest": "sha256:" + "0" * 64,
        }
    ).encode()
    ask = {"execution_id": "e", "tool_call_id": "c", "tool_name": "lookup_order", "parameters": PARAMS}
    body = {"executionId": "e", "toolCallId": "c", "toolName": "lookup_order", "parameters": PARAMS}

    def sdk() -> None:
        approval_body(**ask, surface=SURFACE, reason=None, timeout_seconds=None, callback_url=None)
        parse_approval(answer)

    def bare() -> None:
        json.dumps({**body, "surface": SURFACE.to_json()}).encode()
        json.loads(answer)

    return tuple(min(timeit.repeat(f, number=2000, repeat=7)) / 2000 * 1e6 for f in (sdk, bare))  # type: ignore[return-value]


async def main_async(args: argparse.Namespace) -> None:
    server_core, client_core = pick_cores()
    print(machine().split("; client:")[0] + f"; clients: httpx {httpx.__version__}, blocking, keep-alive")
    async with running_server("sqlite", "", server_core, "WARNING", policy_text=POLICY) as server:
        if client_core is not None:
            os.sched_setaffinity(0, {client_core})
        totals = await asyncio.to_thread(run, server, args.calls, args.rounds)
    print(f"{args.rounds} rounds x {args.calls} calls per client and operation, sequential, SQLite")
    report(totals)
    sdk_us, bare_us = own_work()
    print(f"work around one read's HTTP exchange: SDK {sdk_us:.1f} µs, bare httpx {bare_us:.1f} µs")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--calls", type=int, default=400, help="calls per client, operation and round")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    try:
        asyncio.run(main_async(args))
    finally:
        _stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The agent SDK's own cost per gated call, next to the same requests made with bare httpx.

    .venv/bin/python bench/sdk.py [--calls 1500]

It starts `cosigner serve` on SQLite pinned to one core (as bench/roundtrip.py does) and,
from this process pinned to the other core, makes the same calls one at a time with two
blocking clients on keep-alive connections:

- raw: `httpx.Client` posting the JSON and reading `json()`, nothing else;
- sdk: `cosigner.Cosigner`, which checks the request against the wire models, maps
  errors, and parses the answer into a Decision.

Two operations: a **read** (`lookup_order`, allowed by policy: one POST answered 200) and a
**round trip** (POST 201, then the long-poll `GET ?wait=30`, while a "person" thread posts
the dashboard decision as soon as the approval exists). The two clients take turns call by
call (which goes first alternates), so both see the same load on a shared machine. The
agent's CPU is the agent thread's own CPU time (`time.thread_time`) per call, so the person
thread and the server do not count; medians are compared, as other load only adds time.

Then, apart from the network and the server, the same calls against canned answers
(`httpx.MockTransport`): what each client spends in Python per call, quickest of several
repeats, which other load on the machine hardly changes.

The bar: the SDK adds under 10% client CPU to a round trip, and answers a read in about a
millisecond.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
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

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from roundtrip import Server, _stop_all, machine, pick_cores, running_server

from cosigner import Cosigner, DashboardSurface

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
        self.http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.approver}"})

    def run(self) -> None:
        while (approval_id := self.inbox.get()) is not None:
            r = self.http.post(
                f"/v1/approvals/{approval_id}/decision", json={"decision": "approve", "userId": USER}
            )
            assert r.status_code == 200, r.text


Ops = tuple[Callable[[int], None], Callable[[int], None]]


def raw_ops(server: Server, person: Person, transport: httpx.BaseTransport | None = None) -> Ops:
    """Read and round trip with bare httpx."""
    headers = {"Authorization": f"Bearer {server.key}"}
    http = httpx.Client(base_url=server.url, headers=headers, timeout=60, transport=transport)
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


def sdk_ops(server: Server, person: Person, transport: httpx.BaseTransport | None = None) -> Ops:
    """Read and round trip with the SDK."""
    client = Cosigner(url=server.url, api_key=server.key, timeout=60, transport=transport)

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


def run(server: Server, calls: int) -> dict[str, dict[str, list[float]]]:
    """Per-call agent CPU and latency of each (client, operation), the clients taking turns."""
    person = Person(server)
    person.start()
    clients = {"raw": raw_ops(server, person), "sdk": sdk_ops(server, person)}
    for read, trip in clients.values():  # warm up connections, imports and the key cache
        for i in range(20):
            read(10_000_000 + i)
            trip(10_000_000 + i)
    totals: dict[str, dict[str, list[float]]] = {
        f"{c} {o}": {"cpu": [], "lat": []} for c in clients for o in ("read", "round trip")
    }
    order = list(clients.items())
    for i in range(calls):
        for name, (read, trip) in order if i % 2 else order[::-1]:
            for label, op in (("read", read), ("round trip", trip)):
                cpu, began = time.thread_time(), time.perf_counter()
                op(i)
                totals[f"{name} {label}"]["lat"].append(time.perf_counter() - began)
                totals[f"{name} {label}"]["cpu"].append(time.thread_time() - cpu)
    person.inbox.put(None)
    return totals


def report(totals: dict[str, dict[str, list[float]]]) -> None:
    """Print agent CPU per call (median and mean), latency, and the SDK's overhead."""
    print(
        f"{'client / operation':22} {'CPU ms/call median':>19} {'mean':>7} "
        f"{'p10 ms':>8} {'p50 ms':>8} {'p90 ms':>8}"
    )
    for name, t in totals.items():
        lat = sorted(t["lat"])
        median, mean = statistics.median(t["cpu"]) * 1000, statistics.mean(t["cpu"]) * 1000
        p10, p50, p90 = (
            lat[len(lat) // 10] * 1000,
            statistics.median(lat) * 1000,
            lat[len(lat) * 9 // 10] * 1000,
        )
        print(f"{name:22} {median:19.3f} {mean:7.3f} {p10:8.2f} {p50:8.2f} {p90:8.2f}")
    for op in ("read", "round trip"):
        raw, sdk = totals[f"raw {op}"]["cpu"], totals[f"sdk {op}"]["cpu"]
        median = (statistics.median(sdk) / statistics.median(raw) - 1) * 100
        mean = (statistics.mean(sdk) / statistics.mean(raw) - 1) * 100
        print(f"SDK overhead, {op}: {median:+.1f}% agent CPU (medians), {mean:+.1f}% (means)")


def _answers() -> dict[str, bytes]:
    """Canned answers of the server: a policy read, a pending start, a person's approval."""
    ids = {
        "approvalId": "apv_" + "A" * 20,
        "executionId": "e",
        "toolCallId": "c",
        "toolName": "lookup_order",
        "parametersDigest": "sha256:" + "0" * 64,
    }
    decided = {**ids, "type": "approval_decided", "status": "approved", "comment": None, "grant": "g.g.g"}
    return {
        "read": json.dumps(
            {**decided, "decidedBy": {"kind": "policy", "rule": "tools.lookup_order"}, "decidedAt": STAMP}
        ).encode(),
        "start": json.dumps(
            {
                **ids,
                "type": "approval_start",
                "parameters": PARAMS,
                "timeout": 3_600_000,
                "startedAt": STAMP,
                "expiresAt": STAMP,
                "status": "pending",
            }
        ).encode(),
        "approved": json.dumps(
            {
                **decided,
                "decidedBy": {"kind": "person", "surface": "dashboard", "userId": USER},
                "decidedAt": STAMP,
            }
        ).encode(),
    }


STAMP = "2026-01-01T00:00:00.000Z"


def own_work() -> dict[str, float]:
    """µs of Python per call of each (client, operation) against canned answers, no network."""
    answers = _answers()

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, content=answers["approved"])
        asked = json.loads(request.content)
        return httpx.Response(
            200 if asked["toolName"] == "lookup_order" else 201,
            content=answers["read" if asked["toolName"] == "lookup_order" else "start"],
        )

    transport = httpx.MockTransport(answer)
    canned = Server(
        url="http://cosigner.invalid", key="k", approver="a", pid=0, stderr=Path(os.devnull), database=""
    )

    class Nobody(Person):
        def __init__(self) -> None:  # the canned answers need no decision
            self.inbox = queue.Queue()

    ops = {"raw": raw_ops(canned, Nobody(), transport), "sdk": sdk_ops(canned, Nobody(), transport)}
    results = {}
    for name, (read, trip) in ops.items():
        for label, op in (("read", read), ("round trip", trip)):
            for i in range(200):
                op(i)
            best = (
                min(timeit.repeat(functools.partial(op, 0), number=1000, repeat=7, timer=time.thread_time))
                / 1000
            )
            results[f"{name} {label}"] = best * 1e6
    return results


async def main_async(args: argparse.Namespace) -> None:
    server_core, client_core = pick_cores()
    print(machine().split("; client:")[0] + f"; clients: httpx {httpx.__version__}, blocking, keep-alive")
    async with running_server("sqlite", "", server_core, "WARNING", policy_text=POLICY) as server:
        if client_core is not None:
            os.sched_setaffinity(0, {client_core})
        totals = await asyncio.to_thread(run, server, args.calls)
    print(f"{args.calls} calls per client and operation, one at a time, the clients taking turns, SQLite")
    report(totals)
    print("apart from the network, against canned answers (µs of Python per call, quickest of 7 x 1000):")
    work = own_work()
    for op in ("read", "round trip"):
        raw, sdk = work[f"raw {op}"], work[f"sdk {op}"]
        print(f"  {op:10}  raw httpx {raw:6.1f}  SDK {sdk:6.1f}  the SDK's own work {sdk - raw:+5.1f} µs")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--calls", type=int, default=1500, help="calls per client and operation")
    args = p.parse_args()
    try:
        asyncio.run(main_async(args))
    finally:
        _stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())

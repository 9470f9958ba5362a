"""Server CPU per approval round trip, approved as asked and approved with an edit.

    .venv/bin/python bench/edit_cpu.py [--calls 1000] [--rounds 3] [--db sqlite|postgres]

It starts `cosigner serve` pinned to one core (as bench/roundtrip.py does) with a policy in
which `issue_refund` asks a person and marks `amountCents` editable and `cardToken`
redacted, and from this process, pinned to the other core, makes `--calls` round trips one
after another on kept-alive connections: `POST /v1/approvals` (a dashboard request, without
`acceptsEdits`, or with it and the tool's schema: `201`), the tenant app's decision (`POST …/decision`,
plain `approve`, or `approve` with `edit` changing `amountCents`), and `GET
/v1/approvals/{id}` (the decision with its grant). The figure is the server process's CPU
time (user + system, all threads, from /proc) per round trip: the same three requests,
so the differences are what offering an edit and making one cost (the schema checked at
intake, the sealed call, the edit checked against the schema, the policy asked again, the
standing-deny read).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from roundtrip import DEFAULT_PG_ADMIN, cpu_seconds, machine, pick_cores, running_server

POLICY = """
[defaults]
timeout = "1h"
max_gated_calls_per_execution = 1000000

[tools.issue_refund]
kind = "danger"
redact = ["cardToken"]
editable = ["amountCents", "note"]

[tenants.bench]
admins = { dashboard = ["u_bench"] }
"""
SURFACE = {"type": "dashboard", "userId": "u_bench"}
SCHEMA = {
    "type": "object",
    "properties": {
        "orderId": {"type": "string"},
        "amountCents": {"type": "integer", "minimum": 1},
        "note": {"type": "string", "maxLength": 200},
        "cardToken": {"type": "string"},
    },
    "required": ["orderId", "amountCents"],
}


class Connection:
    """One kept-alive HTTP/1.1 connection with one key."""

    def __init__(self, url: str, key: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.conn = http.client.HTTPConnection(host, int(port))
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        self.conn.request(method, path, json.dumps(body) if body is not None else None, self.headers)
        response = self.conn.getresponse()
        data = response.read()
        if response.status not in (200, 201):
            raise RuntimeError(f"{path}: {response.status} {data[:300]!r}")
        answer: dict[str, Any] = json.loads(data)
        return answer


def trips(
    agent: Connection, app: Connection, first: int, calls: int, *, edit: bool, offer: bool = True
) -> None:
    """`calls` round trips: ask (offering edits or not), decide (with an edit or not), read."""
    for i in range(first, first + calls):
        request: dict[str, Any] = {
            "executionId": f"run_{i}",
            "toolCallId": "c1",
            "toolName": "issue_refund",
            "parameters": {"orderId": f"o{i}", "amountCents": 40000, "note": "late", "cardToken": "tok_x"},
            "surface": SURFACE,
        }
        if offer:
            request |= {"acceptsEdits": True, "parametersSchema": SCHEMA}
        start = agent.call("POST", "/v1/approvals", request)
        decision: dict[str, Any] = {"decision": "approve", "userId": "u_bench"}
        if edit:
            decision["edit"] = {"amountCents": 4000}
        app.call("POST", f"/v1/approvals/{start['approvalId']}/decision", decision)
        done = agent.call("GET", f"/v1/approvals/{start['approvalId']}")
        if done.get("status") != "approved" or bool(done.get("edited")) is not edit or not done.get("grant"):
            raise RuntimeError(f"unexpected decision: {done}")


def measure(url: str, key: str, approver: str, pid: int, calls: int, rounds: int) -> dict[str, list[float]]:
    """Server CPU ms per round trip, plain and edited, one figure per round each."""
    agent, app = Connection(url, key), Connection(url, approver)
    trips(agent, app, -400, 200, edit=False)  # warm up: caches, connections, the tenant's keys
    trips(agent, app, -200, 200, edit=True)
    kinds = ("no edits offered", "edits offered, approved as asked", "edited")
    out: dict[str, list[float]] = {kind: [] for kind in kinds}
    for r in range(rounds):
        for n, kind in enumerate(kinds):
            c0 = cpu_seconds(pid)
            trips(agent, app, (3 * r + n) * calls, calls, edit=kind == "edited", offer=n > 0)
            out[kind].append(1000 * (cpu_seconds(pid) - c0) / calls)
        print(f"round {r + 1}: " + ", ".join(f"{k} {out[k][-1]:.3f} ms" for k in kinds))
    return out


async def main_async(args: argparse.Namespace) -> None:
    server_core, client_core = pick_cores()
    print(machine().split("; client:")[0])
    admin = args.pg_admin if args.db == "postgres" else ""
    async with running_server(args.db, admin, server_core, "WARNING", policy_text=POLICY) as server:
        if client_core is not None:
            os.sched_setaffinity(0, {client_core})
        found = await asyncio.to_thread(
            measure, server.url, server.key, server.approver, server.pid, args.calls, args.rounds
        )
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.db}, {args.calls} round trips x {args.rounds} rounds, load average {load}")
    for kind, values in found.items():
        ordered = sorted(values)
        middle = ordered[len(ordered) // 2]
        print(f"server CPU ms per {kind} round trip: lowest {ordered[0]:.3f}, median {middle:.3f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--calls", type=int, default=1000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    p.add_argument("--pg-admin", default=os.environ.get("COSIGNER_BENCH_PG", DEFAULT_PG_ADMIN))
    asyncio.run(main_async(p.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

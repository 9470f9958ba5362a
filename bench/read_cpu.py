"""Server CPU per policy-allowed read and per result report: what every call that needs
nobody costs Cosigner.

    .venv/bin/python bench/read_cpu.py [--calls 3000] [--rounds 3] [--db sqlite|postgres]

It starts `cosigner serve` pinned to one core (as bench/roundtrip.py does) with a policy in
which `lookup_order` is a `read`, and from this process, pinned to the other core, sends
one kept-alive HTTP/1.1 connection (`http.client`, so the client's own cost stays small)
`--calls` reads one after another (`POST /v1/approvals`, answered `200 approved` with a
grant), then a `POST /v1/approvals/{id}/result` for each. The figure is the server
process's CPU time (user + system, all threads, from /proc) over each phase divided by the
number of requests: on a shared machine wall time measures the other jobs, CPU per request
mostly does not. It also prints the split between the event loop's thread and the others
(on SQLite, the writer thread), and the lowest of the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from roundtrip import DEFAULT_PG_ADMIN, READ_POLICY, cpu_seconds, machine, pick_cores, running_server

POLICY = READ_POLICY
SURFACE = {"type": "dashboard", "userId": "u_bench"}


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds of each thread of `pid`."""
    out: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / tick
    return out


class Agent:
    """One kept-alive connection making the two requests."""

    def __init__(self, url: str, key: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.conn = http.client.HTTPConnection(host, int(port))
        self.headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def post(self, path: str, body: dict[str, object]) -> dict[str, object]:
        self.conn.request("POST", path, json.dumps(body), self.headers)
        response = self.conn.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"{path}: {response.status} {data[:300]!r}")
        answer: dict[str, object] = json.loads(data)
        return answer

    def reads(self, first: int, calls: int) -> list[str]:
        ids = []
        for i in range(first, first + calls):
            answer = self.post(
                "/v1/approvals",
                {
                    "executionId": f"run_{i}",
                    "toolCallId": "c1",
                    "toolName": "lookup_order",
                    "parameters": {"orderId": f"o{i}"},
                    "surface": SURFACE,
                },
            )
            if answer.get("status") != "approved" or not answer.get("grant"):
                raise RuntimeError(f"not approved by policy: {answer}")
            ids.append(str(answer["approvalId"]))
        return ids

    def reports(self, ids: list[str]) -> None:
        for aid in ids:
            self.post(
                f"/v1/approvals/{aid}/result", {"outcome": "succeeded", "result": {"status": "shipped"}}
            )


def per_request(before: dict[int, float], after: dict[int, float], main: int, calls: int) -> str:
    loop = after.get(main, 0.0) - before.get(main, 0.0)
    rest = sum(after.values()) - sum(before.values()) - loop
    return f"event loop {1000 * loop / calls:.3f} + other threads {1000 * rest / calls:.3f}"


def median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def measure(url: str, key: str, pid: int, calls: int, rounds: int) -> tuple[list[float], list[float]]:
    """Server CPU ms per read and per report, one figure per round."""
    agent = Agent(url, key)
    agent.reports(agent.reads(-500, 500))  # warm up: caches, connection, the tenant's key
    reads: list[float] = []
    reports: list[float] = []
    for r in range(rounds):
        t0, c0 = thread_cpu(pid), cpu_seconds(pid)
        ids = agent.reads(r * calls, calls)
        t1, c1 = thread_cpu(pid), cpu_seconds(pid)
        agent.reports(ids)
        t2, c2 = thread_cpu(pid), cpu_seconds(pid)
        reads.append(1000 * (c1 - c0) / calls)
        reports.append(1000 * (c2 - c1) / calls)
        print(
            f"round {r + 1}: read {reads[-1]:.3f} ms ({per_request(t0, t1, pid, calls)}), "
            f"report {reports[-1]:.3f} ms ({per_request(t1, t2, pid, calls)})"
        )
    return reads, reports


async def main_async(args: argparse.Namespace) -> None:
    server_core, client_core = pick_cores()
    print(machine().split("; client:")[0])
    admin = args.pg_admin if args.db == "postgres" else ""
    async with running_server(args.db, admin, server_core, "WARNING", policy_text=POLICY) as server:
        if client_core is not None:
            os.sched_setaffinity(0, {client_core})
        reads, reports = await asyncio.to_thread(
            measure, server.url, server.key, server.pid, args.calls, args.rounds
        )
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.db}, {args.calls} calls x {args.rounds} rounds, load average {load}")
    print(f"server CPU ms per policy read:   lowest {min(reads):.3f}, median {median(reads):.3f}")
    print(f"server CPU ms per result report: lowest {min(reports):.3f}, median {median(reports):.3f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    p.add_argument("--pg-admin", default=os.environ.get("COSIGNER_BENCH_PG", DEFAULT_PG_ADMIN))
    asyncio.run(main_async(p.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

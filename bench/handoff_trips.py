"""Handoff round trips: hand off → Done → the application's `expect` check → outcome told to the agent.

    .venv/bin/python bench/handoff_trips.py  [--concurrency 16,64] [--seconds 5]

`cosigner serve` runs as a separate process pinned to one core with SQLite (a fresh
temporary file), a policy with one handoff tool, and COSIGNER_CALLBACK_ALLOW=127.0.0.1.
The application's expect endpoint is examples/expect_app.py under uvicorn in this process,
on the load core with the client, answering every change as published. Each round trip:
the agent asks for the tool (`POST /v1/approvals`, `201 handoff_start`), starts
`GET …?wait=30`, the person presses Done on the dashboard (`POST …/decision`; Cosigner
calls `expect`), and the long-poll answers `completed`.

Reported per level: round trips/s, latency, errors, and the application's count of
`expect` calls, which must equal the Dones. Exit status 0 when no round trip failed and
the counts match, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import secrets
import sys
import time
from pathlib import Path
from typing import Any

import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import roundtrip as rt
from httpclients import Client, make_client

TOOL = "publish_changes"
SECRET_ENV = "BENCH_EXPECT_SECRET"
EXAMPLE = rt.ROOT / "examples" / "expect_app.py"


def example() -> Any:
    """examples/expect_app.py as a module."""
    spec = importlib.util.spec_from_file_location("expect_app", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["expect_app"] = module
    spec.loader.exec_module(module)
    return module


class Everything(set[str]):
    """Every change id counts as published."""

    def __contains__(self, item: object) -> bool:
        return True


def policy(url: str) -> str:
    """The server's policy: one handoff tool, done on the dashboard by its requester."""
    return f"""
[defaults]
timeout = "1h"
max_gated_calls_per_execution = 1000

[tools.{TOOL}]
kind = "danger"
[tools.{TOOL}.handoff]
reason = "Publishing needs the owner's verification code"
steps = ["Open Settings", "Enter the code", "Press Publish"]
expect = {{ url = "{url}", secret_env = "{SECRET_ENV}" }}
timeout = "1h"
"""


class Agent:
    """One agent/person pair on its own keep-alive client."""

    def __init__(self, client: Client, key: str, approver: str) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {key}"}
        self.approver = {"Authorization": f"Bearer {approver}"}
        self.run = secrets.token_hex(4)
        self.n = 0

    async def round_trip(self) -> tuple[float, float]:
        """Hand off, long-poll, press Done; returns (round trip seconds, notify seconds)."""
        self.n += 1
        t0 = time.perf_counter()
        body = {
            "executionId": f"run_{self.run}_{self.n}",
            "toolCallId": "c1",
            "toolName": TOOL,
            "parameters": {"changeId": f"chg_{self.run}_{self.n}"},
            "reason": "benchmark",
            "surface": {"type": "dashboard", "userId": rt.USER},
        }
        r = await self.client.request("POST", "/v1/approvals", json=body, headers=self.headers)
        aid = rt._expect(r, 201, "hand off")["approvalId"]
        on_wire = asyncio.Event()
        poll = asyncio.create_task(
            self.client.request("GET", f"/v1/approvals/{aid}?wait=30", headers=self.headers, on_wire=on_wire)
        )
        try:
            if not on_wire.is_set():
                wire = asyncio.create_task(on_wire.wait())
                await asyncio.wait({poll, wire}, return_when=asyncio.FIRST_COMPLETED)
                wire.cancel()
            done = {"decision": "done", "userId": rt.USER}
            r = await self.client.request(
                "POST", f"/v1/approvals/{aid}/decision", json=done, headers=self.approver
            )
            t_decided = time.perf_counter()
            rt._expect(r, 200, "done")
            answer = rt._expect(await poll, 200, "long-poll")
        finally:
            if not poll.done():
                poll.cancel()
                with contextlib.suppress(BaseException):
                    await poll
        t_end = time.perf_counter()
        if answer.get("status") != "completed":
            raise rt.Failure(f"long-poll: status {answer.get('status')!r}, wanted completed")
        return t_end - t0, max(0.0, t_end - t_decided)


def per_agent(agents: list[Agent]) -> rt.Op:
    """Worker i runs round trips as agent i."""
    return lambda i: agents[i].round_trip()


async def bench(args: argparse.Namespace) -> int:
    cores = rt.pick_cores()
    if cores[1] is not None:
        import os

        os.sched_setaffinity(0, {cores[1]})
    print(rt.machine())
    module = example()
    secret = secrets.token_urlsafe(24)
    shop = module.ExpectApp(secret)
    shop.published = Everything()
    app_port = rt.free_port()
    server_app = uvicorn.Server(uvicorn.Config(shop, host="127.0.0.1", port=app_port, log_level="warning"))
    serving = asyncio.create_task(server_app.serve())
    while not server_app.started:  # noqa: ASYNC110 (uvicorn offers no event to wait on)
        await asyncio.sleep(0.01)
    url = f"http://127.0.0.1:{app_port}/expect"
    env = {SECRET_ENV: secret, "COSIGNER_CALLBACK_ALLOW": "127.0.0.1"}
    failed = False
    try:
        async with rt.running_server(
            "sqlite", args.pg_admin, cores[0], args.server_log_level, policy_text=policy(url), extra_env=env
        ) as server:
            print(
                f"\n== handoff round trips: server pid {server.pid} on core {cores[0]}; "
                f"client and application on core {cores[1]}"
            )
            print(
                f"{'conc':>5} {'rt/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'expect':>8} "
                f"{'completed':>9} {'srv cpu':>8}"
            )
            for c in args.concurrency:
                async with contextlib.AsyncExitStack() as stack:
                    agents = []
                    for _ in range(c):
                        made = make_client(args.client, server.url, limit=2, timeout=60.0)
                        stack.push_async_callback(made.aclose)
                        agents.append(Agent(made, server.key, server.approver))
                    trip = per_agent(agents)
                    await rt.run_phase(c, 0.5, 2 * c, server.pid, trip)
                    before = len(shop.calls)
                    res = await rt.run_phase(c, args.seconds, args.max_ops, server.pid, trip)
                    await asyncio.sleep(0.5)  # checks of round trips that failed late
                    checked = len(shop.calls) - before
                    ms = 1000.0
                    print(
                        f"{c:>5} {res.rate:>8.0f} {rt.percentile(res.latencies, 50) * ms:>8.1f} "
                        f"{rt.percentile(res.latencies, 99) * ms:>8.1f} {res.error_count:>7} "
                        f"{checked:>8} {res.ok:>9} {res.server_cpu:>8.0%}",
                        flush=True,
                    )
                    for what, n in res.errors.most_common():
                        print(f"      ! {n} x {what}")
                    if res.error_count or checked != res.ok:
                        failed = True
    finally:
        server_app.should_exit = True
        await serving
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    args = rt.parse_args(argv)
    if argv is None or "--concurrency" not in argv:
        args.concurrency = [16, 64]
    try:
        return asyncio.run(bench(args))
    finally:
        rt._stop_all()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

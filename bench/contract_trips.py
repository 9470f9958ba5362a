"""Operation contract round trips: propose → prepare → approve → execute → outcome told to the agent.

    .venv/bin/python bench/roundtrip.py --contract [--concurrency 16,64] [--seconds 5]
    .venv/bin/python bench/contract_trips.py  [the same options] [--py-spy FILE [--profile-concurrency 64]]

`cosigner serve` runs as a separate process pinned to one core with SQLite (a fresh
temporary file), a policy with one operation, and COSIGNER_CALLBACK_ALLOW=127.0.0.1. The
application is examples/contract_app.py under uvicorn in this process, on the load core
with the client. Each round trip: the agent proposes (`POST /v1/approvals` with
`operation` + `request`; Cosigner calls `prepare`), starts `GET …?wait=30`, the person
approves (`POST …/decision`; Cosigner calls `execute`), and the long-poll answers with the
`succeeded` outcome. Every order is new, so every proposal is prepared and executed.

Reported per level: round trips/s, latency, errors, and the application's count of
`prepare` and `execute` calls, which must equal the proposals and the approvals.
The bar: 200 round trips/s with 0 errors at 64 concurrent. Exit status 0 when no round
trip failed and the counts match, 1 otherwise.
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

import httpx
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import roundtrip as rt
from httpclients import Client, make_client

OPERATION = "order.refund_missing_discount"
SECRET_ENV = "BENCH_ORDERS_SECRET"
BAR = 200.0
EXAMPLE = rt.ROOT / "examples" / "contract_app.py"


def example() -> Any:
    """examples/contract_app.py as a module."""
    spec = importlib.util.spec_from_file_location("contract_app", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["contract_app"] = module
    spec.loader.exec_module(module)
    return module


class EveryOrder(dict[str, Any]):
    """The shop's orders: any order id names an order owed its $129.00 discount."""

    def __init__(self, order: Any) -> None:
        super().__init__()
        self.order = order

    def get(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = self.order("Bench Customer", 64500, 12900)
        return self[key]


def policy(url: str) -> str:
    """The server's policy: the operation at `url`, approved on the dashboard by its requester."""
    return f"""
[defaults]
timeout = "1h"
max_gated_calls_per_execution = 1000

[operations."{OPERATION}"]
url = "{url}"
secret_env = "{SECRET_ENV}"
kind = "danger"
approvers = ["requester"]
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
        """Propose, long-poll, approve; returns (round trip seconds, notify seconds)."""
        self.n += 1
        t0 = time.perf_counter()
        body = {
            "executionId": f"run_{self.run}_{self.n}",
            "toolCallId": "c1",
            "operation": OPERATION,
            "request": {"orderId": f"ord_{self.run}_{self.n}"},
            "reason": "benchmark",
            "surface": {"type": "dashboard", "userId": rt.USER},
        }
        r = await self.client.request("POST", "/v1/approvals", json=body, headers=self.headers)
        aid = rt._expect(r, 201, "propose")["approvalId"]
        on_wire = asyncio.Event()
        poll = asyncio.create_task(
            self.client.request("GET", f"/v1/approvals/{aid}?wait=30", headers=self.headers, on_wire=on_wire)
        )
        try:
            if not on_wire.is_set():
                wire = asyncio.create_task(on_wire.wait())
                await asyncio.wait({poll, wire}, return_when=asyncio.FIRST_COMPLETED)
                wire.cancel()
            decision = {"decision": "approve", "userId": rt.USER}
            r = await self.client.request(
                "POST", f"/v1/approvals/{aid}/decision", json=decision, headers=self.approver
            )
            t_decided = time.perf_counter()
            rt._expect(r, 200, "decision")
            answer = rt._expect(await poll, 200, "long-poll")
        finally:
            if not poll.done():
                poll.cancel()
                with contextlib.suppress(BaseException):
                    await poll
        t_end = time.perf_counter()
        outcome = answer.get("outcome") or {}
        if outcome.get("type") != "succeeded":
            raise rt.Failure(f"long-poll: outcome {outcome!r}, wanted succeeded")
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
    shop = module.Orders(orders=EveryOrder(module.Order))
    secret = secrets.token_urlsafe(24)
    keys: dict[str, Any] = {}
    app_port = rt.free_port()
    server_app = uvicorn.Server(
        # The application checks each execute's grant against the server's keys, fetched below.
        uvicorn.Config(
            module.build(secret, lambda: keys, shop), host="127.0.0.1", port=app_port, log_level="warning"
        )
    )
    serving = asyncio.create_task(server_app.serve())
    while not server_app.started:  # noqa: ASYNC110 (uvicorn offers no event to wait on)
        await asyncio.sleep(0.01)
    url = f"http://127.0.0.1:{app_port}/cosigner"
    env = {SECRET_ENV: secret, "COSIGNER_CALLBACK_ALLOW": "127.0.0.1"}
    failed = False
    try:
        async with rt.running_server(
            "sqlite", args.pg_admin, cores[0], args.server_log_level, policy_text=policy(url), extra_env=env
        ) as server:
            async with httpx.AsyncClient() as fetch:
                keys.update((await fetch.get(f"{server.url}/v1/keys")).raise_for_status().json())
            print(
                f"\n== contract round trips: server pid {server.pid} on core {cores[0]}; "
                f"client and application on core {cores[1]}"
            )
            print(
                f"{'conc':>5} {'rt/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'prepare':>8} "
                f"{'execute':>8} {'approved':>9} {'srv cpu':>8}"
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
                    before = dict(shop.calls)
                    if args.py_spy and c == args.profile_concurrency:
                        await stack.enter_async_context(rt.py_spy(server.pid, args.py_spy, args.seconds))
                    res = await rt.run_phase(c, args.seconds, args.max_ops, server.pid, trip)
                    await asyncio.sleep(0.5)  # executes of round trips that failed late
                    prepared = shop.calls["prepare"] - before["prepare"]
                    executed = shop.calls["execute"] - before["execute"]
                    ms = 1000.0
                    print(
                        f"{c:>5} {res.rate:>8.0f} {rt.percentile(res.latencies, 50) * ms:>8.1f} "
                        f"{rt.percentile(res.latencies, 99) * ms:>8.1f} {res.error_count:>7} "
                        f"{prepared:>8} {executed:>8} {res.ok:>9} {res.server_cpu:>8.0%}",
                        flush=True,
                    )
                    for what, n in res.errors.most_common():
                        print(f"      ! {n} x {what}")
                    if res.error_count or executed != res.ok:
                        failed = True
                    if c == 64:
                        verdict = "meets" if res.rate >= BAR and not res.error_count else "misses"
                        print(f"   at 64 concurrent: {res.rate:.0f} rt/s, {verdict} the bar ({BAR:.0f})")
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

"""Teams click-to-ack latency: signed `adaptiveCard/action` invokes against a real server process.

    .venv/bin/python bench/teams_clicks.py [--db sqlite|postgres] [--concurrency 1,16]
                                           [--clicks 400]

Set-up (all on loopback): the Teams emulator (`TeamsEmulator.running`, port 0) runs in this
process; `cosigner serve` runs as its own process pinned to the other core, with a fresh
database, MICROSOFT_APP_ID / _PASSWORD / _TENANT_ID of the emulator's bot, TEAMS_API_URL =
the emulator, and a policy whose tenant `bench` has `teams_tenant` = the emulator's tenant.

At each concurrency level:
1. (not timed) create `--clicks` approvals over the API, each in its own conversation with
   requester BENCHER as approver; wait until the emulator holds every card; build one
   Approve invoke per card, exactly as the Bot Connector sends it, each with its own JWT
   signed by the emulator's key (`TeamsEmulator.invoke`, `token_for`);
2. (timed) `concurrency` workers, each on its own keep-alive connection, POST those invokes
   to `/teams/messages`; click-to-ack = the HTTP response time of one invoke. The answer
   (the closed card) is sent only after the decision is committed, so an ack is a decision;
3. (not timed) read every clicked approval back: it must be `approved`, by BENCHER, on
   `teams`. Anything else, or an invoke answered with anything but statusCode 200, is an error.

The emulator answers the server's card updates from this process, so client-side CPU is not
reported. Exit status 0 when there was no error.
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import roundtrip as rt

from surfaces.teams.emulator import Posted, TeamsEmulator

APP_ID = "00000000-0000-4000-8000-0000000be4c0"
PASSWORD = "bench-teams-" + secrets.token_hex(8)
HOME = "00000000-0000-4000-8000-0000000be401"
AAD = "00000000-0000-4000-8000-0000000be402"
BENCHER = "00000000-0000-4000-8000-0000000be403"
TOOL = rt.TOOL
POLICY = (
    rt.POLICY
    + f"""
[tenants.bench]
teams_tenant = "{AAD}"
"""
)
SETUP_CONCURRENCY = 16


async def create(api: httpx.AsyncClient, key: str, run: str, count: int) -> list[str]:
    """`count` approvals, each in its own conversation; their ids."""
    ids: list[str] = []
    todo = list(range(count))

    async def worker() -> None:
        while todo:
            n = todo.pop()
            body = {
                "executionId": f"run_{run}_{n}",
                "toolCallId": f"call_{n}",
                "toolName": TOOL,
                "parameters": {"orderId": f"ord_{n}", "amountCents": 12900, "note": "bench"},
                "reason": "benchmark",
                "surface": {
                    "type": "teams",
                    "tenantId": AAD,
                    "conversationId": f"19:{run}-{n}@thread.tacv2",
                    "userId": BENCHER,
                },
            }
            r = await api.post("/v1/approvals", json=body, headers={"Authorization": f"Bearer {key}"})
            if r.status_code != 201 or r.json().get("status") != "pending":
                raise rt.Failure(f"create: HTTP {r.status_code} {r.text[:200]}")
            ids.append(r.json()["approvalId"])

    await asyncio.gather(*(worker() for _ in range(SETUP_CONCURRENCY)))
    return ids


async def cards_for(emu: TeamsEmulator, ids: list[str]) -> list[Posted]:
    """The posted card of every approval, once all are there (at most 60 s)."""
    wanted = set(ids)
    deadline = time.monotonic() + 60
    while True:
        found = {
            p.versions[0]["attachments"][0]["content"]["actions"][0]["data"]["approvalId"]: p
            for p in emu.cards()
        }
        if wanted <= set(found):
            return [found[i] for i in ids]
        if time.monotonic() > deadline:
            raise rt.Failure(f"only {len(wanted & set(found))} of {len(wanted)} cards arrived")
        await asyncio.sleep(0.05)


async def level(server: rt.Server, emu: TeamsEmulator, concurrency: int, count: int) -> dict[str, Any]:
    """One level: create, sign, click (timed), verify."""
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as api:
        run = secrets.token_hex(3)
        ids = await create(api, server.key, run, count)
        cards = await cards_for(emu, ids)
        clicks = [(emu.invoke(c, "approve", BENCHER), emu.token_for()) for c in cards]
        latencies: list[float] = []
        errors = 0
        queue = list(clicks)
        clients = [httpx.AsyncClient(base_url=server.url, timeout=60) for _ in range(concurrency)]

        async def worker(client: httpx.AsyncClient) -> None:
            nonlocal errors
            while queue:
                body, token = queue.pop()
                started = time.perf_counter()
                r = await client.post(
                    "/teams/messages", json=body, headers={"Authorization": f"Bearer {token}"}
                )
                latencies.append(time.perf_counter() - started)
                if r.status_code != 200 or r.json().get("statusCode") != 200:
                    errors += 1

        cpu0 = rt.cpu_seconds(server.pid)
        began = time.perf_counter()
        await asyncio.gather(*(worker(c) for c in clients))
        elapsed = time.perf_counter() - began
        server_cpu = rt.cpu_seconds(server.pid) - cpu0
        for c in clients:
            await c.aclose()
        for approval_id in ids:
            got = (
                await api.get(
                    f"/v1/approvals/{approval_id}", headers={"Authorization": f"Bearer {server.key}"}
                )
            ).json()
            by = got.get("decidedBy", {})
            if got.get("status") != "approved" or by.get("userId") != BENCHER or by.get("surface") != "teams":
                errors += 1
    return {
        "concurrency": concurrency,
        "clicks": len(latencies),
        "rate": len(latencies) / elapsed if elapsed else 0.0,
        "p50": rt.percentile(latencies, 50) * 1000,
        "p90": rt.percentile(latencies, 90) * 1000,
        "p99": rt.percentile(latencies, 99) * 1000,
        "srv_ms": 1000 * server_cpu / len(latencies) if latencies else float("nan"),
        "errors": errors,
    }


async def main_async(args: argparse.Namespace) -> int:
    cores = rt.pick_cores()
    async with TeamsEmulator.running(app_id=APP_ID, app_password=PASSWORD, tenant_id=HOME) as emu:
        env = {
            "MICROSOFT_APP_ID": APP_ID,
            "MICROSOFT_APP_PASSWORD": PASSWORD,
            "MICROSOFT_APP_TENANT_ID": HOME,
            "TEAMS_API_URL": emu.api_url,
        }
        async with rt.running_server(
            args.db, args.pg_admin, cores[0], "WARNING", policy_text=POLICY, extra_env=env
        ) as server:
            print(f"Teams click-to-ack: server pid {server.pid} on core {cores[0]}; {args.db}")
            await level(server, emu, 4, 32)  # warm-up, not reported
            print(
                f"{'conc':>5} {'clicks':>7} {'clicks/s':>9} {'p50 ms':>8} {'p90 ms':>8} "
                f"{'p99 ms':>8} {'srv ms/click':>13} {'errors':>7}"
            )
            failed = 0
            for c in args.concurrency:
                r = await level(server, emu, c, args.clicks)
                failed += r["errors"]
                print(
                    f"{r['concurrency']:>5} {r['clicks']:>7} {r['rate']:>9.0f} {r['p50']:>8.1f} "
                    f"{r['p90']:>8.1f} {r['p99']:>8.1f} {r['srv_ms']:>13.2f} {r['errors']:>7}"
                )
            problems = server.stderr_problems()
            if problems:
                print(f"server error lines: {len(problems)}")
    return 0 if failed == 0 and not problems else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--pg-admin", default=rt.DEFAULT_PG_ADMIN)
    parser.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 16])
    parser.add_argument("--clicks", type=int, default=400)
    args = parser.parse_args(argv)
    try:
        return asyncio.run(main_async(args))
    finally:
        rt._stop_all()


if __name__ == "__main__":
    sys.exit(main())

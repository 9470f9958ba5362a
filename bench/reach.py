"""Email and Web Push: how soon a request reaches people, and what it costs the server.

    .venv/bin/python bench/reach.py [--requests 200]

Two `cosigner serve` processes in one run, one after the other, each pinned to one core
with SQLite (a fresh temporary file), the same policy (the tool is asked of the tenant's
admins) and the same `--requests` approvals asked one after another:

- off: the admins answer in the tenant's app (`admins.dashboard`); nothing is sent;
- on: the admins are told by email (`admins.email`, COSIGNER_SMTP_URL pointing at an
  aiosmtpd server in this process) and the inbox's sign-in is on, so Web Push is on; the
  admin has one subscribed browser, whose push service (in this process) checks the VAPID
  JWT and decrypts each message as the browser would (`tests/pushservice.py`).

Reported: for "on", the time from the create's POST to the email accepted by the SMTP
server and to the push delivered to the push service (p50, p99); for both, the server's
CPU per request (from /proc/<pid>/stat), from the first create until every email and push
arrived and the server is idle, less the idle server's own rate. Exit status 0 when every
request was emailed and pushed exactly once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import roundtrip as rt
from follow_up_steps import idle, until
from httpclients import make_client

from storage import push as push_store
from storage.database import Database
from surfaces.slack.emulator import SlackEmulator
from tests.mailbox import smtp_server
from tests.pushservice import push_service

ADA = "ada@bench.example"
POLICY = """
[defaults]
timeout = "1h"
max_gated_calls_per_execution = 1000

[tools.issue_refund]
kind = "danger"
approvers = ["tenant_admins"]

[tenants.bench]
admins = {{ {admins} }}
"""


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def run(
    label: str,
    args: argparse.Namespace,
    core: int | None,
    env: dict[str, str],
    admins: str,
    arrived: Any,
    on_start: Any = None,
    policy: str = POLICY,
    per_request: int = 2,
) -> dict[str, Any]:
    n = args.requests
    async with rt.running_server(
        "sqlite", "", core, "warning", policy_text=policy.format(admins=admins), extra_env=env
    ) as server:
        if on_start is not None:
            await on_start()
        client = make_client("raw", server.url, limit=4, timeout=60.0)
        headers = {"Authorization": f"Bearer {server.key}"}
        started: dict[str, float] = {}
        try:
            await idle(server.pid)
            t0, c0 = time.monotonic(), rt.cpu_seconds(server.pid)
            await asyncio.sleep(2.0)
            idle_rate = (rt.cpu_seconds(server.pid) - c0) / (time.monotonic() - t0)
            cpu0, t0 = rt.cpu_seconds(server.pid), time.monotonic()
            for i in range(n):
                body = {
                    "executionId": f"run_{i}",
                    "toolCallId": "c1",
                    "toolName": "issue_refund",
                    "parameters": {"orderId": f"ord_{i}", "amountCents": 12900},
                    "surface": {"type": "dashboard", "userId": "u_requester"},
                }
                at = time.time()
                made = rt._expect(
                    await client.request("POST", "/v1/approvals", json=body, headers=headers), 201, "ask"
                )
                started[made["approvalId"]] = at
            ok = await until(lambda: arrived() is None or len(arrived()) >= per_request * n, 120)
            await idle(server.pid)
            spent = rt.cpu_seconds(server.pid) - cpu0 - idle_rate * (time.monotonic() - t0)
        finally:
            await client.aclose()
    return {
        "label": label,
        "cpu_ms": spent / n * 1000.0,
        "idle_ms": idle_rate * 1000,
        "started": started,
        "ok": ok,
    }


async def bench(args: argparse.Namespace) -> int:
    cores = rt.pick_cores()
    if cores[1] is not None:
        os.sched_setaffinity(0, {cores[1]})
    print(rt.machine())
    n = args.requests
    off = await run("off", args, cores[0], {}, f'dashboard = ["{ADA}"]', lambda: None)
    with smtp_server() as mail, tempfile.TemporaryDirectory(prefix="cosigner-reach-") as tmp:
        async with push_service() as push, SlackEmulator.running(team_id="T0BENCH") as emu:
            emu.openid.register_client("bench-inbox", "bench-inbox-secret")
            url = f"sqlite+aiosqlite:///{Path(tmp) / 'reach.db'}"
            env = {
                "COSIGNER_DATABASE_URL": url,
                "COSIGNER_SMTP_URL": f"smtp://127.0.0.1:{mail.port}",
                "COSIGNER_SMTP_FROM": "cosigner@bench.example",
                "COSIGNER_OIDC_ISSUER": emu.openid.issuer,
                "COSIGNER_OIDC_CLIENT_ID": "bench-inbox",
                "COSIGNER_OIDC_CLIENT_SECRET": "bench-inbox-secret",
                "COSIGNER_CALLBACK_ALLOW": "127.0.0.0/8",
            }
            subscription = push.subscribe("ada")

            async def subscribed() -> None:
                db = Database(url)
                sub = push_store.Subscription(
                    subscription["endpoint"], subscription["keys"]["p256dh"], subscription["keys"]["auth"]
                )
                try:
                    await db.run_write(
                        lambda tx: push_store.subscribe(tx, [ADA], sub, "bench", "ada", time.time())
                    )
                finally:
                    await db.close()

            def arrived() -> list[Any]:
                return [*mail.box.received, *push.delivered]

            on = await run("on", args, cores[0], env, f'email = ["{ADA}"]', arrived, subscribed)
            emailed = {m.message["X-Cosigner-Approval"]: m.at for m in mail.box.received}
            pushed = {d.plaintext["tag"]: d.at for d in push.delivered}
            exact = len(mail.box.received) == len(emailed) == n and len(push.delivered) == len(pushed) == n
    to_email = [(emailed[a] - t) * 1000 for a, t in on["started"].items() if a in emailed]
    to_push = [(pushed[a] - t) * 1000 for a, t in on["started"].items() if a in pushed]
    print(f"\n== reach, {n} requests each, server on core {cores[0]}, SQLite")
    for r in (off, on):
        cpu, idle_ms = r["cpu_ms"], r["idle_ms"]
        print(f"{r['label']:>4}: {cpu:.2f} ms server CPU per request (idle {idle_ms:.1f} ms/s taken out)")
    print(f"extra with email and push on: {on['cpu_ms'] - off['cpu_ms']:.2f} ms CPU per request")
    for what, values in (("create → email accepted", to_email), ("create → push delivered", to_push)):
        if values:
            print(
                f"{what}: p50 {statistics.median(values):.0f} ms, p99 {pct(values, 99):.0f} ms "
                f"(max {max(values):.0f} ms, {len(values)} requests)"
            )
    print(f"emails {len(emailed)}, pushes {len(pushed)} (each must be {n})")
    return 0 if exact and on["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args(argv)
    try:
        return asyncio.run(bench(args))
    finally:
        rt._stop_all()


if __name__ == "__main__":
    raise SystemExit(main())

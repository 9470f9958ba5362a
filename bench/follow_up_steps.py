"""The job worker's cost per follow-up step: a reminder, an escalation, in a real server.

    .venv/bin/python bench/follow_up_steps.py [--requests 40]

`cosigner serve` runs as a separate process pinned to one core with SQLite (a fresh
temporary file), Slack pointed at the bundled emulator (in this process, on the other
core), and the stepped clock (`COSIGNER_TEST_CLOCK`), so the steps fall due when this
script moves time, not by waiting. The policy's one tool reminds after 5 minutes and
escalates to the tenant admins' channel after 10. The script

1. asks `--requests` approvals from as many Slack channels and waits for their cards;
2. moves the clock 5 minutes: each request gets its reminder (a thread reply); waits for
   all of them and for the server to go idle;
3. moves it 5 more: each request is posted to the admin channel and its original card
   updated to say so; waits the same way.

Reported: the server's CPU per request for each step, less what the idle server spends
in the same time (measured first, over 3 seconds) (the worker claiming the due job,
reading the approval, the Slack call, the audit event, finishing the job), from
/proc/<pid>/stat. The escalated cards all go to one channel, which Cosigner paces to about
one post a second as Slack asks, so step 3 takes about `--requests` seconds of wall time
(idle, not CPU). Exit status 0 when every step arrived exactly once, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import roundtrip as rt
from httpclients import make_client

from surfaces.slack.emulator import SlackEmulator

TEAM = "T0BENCH"
APP = "A0BENCH"
POLICY = f"""
[defaults]
timeout = "1h"
max_gated_calls_per_execution = 1000

[tools.issue_refund]
kind = "danger"
timeout = "1h"
remind_after = "5m"
escalate = [{{ after = "10m", to = "tenant_admins" }}]

[tenants.bench]
slack_team = "{TEAM}"
admins = {{ slack = ["U0ADMIN"] }}
admin_channel = "C0ADMINS"
"""


def posts(emu: SlackEmulator, *, thread: bool, channel: str | None = None) -> int:
    return sum(
        1
        for m in emu.messages
        if m.method == "chat.postMessage"
        and (m.thread_ts is not None) == thread
        and (channel is None or m.channel == channel)
    )


def updates(emu: SlackEmulator) -> int:
    return sum(1 for m in emu.messages if m.method == "chat.update")


async def until(check: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def idle(pid: int, seconds: float = 0.3) -> None:
    """Return once the server used under 2% of a core over `seconds`."""
    while True:
        before = rt.cpu_seconds(pid)
        await asyncio.sleep(seconds)
        if rt.cpu_seconds(pid) - before < 0.02 * seconds:
            return


async def bench(args: argparse.Namespace) -> int:
    cores = rt.pick_cores()
    if cores[1] is not None:
        os.sched_setaffinity(0, {cores[1]})
    print(rt.machine())
    n = args.requests
    async with SlackEmulator.running(team_id=TEAM, app_id=APP) as emu:
        env = {
            "SLACK_SIGNING_SECRET": "bench-signing-secret",
            "SLACK_BOT_TOKEN": "xoxb-bench",
            "SLACK_API_URL": emu.api_url,
            "SLACK_APP_ID": APP,
            "COSIGNER_TEST_CLOCK": str(int(time.time())),
        }
        async with rt.running_server(
            "sqlite", args.pg_admin, cores[0], args.server_log_level, policy_text=POLICY, extra_env=env
        ) as server:
            client = make_client("raw", server.url, limit=4, timeout=60.0)
            headers = {"Authorization": f"Bearer {server.key}"}
            try:
                for i in range(n):
                    body = {
                        "executionId": f"run_{i}",
                        "toolCallId": "c1",
                        "toolName": "issue_refund",
                        "parameters": {"orderId": f"ord_{i}", "amountCents": 12900},
                        "surface": {
                            "type": "slack",
                            "teamId": TEAM,
                            "channelId": f"C{i:05d}",
                            "userId": "U1",
                        },
                    }
                    rt._expect(
                        await client.request("POST", "/v1/approvals", json=body, headers=headers), 201, "ask"
                    )
                ok = await until(lambda: posts(emu, thread=False) == n, 120)
                await idle(server.pid)
                # What the idle server costs a second (its sweeper and worker polls), to take
                # out of the steps' figures: the paced escalations keep it waiting for seconds.
                t0, c0 = time.monotonic(), rt.cpu_seconds(server.pid)
                await asyncio.sleep(3.0)
                idle_rate = (rt.cpu_seconds(server.pid) - c0) / (time.monotonic() - t0)
                results = []
                for label, minutes, done in (
                    ("reminder", 5, lambda: posts(emu, thread=True) == n),
                    (
                        "escalation",
                        5,
                        lambda: posts(emu, thread=False, channel="C0ADMINS") == n and updates(emu) == n,
                    ),
                ):
                    cpu0, t0 = rt.cpu_seconds(server.pid), time.monotonic()
                    r = await client.request("POST", "/test/clock", json={"advanceSeconds": minutes * 60})
                    rt._expect(r, 200, "clock")
                    ok = await until(done, 30 + 2 * n) and ok
                    await idle(server.pid)
                    spent = rt.cpu_seconds(server.pid) - cpu0 - idle_rate * (time.monotonic() - t0)
                    results.append((label, spent / n * 1000.0, time.monotonic() - t0))
            finally:
                await client.aclose()
        reminders = posts(emu, thread=True)
        escalated = posts(emu, thread=False, channel="C0ADMINS")
    print(f"\n== follow-up steps, {n} requests, server on core {cores[0]}")
    print(f"idle server: {idle_rate * 1000:.1f} ms CPU a second (taken out below)")
    for label, ms, wall in results:
        print(f"{label:>11}: {ms:.2f} ms server CPU per step ({wall:.1f} s wall for all)")
    exact = reminders == n and escalated == n
    print(f"reminders posted {reminders}, escalated cards {escalated} (each must be {n})")
    return 0 if ok and exact else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--server-log-level", default="warning")
    parser.add_argument("--pg-admin", default="")
    args = parser.parse_args(argv)
    try:
        return asyncio.run(bench(args))
    finally:
        rt._stop_all()


if __name__ == "__main__":
    raise SystemExit(main())

"""A tool's `notify = ["email"]`: how soon the notice is accepted, and what it costs the server.

    .venv/bin/python bench/notify.py [--requests 200]

Two `cosigner serve` processes in one run, one after the other, each pinned to one core
with SQLite, SMTP configured (an aiosmtpd server in this process) and the same `--requests`
approvals asked one after another from the tenant's app, of the requester (so the route
itself sends nothing):

- off: the tool has no `notify`; nothing is sent;
- notify: `notify = ["email"]`; each request also emails a notice to the tenant's
  `admins.email` (one `notify` job, one SMTP session, its `email_sent` event).

Reported: the time from the create's POST to the notice accepted by the SMTP server (p50,
p99), and for both the server's CPU per request (as `bench/reach.py` measures it). Exit
status 0 when every request's notice arrived exactly once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import roundtrip as rt
from reach import pct, run

from tests.mailbox import smtp_server

ADA = "ada@bench.example"
POLICY = """
[defaults]
timeout = "1h"
max_gated_calls_per_execution = 1000

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]
{notify}

[tenants.bench]
admins = {{{{ {{admins}} }}}}
"""


async def bench(args: argparse.Namespace) -> int:
    cores = rt.pick_cores()
    if cores[1] is not None:
        os.sched_setaffinity(0, {cores[1]})
    print(rt.machine())
    n = args.requests
    with smtp_server() as mail:
        env = {
            "COSIGNER_SMTP_URL": f"smtp://127.0.0.1:{mail.port}",
            "COSIGNER_SMTP_FROM": "cosigner@bench.example",
        }
        admins = f'email = ["{ADA}"]'
        off = await run("off", args, cores[0], env, admins, lambda: None, policy=POLICY.format(notify=""))
        sent_off = len(mail.box.received)
        on = await run(
            "notify",
            args,
            cores[0],
            env,
            admins,
            lambda: mail.box.received[sent_off:],
            policy=POLICY.format(notify='notify = ["email"]'),
            per_request=1,
        )
        noticed = {m.message["X-Cosigner-Approval"]: m.at for m in mail.box.received[sent_off:]}
        exact = sent_off == 0 and len(mail.box.received) == len(noticed) == n
    to_notice = [(noticed[a] - t) * 1000 for a, t in on["started"].items() if a in noticed]
    print(f"\n== notify, {n} requests each, server on core {cores[0]}, SQLite")
    for r in (off, on):
        print(
            f"{r['label']:>6}: {r['cpu_ms']:.2f} ms server CPU per request "
            f"(idle {r['idle_ms']:.1f} ms/s taken out)"
        )
    print(f"extra with notify on: {on['cpu_ms'] - off['cpu_ms']:.2f} ms CPU per request")
    if to_notice:
        print(
            f"create → notice accepted: p50 {statistics.median(to_notice):.0f} ms, "
            f"p99 {pct(to_notice, 99):.0f} ms (max {max(to_notice):.0f} ms, {len(to_notice)} requests)"
        )
    print(f"notices {len(noticed)} (must be {n}), emails with notify off {sent_off} (must be 0)")
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

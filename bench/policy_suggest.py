"""Time and memory of `cosigner policy suggest` per thousand decided requests.

    .venv/bin/python bench/policy_suggest.py [--sizes 0,1000,5000]

For each size it records that many calls through the real API (in process, on a SQLite
file) and answers each as a person would on the dashboard: credits (`issue_credit`, asked
of three admins in turn) approved below 5,000 cents and denied above (one in fifty of
those left unanswered), plus lookups a rule already lets through. Then it runs
`cosigner policy suggest` as its own process and prints its wall time, CPU time and peak
resident memory, and the suggestion it printed. Size 0 is the command's own start
(imports, policy, database open). Unlike replay, suggest keeps each call of the window
(its tool, parameters and outcome) to try conditions on, and replays the candidate's tool
twice to prove it: its memory grows with the window.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from storage.database import Database  # noqa: E402
from tests.harness import cosigner_app  # noqa: E402

POLICY = """
[defaults]
timeout = "5m"
max_gated_calls_per_execution = 5

[tools.lookup_order]
kind = "read"

[tools.issue_credit]
kind = "write"
confirm = true
approvers = ["tenant_admins"]

[tenants.acme]
admins = { dashboard = ["u_a", "u_b", "u_c"] }
"""
ADMINS = ("u_a", "u_b", "u_c")


async def record(path: Path, count: int) -> None:
    """Record and answer `count` calls through the API on the SQLite file at `path`."""
    db = Database(f"sqlite+aiosqlite:///{path}")
    await db.migrate()
    try:
        async with cosigner_app(POLICY, db=db, run_workers=False) as h:
            key = await h.create_tenant("acme")
            for i in range(count):
                tool = "lookup_order" if i % 5 == 4 else "issue_credit"
                amount = (i * 37) % 10000
                r = await h.client.post(
                    "/v1/approvals",
                    headers=h.auth(key),
                    json={
                        "executionId": f"run_{i}",
                        "toolCallId": "c1",
                        "toolName": tool,
                        "parameters": {"orderId": f"ord_{i}", "amountCents": amount},
                        "surface": {"type": "dashboard", "userId": "u_agent"},
                    },
                )
                assert r.status_code in (200, 201), r.text
                if tool == "lookup_order" or (i % 50 == 0 and amount >= 5000):
                    continue  # run unasked; or left unanswered
                answer = "approve" if amount < 5000 else "deny"
                d = await h.client.post(
                    f"/v1/approvals/{r.json()['approvalId']}/decision",
                    headers=h.auth(h.approver_key("acme")),
                    json={"decision": answer, "userId": ADMINS[i % 3]},
                )
                assert d.status_code == 200, d.text
    finally:
        await db.close()


def suggest(path: Path, policy: Path) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds, peak RSS (MiB) and the output of one `policy suggest`."""
    env = {
        **os.environ,
        "COSIGNER_DATABASE_URL": f"sqlite+aiosqlite:///{path}",
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "sdk" / "python")]),
    }
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "policy", "suggest", "--policy", str(policy)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    out = child.stdout.read()
    _pid, status, usage = os.wait4(child.pid, 0)  # this child's own usage
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    assert child.returncode == 0, out
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out


def main() -> None:
    """Record, suggest and print one line per size."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="0,1000,5000")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        policy = Path(tmp) / "policy.toml"
        policy.write_text(POLICY)
        for size in (int(s) for s in args.sizes.split(",")):
            path = Path(tmp) / f"s{size}.db"
            asyncio.run(record(path, size))
            wall, cpu, rss, out = suggest(path, policy)
            said = next((line for line in out.splitlines() if line.startswith("match =")), "(nothing)")
            print(f"{size:>6} requests: {wall:6.2f} s wall, {cpu:6.2f} s CPU, peak RSS {rss:.0f} MiB; {said}")


if __name__ == "__main__":
    main()

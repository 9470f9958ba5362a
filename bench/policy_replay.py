"""Memory and time of `cosigner policy replay` per thousand recorded requests.

    .venv/bin/python bench/policy_replay.py [--sizes 1000,5000,20000]

For each size it records that many gated calls through the real API (in process, on a
SQLite file: refunds of every size, credits, lookups), then runs `cosigner policy replay`
as its own process against a policy that changes some of them, and prints the process's
wall time, CPU time and peak resident memory. Replay streams the audit record, so its peak
memory should not grow with the number of requests; its time grows linearly. The first
size, 0, measures the command's own start (imports, policy, database open): subtract it
to get the cost per thousand requests.
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
from tests.harness import DEFAULT_POLICY, cosigner_app  # noqa: E402

NEW = DEFAULT_POLICY.replace("value = 5000", "value = 10000").replace("confirm = true", 'confirm = "always"')


async def record(path: Path, count: int) -> None:
    """Record `count` calls through the API on the SQLite file at `path`."""
    db = Database(f"sqlite+aiosqlite:///{path}")
    await db.migrate()
    try:
        async with cosigner_app(db=db, run_workers=False) as h:
            key = await h.create_tenant("acme")
            for i in range(count):
                tool = ("issue_refund", "issue_credit", "lookup_order", "issue_refund")[i % 4]
                r = await h.client.post(
                    "/v1/approvals",
                    headers=h.auth(key),
                    json={
                        "executionId": f"run_{i}",
                        "toolCallId": "c1",
                        "toolName": tool,
                        "parameters": {"orderId": f"ord_{i}", "amountCents": (i * 37) % 20000},
                        "reason": "Customer says the discount was not applied",
                        "surface": {"type": "dashboard", "userId": "u_1"},
                    },
                )
                assert r.status_code in (200, 201), r.text
    finally:
        await db.close()


def replay(path: Path, policy: Path) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MiB) of one `cosigner policy replay` process."""
    env = {
        **os.environ,
        "COSIGNER_DATABASE_URL": f"sqlite+aiosqlite:///{path}",
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "sdk" / "python")]),
    }
    started = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-m", "bot.cli", "policy", "replay", "--policy", str(policy)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    out = child.stdout.read()
    # wait4: this child's own usage (RUSAGE_CHILDREN would be the peak of every child so far).
    _pid, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    assert child.returncode == 0, out
    cpu = usage.ru_utime + usage.ru_stime
    print(out.splitlines()[0])
    return wall, cpu, usage.ru_maxrss / 1024


def main() -> None:
    """Record, replay and print one line per size."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="0,1000,5000,20000")
    parser.add_argument(
        "--data", help="keep the recorded databases in this folder (default: a temporary one)"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.data or scratch
        Path(tmp).mkdir(parents=True, exist_ok=True)
        policy = Path(tmp) / "new.toml"
        policy.write_text(NEW)
        for size in sizes:
            path = Path(tmp) / f"r{size}.db"
            asyncio.run(record(path, size))
            wall, cpu, rss = replay(path, policy)
            print(f"{size:>6} requests: {wall:6.2f} s wall, {cpu:6.2f} s CPU, peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()

"""Server CPU per create with the audit sink on and off (`POST /v1/approvals` in process
over httpx's ASGI transport, `tests.harness.cosigner_app`), in one run.

    .venv/bin/python bench/audit_sink.py [--rounds 5] [--calls 800] [--base DIR] [--postgres]

"off": no COSIGNER_AUDIT_SINK_URL. "on": the sink set to a receiver in another process (so
its CPU is not counted), answering 204; after the creates, the sink sends every event they
recorded (`AuditSink.run_once` until nothing is left), and that CPU is counted too:
"on, create" is the creates alone, "on, total" the creates and the sending, per create.
With `--base DIR` (a checkout of the code before the sink) DIR's "off" is measured too, in
the same rounds. Each measurement runs in a fresh process, alternately, so all see the same
machine; the figure is process CPU time per create, lowest and median of the rounds. On
PostgreSQL (`--postgres`, COSIGNER_TEST_POSTGRES_URL) the database's own CPU is not in it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
POLICY = """
[defaults]
max_gated_calls_per_execution = 100000

[tools.issue_refund]
kind = "danger"
approvers = ["requester"]
"""
RECEIVER = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(204); self.end_headers()
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


def child(tree: str, calls: int, kind: str, sink: str | None) -> dict[str, float]:
    """Measure on the code of `tree` (run in a process of its own)."""
    sys.path[:0] = [tree, f"{tree}/sdk/python"]
    from tests.harness import cosigner_app

    def body(i: int) -> dict[str, Any]:
        return {
            "executionId": f"run_{i}",
            "toolCallId": "c1",
            "toolName": "issue_refund",
            "parameters": {"orderId": "ord_1", "amountCents": 12900},
            "surface": {"type": "dashboard", "userId": "u_dev"},
        }

    out: dict[str, float] = {}
    settings: dict[str, Any] = {"audit_sink_url": sink} if sink else {}

    async def creates() -> None:
        async with cosigner_app(POLICY, run_workers=False, database_kind=kind, **settings) as h:
            key = await h.create_tenant("acme")
            sender = getattr(h.parts, "sink", None)

            async def drain() -> int:
                sent = 0
                while sender is not None and (n := await sender.run_once()):
                    sent += n
                return sent

            for i in range(50):  # warm up: caches, the first statements, the sink's connection
                await h.client.post("/v1/approvals", json=body(i), headers=h.auth(key))
            await drain()
            start = time.process_time()
            for i in range(50, calls + 50):
                r = await h.client.post("/v1/approvals", json=body(i), headers=h.auth(key))
                assert r.status_code == 201, r.text
            created = time.process_time()
            sent = await drain()
            done = time.process_time()
            if sink:
                assert sent >= calls, f"the sink got {sent} events of {calls} creates"
                out["on, create"] = (created - start) / calls * 1e3
                out["on, total"] = (done - start) / calls * 1e3
            else:
                out["off"] = (created - start) / calls * 1e3

    asyncio.run(creates())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=800)
    parser.add_argument("--base", help="a checkout of the code before the audit sink")
    parser.add_argument("--postgres", action="store_true", help="on COSIGNER_TEST_POSTGRES_URL")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--sink", help=argparse.SUPPRESS)
    parser.add_argument("--kind", default="sqlite", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.calls, args.kind, args.sink)))
        return
    kind = "postgres" if args.postgres else "sqlite"
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout is not None
        url = f"http://127.0.0.1:{receiver.stdout.readline().strip()}/sink"
        runs = [("after", str(ROOT), None), ("after", str(ROOT), url)]
        if args.base:
            runs.insert(0, ("before", args.base, None))
        found: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for label, tree, sink in runs:
                env = {"PYTHONPATH": f"{tree}:{tree}/sdk/python", "PATH": "/usr/bin:/bin"}
                if os.environ.get("COSIGNER_TEST_POSTGRES_URL"):
                    env["COSIGNER_TEST_POSTGRES_URL"] = os.environ["COSIGNER_TEST_POSTGRES_URL"]
                command = [
                    sys.executable,
                    __file__,
                    "--child",
                    tree,
                    "--calls",
                    str(args.calls),
                    "--kind",
                    kind,
                ]
                run = subprocess.run(
                    command + (["--sink", sink] if sink else []),
                    capture_output=True,
                    text=True,
                    check=True,
                    env=env,
                )
                measured: dict[str, float] = json.loads(run.stdout.strip().splitlines()[-1])
                for name, value in measured.items():
                    found.setdefault((name, label), []).append(value)
    finally:
        receiver.terminate()
        receiver.wait()
    print(f"{'sink':<11} {'tree':<7} {'lowest':>9} {'median':>9}   ({kind}, CPU per create)")
    for (name, label), values in sorted(found.items(), key=lambda kv: (kv[0][1] != "before", kv[0][0])):
        low, mid = min(values), statistics.median(values)
        print(f"{name:<11} {label:<7} {low:>7.3f}ms {mid:>7.3f}ms")


if __name__ == "__main__":
    main()

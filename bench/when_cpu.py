"""CPU per call the policy lets through, with and without `when` blocks: `rule_on` alone, and a
whole create in process (`POST /v1/approvals` answered `200 approved` with a grant, SQLite,
`tests.harness.cosigner_app` over httpx's ASGI transport).

    .venv/bin/python bench/when_cpu.py [--rounds 5] [--calls 1500] [--decides 20000] [--base DIR]

Tools measured: `lookup_order`, a `read` tool without blocks, the path every call without
blocks takes; `Bash` with the documented coding-agent blocks (examples/coding_agent_policy.toml):
`git status --short`, allowed by `when[1]` after `when[0]`'s pattern failed, and, for
`rule_on` alone, a push asked by `when[2]` and an `rm -rf` denied by `when[0]`.

With `--base DIR` (a checkout of the code before `when` blocks, e.g. `git archive main | tar
-x -C DIR`) each round runs once on DIR's code and once on this tree's, alternately, each
in a fresh process, so both see the same machine; DIR measures the read tool only. The
figure is process CPU time (not wall time) per call, lowest and median of the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READ_POLICY = """
[tools.lookup_order]
kind = "read"

[tenants.acme]
admins = { dashboard = ["u_admin"] }
"""
BASH = {
    "Bash allowed by when[1]": {"command": "git status --short"},
    "Bash asked by when[2]": {"command": "git push origin main"},
    "Bash denied by when[0]": {"command": "git status; rm -rf /"},
}
CREATED = ("lookup_order (no blocks)", "Bash allowed by when[1]")


def child(tree: str, calls: int, decides: int) -> dict[str, dict[str, float]]:
    """Measure on the code of `tree` (run in a process of its own)."""
    sys.path[:0] = [tree, f"{tree}/sdk/python"]
    import bot.policy
    from bot.policy import ENABLED, load_policy
    from contracts.errors import PolicyError
    from contracts.wire import DashboardSurface
    from tests.harness import cosigner_app

    named = "rule_on" if hasattr(bot.policy, "rule_on") else "decide"  # an earlier tree: `decide`
    rule_on = getattr(bot.policy, named)

    example = (ROOT / "examples" / "coding_agent_policy.toml").read_text()
    try:
        text = READ_POLICY + example.split("[tenants.demo]")[0]
        load_policy(text)
    except PolicyError:
        text = READ_POLICY  # a tree before `when` blocks
    policy = load_policy(text)
    cases = {"lookup_order (no blocks)": ("lookup_order", {"orderId": "ord_1"})}
    if "Bash" in text:
        cases |= {name: ("Bash", params) for name, params in BASH.items()}
    surface = DashboardSurface(type="dashboard", userId="u_dev")
    out: dict[str, dict[str, float]] = {"decide_us": {}, "create_ms": {}}
    for name, (tool, params) in cases.items():
        start = time.process_time()
        for _ in range(decides):
            rule_on(policy, "acme", tool, params, surface, enabled=ENABLED)
        out["decide_us"][name] = (time.process_time() - start) / decides * 1e6

    async def creates() -> None:
        async with cosigner_app(text, run_workers=False) as h:
            key = await h.create_tenant("acme")
            for name, (tool, params) in cases.items():
                if name not in CREATED:
                    continue
                bodies = [
                    {
                        "executionId": f"{tool}_{i}",
                        "toolCallId": "c1",
                        "toolName": tool,
                        "parameters": params,
                        "surface": {"type": "dashboard", "userId": "u_dev"},
                    }
                    for i in range(calls + 50)
                ]
                for body in bodies[:50]:  # warm up: caches, the first statements
                    await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
                start = time.process_time()
                for body in bodies[50:]:
                    r = await h.client.post("/v1/approvals", json=body, headers=h.auth(key))
                    assert r.status_code == 200 and r.json()["status"] == "approved", r.text
                out["create_ms"][name] = (time.process_time() - start) / calls * 1e3

    asyncio.run(creates())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=1500)
    parser.add_argument("--decides", type=int, default=20000)
    parser.add_argument("--base", help="a checkout of the code before when blocks")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.calls, args.decides)))
        return
    trees = ([("before", args.base)] if args.base else []) + [("after", str(ROOT))]
    found: dict[tuple[str, str, str], list[float]] = {}
    for _ in range(args.rounds):
        for label, tree in trees:
            counts = ["--calls", str(args.calls), "--decides", str(args.decides)]
            run = subprocess.run(
                [sys.executable, __file__, "--child", tree, *counts],
                capture_output=True,
                text=True,
                check=True,
                env={"PYTHONPATH": f"{tree}:{tree}/sdk/python", "PATH": "/usr/bin:/bin"},
            )
            measured: dict[str, dict[str, float]] = json.loads(run.stdout.strip().splitlines()[-1])
            for what, per in measured.items():
                for name, value in per.items():
                    found.setdefault((what, name, label), []).append(value)
    print(f"{'measure':<10} {'call':<26} {'tree':<7} {'lowest':>9} {'median':>9}")
    for (what, name, label), values in found.items():
        unit = "µs" if what == "decide_us" else "ms"
        low, mid = min(values), statistics.median(values)
        print(f"{what[:-3]:<10} {name:<26} {label:<7} {low:>7.2f}{unit} {mid:>7.2f}{unit}")


if __name__ == "__main__":
    main()

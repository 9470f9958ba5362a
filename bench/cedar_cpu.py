"""CPU per decision on a Cedar policy against the same policy in TOML, in one run.

    .venv/bin/python bench/cedar_cpu.py [--rounds 5] [--decides 20000] [--base DIR]

The policy is the sample one (`bot/dev/sandbox_policy.toml`) and its Cedar translation
(`cosigner policy to-cedar`), loaded as `serve` loads them, plus two Cedar policies that
read a parameter (`orderId` of `lookup_order`, `amountCents` of `issue_refund`), so calls
whose parameters differ are different requests. Each round decides, alternately, the same
calls by each source:

- `lookup_order`, a read tool: TOML's fast path, nobody asked;
- `issue_refund`, asked of a person, routed to Slack;

each both with a parameter no call has had before (so Cedar evaluates every call: nothing
remembered per policy load answers it) and with the same parameters every call (answered
from what Cedar decided before). The figure is process CPU time (not wall time) per
decision, lowest and median of the rounds.

With `--base DIR` (a checkout of earlier code, e.g. `git archive main | tar -x -C DIR`),
each round runs once on DIR's code and once on this tree's, alternately, each in a fresh
process, so both see the same machine.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "bot/dev/sandbox_policy.toml"
# Policies that read a parameter, so that differing values are differing requests.
READS = """
@id("order-blocked")
forbid (principal, action, resource == Cosigner::Tool::"lookup_order")
when { context.parameters has orderId && context.parameters.orderId == "ord_blocked" };

@id("refund-size")
forbid (principal, action, resource == Cosigner::Tool::"issue_refund")
when { context.parameters has amountCents && context.parameters.amountCents > 100000000 };
"""
FAST = "TOML lookup_order, new every call (the fast path)"


def child(tree: str, rounds: int, decides: int) -> dict[str, list[float]]:
    """Measure on the code of `tree` (run in a process of its own)."""
    sys.path[:0] = [tree, f"{tree}/sdk/python"]
    import bot.policy
    from bot.policy import ENABLED, load_policy
    from bot.policy.to_cedar import to_cedar, with_cedar
    from contracts.wire import SlackSurface

    named = "rule_on" if hasattr(bot.policy, "rule_on") else "decide"  # an earlier tree: `decide`
    rule_on = getattr(bot.policy, named)
    surface = SlackSurface(type="slack", teamId="T0DEMO", channelId="C0SUPPORT", userId="U0ALICE")
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        text = SAMPLE.read_text(encoding="utf-8")
        toml = load_policy(text, source=str(SAMPLE), base=SAMPLE.parent)
        policies, schema = to_cedar(toml)
        (folder / "p.cedar").write_text(policies + READS, encoding="utf-8")
        typed = "parameters: { orderId?: String, amountCents?: Long }"
        (folder / "p.cedarschema").write_text(schema.replace("parameters: {}", typed), encoding="utf-8")
        cedar = with_cedar(tomllib.loads(text), folder, "p.cedar", "p.cedarschema", str(SAMPLE))
    kw: dict[str, Any] = {"enabled": ENABLED, "now": 1_800_000_000.0, "agent": "key_1"}
    fresh = itertools.count()  # a value no call has had

    def call(policy: Any, tool: str, parameters: Callable[[], dict[str, Any]]) -> Callable[[], Any]:
        return lambda: rule_on(policy, "demo", tool, parameters(), surface, **kw)

    runs = {
        FAST: call(toml, "lookup_order", lambda: {"orderId": f"ord_{next(fresh)}"}),
        "Cedar lookup_order, new every call (evaluated)": call(
            cedar, "lookup_order", lambda: {"orderId": f"ord_{next(fresh)}"}
        ),
        "Cedar lookup_order, the same every call": call(cedar, "lookup_order", lambda: {"orderId": "ord_1"}),
        "TOML issue_refund, new every call (asked, routed)": call(
            toml, "issue_refund", lambda: {"amountCents": next(fresh)}
        ),
        "Cedar issue_refund, new every call (evaluated)": call(
            cedar, "issue_refund", lambda: {"amountCents": next(fresh)}
        ),
        "Cedar issue_refund, the same every call": call(cedar, "issue_refund", lambda: {"amountCents": 4000}),
    }
    for fn in runs.values():  # warm up: what is made once per load is made here
        for _ in range(200):
            fn()
    found: dict[str, list[float]] = {name: [] for name in runs}
    for _round in range(rounds):
        for name, fn in runs.items():
            start = time.process_time()
            for _ in range(decides):
                fn()
            found[name].append((time.process_time() - start) / decides * 1e6)
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--decides", type=int, default=20000)
    parser.add_argument("--base", help="a checkout of earlier code, measured alternately with this tree")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, 1, args.decides)))
        return
    trees = ([("before", args.base)] if args.base else []) + [("after" if args.base else "", str(ROOT))]
    found: dict[tuple[str, str], list[float]] = {}
    for _round in range(args.rounds):
        for label, tree in trees:
            argv = [sys.executable, __file__, "--child", tree, "--decides", str(args.decides)]
            out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
            for name, figures in json.loads(out).items():
                found.setdefault((label, name), []).extend(figures)
    print(f"{'tree':7} {'decision':52} {'lowest':>11} {'median':>11} {'÷ fast path':>12}")
    for label, _tree in trees:
        fast = statistics.median(found[(label, FAST)])
        for (at, name), figures in found.items():
            if at == label:
                median = statistics.median(figures)
                print(f"{label:7} {name:52} {min(figures):8.2f} µs {median:8.2f} µs {median / fast:11.2f}×")


if __name__ == "__main__":
    main()

"""CPU per decision on a Cedar policy against the same policy in TOML, in one process.

    .venv/bin/python bench/cedar_cpu.py [--rounds 5] [--decides 20000]

The policy is the sample one (`bot/dev/sandbox_policy.toml`) and its Cedar translation
(`cosigner policy to-cedar`), loaded as `serve` loads them. Each round decides, alternately,
the same calls by each source: `lookup_order` (a read tool: TOML's fast path) and
`issue_refund` (asked, route and all). For Cedar it also measures calls that all differ
(`amountCents` counts up, and the policy is rewritten to read it), so each is evaluated by
Cedar afresh rather than answered from the decisions remembered per policy load. The figure
is process CPU time (not wall time) per `decide`, lowest and median of the rounds.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "sdk/python")]

from bot.policy import ENABLED, Policy, decide, load_policy  # noqa: E402
from bot.policy.to_cedar import to_cedar, with_cedar  # noqa: E402
from contracts.wire import SlackSurface  # noqa: E402

SAMPLE = ROOT / "bot/dev/sandbox_policy.toml"
SURFACE = SlackSurface(type="slack", teamId="T0DEMO", channelId="C0SUPPORT", userId="U0ALICE")
# A policy on refunds that reads the amount, so that differing amounts are differing requests.
READS_AMOUNT = """
@id("refund-size")
forbid (principal, action, resource == Cosigner::Tool::"issue_refund")
when { context.parameters has amountCents && context.parameters.amountCents > 100000000 };
"""


def sources(folder: Path) -> tuple[Policy, Policy]:
    text = SAMPLE.read_text(encoding="utf-8")
    toml = load_policy(text, source=str(SAMPLE), base=SAMPLE.parent)
    policies, schema = to_cedar(toml)
    (folder / "p.cedar").write_text(policies + READS_AMOUNT, encoding="utf-8")
    schema = schema.replace("parameters: {}", "parameters: { amountCents?: Long }")
    (folder / "p.cedarschema").write_text(schema, encoding="utf-8")
    return toml, with_cedar(tomllib.loads(text), folder, "p.cedar", "p.cedarschema", str(SAMPLE))


def per_call(n: int, fn: Callable[[int], Any]) -> float:
    start = time.process_time()
    for i in range(n):
        fn(i)
    return (time.process_time() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--decides", type=int, default=20000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        toml, cedar = sources(Path(folder))
        kw: dict[str, Any] = {"enabled": ENABLED, "now": 1_800_000_000.0}
        fresh = itertools.count()  # an amount no call has had
        runs: dict[str, Callable[[int], Any]] = {
            "TOML lookup_order (read: the fast path)": lambda i: decide(
                toml, "demo", "lookup_order", {"orderId": "ord_1"}, SURFACE, **kw
            ),
            "Cedar lookup_order": lambda i: decide(
                cedar, "demo", "lookup_order", {"orderId": "ord_1"}, SURFACE, agent="key_1", **kw
            ),
            "TOML issue_refund (asked, routed)": lambda i: decide(
                toml, "demo", "issue_refund", {"amountCents": 4000}, SURFACE, **kw
            ),
            "Cedar issue_refund": lambda i: decide(
                cedar, "demo", "issue_refund", {"amountCents": 4000}, SURFACE, agent="key_1", **kw
            ),
            "Cedar issue_refund, every call new (evaluated by Cedar)": lambda i: decide(
                cedar,
                "demo",
                "issue_refund",
                {"amountCents": next(fresh)},
                SURFACE,
                agent="key_1",
                **kw,
            ),
        }
        found: dict[str, list[float]] = {name: [] for name in runs}
        for _round in range(args.rounds):
            for name, fn in runs.items():
                n = args.decides if "new" not in name else args.decides // 4
                found[name].append(per_call(n, fn))
    print(f"{'decide':60} {'lowest':>10} {'median':>10}")
    for name, figures in found.items():
        print(f"{name:60} {min(figures):8.2f} µs {statistics.median(figures):8.2f} µs")
    fast = min(found["TOML lookup_order (read: the fast path)"])
    print(f"Cedar lookup_order / TOML fast path: {min(found['Cedar lookup_order']) / fast:.2f}×")


if __name__ == "__main__":
    main()

"""Interruptions a person gets in a coding agent's session of 60 gated calls over 45 minutes
(40 reads with varying arguments, 15 small edits, 5 dangerous commands, and the agent's
identical retries while a call waits), replayed on a stepped clock against the app in
process (`tests.harness.cosigner_app`, SQLite, the Slack emulator; the person answers with
really signed button presses), under two policies:

- baseline: no section for the agent's tools, today's default (each is `danger`): every call asked;
- recommended: examples/fatigue_policy.toml (docs/policy.md#asking-less), the first edit
  answered "Allow for 1h".

    .venv/bin/python bench/fatigue.py [--reads 40] [--writes 15] [--database sqlite|postgresql]

The session and the counting are in tests/fatigue_session.py; tests/bench/test_fatigue.py
asserts the same figures on a shorter session.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), f"{ROOT}/sdk/python"]

from tests.fatigue_session import BASELINE, Kind, Tally, replay, session  # noqa: E402


def rows(name: str, t: Tally) -> list[str]:
    who = ", ".join(f"{n} by {k}" for k, n in sorted(t.by.items()))
    asked = ", ".join(f"{t.asked[k]} {k.value}" for k in Kind)
    return [
        f"{name}:",
        f"  calls {t.calls} ({t.requests} requests with retries, {t.coalesced} coalesced)",
        f"  interruptions (cards posted) {t.interruptions}: {asked}",
        f"  dangerous calls asked on their own card {t.dangerous_asked_alone} of {t.dangerous}, "
        f"refused by a rule {t.refused_by_rule}, denied by the person {t.denied_by_person}",
        f"  calls run {t.run}: {who}",
        f"  calls run that no person or rule allowed {t.run_unallowed}",
    ]


async def main(reads: int, writes: int, database: str) -> None:
    steps = session(reads, writes)
    recommended = (ROOT / "examples" / "fatigue_policy.toml").read_text()
    base = await replay(BASELINE, steps, allow_for=False, database_kind=database)
    best = await replay(recommended, steps, allow_for=True, database_kind=database)
    for line in rows("baseline (every call asked)", base) + rows("recommended policy", best):
        print(line)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reads", type=int, default=40)
    parser.add_argument("--writes", type=int, default=15)
    parser.add_argument("--database", choices=("sqlite", "postgresql"), default="sqlite")
    args = parser.parse_args()
    asyncio.run(main(args.reads, args.writes, args.database))

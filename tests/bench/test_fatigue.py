"""The interruptions figure of bench/fatigue.py, on a shorter session of the same kinds of
call (every dangerous call, reads with an outside file among them, several edits), so that it
cannot silently regress: every call asked under the baseline, at most 10 under the
recommended policy, every dangerous call asked on its own card or refused by a rule, and no
call run that nobody allowed."""

from __future__ import annotations

from pathlib import Path

from bot.cli import main as cli
from tests.fatigue_session import BASELINE, Kind, replay, session

ROOT = Path(__file__).resolve().parent.parent.parent
POLICY = ROOT / "examples" / "fatigue_policy.toml"
CASES = ROOT / "examples" / "fatigue_policy.tests.toml"


def test_the_recommended_policy_is_checked_and_its_cases_pass() -> None:
    assert cli(["policy", "check", str(POLICY)]) == 0
    assert cli(["policy", "test", str(POLICY), str(CASES)]) == 0


async def test_the_recommended_policy_asks_at_most_ten_times_and_runs_nothing_unallowed() -> None:
    steps = session(reads=12, writes=5)
    assert len(steps) == 22 and sum(s.kind is Kind.DANGER for s in steps) == 5
    base = await replay(BASELINE, steps, allow_for=False)
    assert base.interruptions == base.calls == len(steps)
    assert base.coalesced == sum(s.retries for s in steps) > 0  # retries never asked twice
    assert base.run_unallowed == 0 and base.dangerous_asked_alone == 5

    best = await replay(POLICY.read_text(), steps, allow_for=True)
    assert best.calls == len(steps) and best.coalesced == base.coalesced
    assert best.interruptions <= 10
    assert best.asked[Kind.WRITE] == 1, "the first edit's Allow for 1h covers the later ones"
    assert best.by["a standing allow a person granted"] == 4
    assert best.asked[Kind.READ] == 1, "only the read outside the project is asked"
    # Every dangerous call is asked on a card of its own, or refused by a rule (rm -rf).
    assert best.dangerous_asked_alone + best.refused_by_rule == best.dangerous == 5
    assert best.refused_by_rule == 1
    assert best.run_unallowed == 0
    assert best.run == base.run  # asking less lets through nothing the person would refuse

"""The standing deny a refused request names is found again from its decider, whatever its id."""

from __future__ import annotations

import pytest

from bot.approvals.denials import decider, denial_of
from contracts.answers import PolicyDecider
from contracts.denials import Scope
from contracts.enums import ApprovalStatus, SurfaceType
from storage.denials import StandingDeny


@pytest.mark.parametrize("suffix", ["a" * 20, "-" * 20, "a" * 19 + "_"])
def test_a_refused_request_names_its_standing_deny(suffix: str) -> None:
    held = StandingDeny(
        f"den_{suffix}",
        Scope("acme", "t", SurfaceType.SLACK, "U1", "slack:U1"),
        "T1",
        "apv_x",
        0.0,
        None,
        None,
    )

    class Refused:
        status = ApprovalStatus.DENIED
        decided_by = decider(held)

    assert denial_of(Refused()) == held.id  # type: ignore[arg-type]
    assert decider(held).rule.startswith(f"standing deny {held.id} (set by slack:U1 at ")


def test_a_policy_rule_is_not_a_standing_deny() -> None:
    class Denied:
        status = ApprovalStatus.DENIED
        decided_by = PolicyDecider(rule="tools.delete_account.deny")

    assert denial_of(Denied()) is None  # type: ignore[arg-type]

"""One question, not two, in the pure intake decision: a pending twin answers a call only
where the call would otherwise be asked; every other outcome stands."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings

from bot.approvals.intake import Admit, Call, Coalesce, Refuse, question, weigh
from contracts.enums import ApprovalMode, ApprovalStatus
from contracts.ports import Route
from storage.intake import Snapshot
from tests.bot.test_intake_decide import DIGEST, calls, earlier, snapshots

TWIN = replace(earlier("issue_refund", DIGEST), id="apv_twin", tool_call_id="call_0")


@settings(max_examples=1500, deadline=None)
@given(calls, snapshots)
def test_a_pending_twin_answers_only_what_would_be_asked(call: Call, snap: Snapshot) -> None:
    alone = weigh(call, snap)
    joined = weigh(call, replace(snap, pending=TWIN))
    if isinstance(alone, Admit) and alone.status is ApprovalStatus.PENDING:
        assert joined == Coalesce(TWIN)
    elif isinstance(alone, Refuse):  # errors compare by what they say
        assert isinstance(joined, Refuse) and type(joined.error) is type(alone.error)
        assert joined.error.message == alone.error.message
    else:
        assert joined == alone, "a twin changes nothing a rule decides without a person"


@settings(max_examples=500, deadline=None)
@given(calls)
def test_the_twin_is_looked_for_only_when_the_call_would_be_asked(call: Call) -> None:
    q = question("acme", call, {"type": "dashboard", "userId": "u_2"}, "k" * 64)
    asks = not call.deny and call.mode is not ApprovalMode.NONE and call.threshold is None
    assert (q.coalesce is not None) == (asks and isinstance(call.routed, Route))

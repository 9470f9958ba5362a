"""The console's activity lines name each person by one address: `whatsapp:+1555…`, never
`whatsapp:whatsapp:+1555…`."""

from __future__ import annotations

from bot.observability.activity import decider
from contracts.answers import PersonDecider
from contracts.enums import SurfaceType


def test_a_whatsapp_approver_is_named_once() -> None:
    by = PersonDecider(surface=SurfaceType.WHATSAPP, userId="whatsapp:+15550100200")
    assert decider(by) == "whatsapp:+15550100200"


def test_other_approvers_keep_their_surface_prefix() -> None:
    assert decider(PersonDecider(surface=SurfaceType.SMS, userId="+15550100200")) == "sms:+15550100200"
    assert decider(PersonDecider(surface=SurfaceType.SLACK, userId="U0ALICE")) == "slack:U0ALICE"
    # A Slack id that merely looks like another surface's address is still prefixed.
    assert decider(PersonDecider(surface=SurfaceType.SLACK, userId="whatsapp:x")) == "slack:whatsapp:x"

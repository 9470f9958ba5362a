"""`--surface`: each kind parses to the SDK's surface, and every mistake names the fix."""

from __future__ import annotations

import pytest

from cosigner import DashboardSurface, SlackSurface, SmsSurface
from cosigner.mcp_gateway import SurfaceSpecError, parse_surface


@pytest.mark.parametrize(
    ("spec", "surface"),
    [
        ("slack:T0ACME/C0OPS/U0ALICE", SlackSurface(team_id="T0ACME", channel_id="C0OPS", user_id="U0ALICE")),
        ("sms:+15550100200", SmsSurface(phone="+15550100200")),
        ("dashboard:u_42", DashboardSurface(user_id="u_42")),
    ],
)
def test_each_kind_is_the_sdks_surface(spec: str, surface: object) -> None:
    assert parse_surface(spec) == surface


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("slack", "is not KIND:VALUE"),
        ("dashboard:", "is not KIND:VALUE"),
        ("slack:T0ACME/C0OPS", "a Slack surface is slack:TEAM/CHANNEL/USER"),
        ("slack:T0ACME//U0ALICE", "a Slack surface is slack:TEAM/CHANNEL/USER"),
        ("sms:5550100200", "is not a valid sms surface (sms.phone"),
        ("api:x", "unknown kind 'api'"),
    ],
)
def test_a_malformed_spec_names_the_fix(spec: str, says: str) -> None:
    with pytest.raises(SurfaceSpecError) as caught:
        parse_surface(spec)
    message = str(caught.value)
    assert message.startswith(f"--surface {spec!r}") and says in message
    assert "slack:T0ACME/C0ALERTS/U0ALICE" in message  # an example to copy

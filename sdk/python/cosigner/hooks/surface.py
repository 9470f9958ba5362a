"""`COSIGNER_SURFACE`: where the hook's approvals are shown, read with the standard library.

The same strings as the MCP gateway's `--surface` (`cosigner.mcp_gateway.surface_spec`),
checked by the same rules as the wire's surface models, and written as the wire's JSON:

    slack:T0ACME/D0ALICE/U0ALICE       team / channel / the user who runs the agent
    sms:+15550100200                   the phone of the person who runs the agent (E.164)
    dashboard:u_42                     the tenant's own app decides on behalf of user u_42
"""

from __future__ import annotations

import re

__all__ = ["PHONE", "SLACK_ID", "SurfaceError", "surface_json"]

EXAMPLES = "slack:T0ACME/C0ALERTS/U0ALICE, sms:+15550100200 or dashboard:u_42"
SLACK_ID = re.compile(r"^[A-Z0-9]{1,64}$")  # cosigner.names.SLACK_ID_PATTERN
PHONE = re.compile(r"^\+[1-9]\d{6,14}$")  # cosigner.names.PHONE_PATTERN
DASHBOARD_USER_MAX = 200  # cosigner.wire.DashboardSurface.userId


class SurfaceError(ValueError):
    """A `COSIGNER_SURFACE` that does not name a surface; the message names the fix."""


def surface_json(spec: str) -> dict[str, str]:
    """The wire surface `spec` names, or SurfaceError saying how to write it."""
    kind, sep, rest = spec.strip().partition(":")
    if not sep or not rest:
        raise SurfaceError(f"{spec!r} is not KIND:VALUE; write one of {EXAMPLES}")
    if kind == "slack":
        parts = rest.split("/")
        if len(parts) != 3 or not all(parts):
            raise SurfaceError(
                f"{spec!r}: a Slack surface is slack:TEAM/CHANNEL/USER, e.g. slack:T0ACME/C0ALERTS/U0ALICE"
            )
        for name, part in zip(("team", "channel", "user"), parts, strict=True):
            if not SLACK_ID.fullmatch(part):
                raise SurfaceError(
                    f"{spec!r}: the Slack {name} id must be 1 to 64 capital letters or digits, as Slack "
                    f"writes it; write one of {EXAMPLES}"
                )
        return {"type": "slack", "teamId": parts[0], "channelId": parts[1], "userId": parts[2]}
    if kind == "sms":
        if not PHONE.fullmatch(rest):
            raise SurfaceError(
                f"{spec!r}: the phone must be in E.164 form (+ and 7 to 15 digits); write one of {EXAMPLES}"
            )
        return {"type": "sms", "phone": rest}
    if kind == "dashboard":
        if len(rest) > DASHBOARD_USER_MAX or "\x00" in rest:
            raise SurfaceError(
                f"the dashboard user id must be 1 to {DASHBOARD_USER_MAX} characters without NUL; "
                f"write one of {EXAMPLES}"
            )
        return {"type": "dashboard", "userId": rest}
    raise SurfaceError(
        f"{spec!r}: unknown kind {kind!r}; the hook can show approvals in slack, sms or dashboard: "
        f"write one of {EXAMPLES}"
    )

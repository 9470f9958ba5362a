"""The `--surface` option: where the gateway's approvals are shown, written as one string.

MCP carries no conversation of its own, so the gateway names one in its configuration:

    slack:T0ACME/C0ALERTS/U0ALICE      team / channel / the user who runs the agent
    sms:+15550100200                   the phone of the person who runs the agent (E.164)
    dashboard:u_42                     the tenant's own app decides on behalf of user u_42
"""

from __future__ import annotations

from cosigner import DashboardSurface, SlackSurface, SmsSurface, Surface

__all__ = ["SurfaceSpecError", "parse_surface"]

EXAMPLES = "slack:T0ACME/C0ALERTS/U0ALICE, sms:+15550100200 or dashboard:u_42"


class SurfaceSpecError(ValueError):
    """A `--surface` value that does not name a surface; the message names the fix."""


def parse_surface(spec: str) -> Surface:
    """The SDK surface a `--surface` string names, or SurfaceSpecError saying how to write it."""
    kind, sep, rest = spec.strip().partition(":")
    if not sep or not rest:
        raise SurfaceSpecError(f"--surface {spec!r} is not KIND:VALUE; write one of {EXAMPLES}")
    try:
        if kind == "slack":
            parts = rest.split("/")
            if len(parts) != 3 or not all(parts):
                raise SurfaceSpecError(
                    f"--surface {spec!r}: a Slack surface is slack:TEAM/CHANNEL/USER, "
                    "e.g. slack:T0ACME/C0ALERTS/U0ALICE"
                )
            return SlackSurface(team_id=parts[0], channel_id=parts[1], user_id=parts[2])
        if kind == "sms":
            return SmsSurface(phone=rest)
        if kind == "dashboard":
            return DashboardSurface(user_id=rest)
    except ValueError as exc:
        if isinstance(exc, SurfaceSpecError):
            raise
        raise SurfaceSpecError(
            f"--surface {spec!r} is not a valid {kind} surface ({_first_line(exc)}); write one of {EXAMPLES}"
        ) from None
    raise SurfaceSpecError(
        f"--surface {spec!r}: unknown kind {kind!r}; the gateway can show approvals in slack, sms or "
        f"dashboard: write one of {EXAMPLES}"
    )


def _first_line(exc: Exception) -> str:
    # pydantic's messages run over several lines; the first error is enough to act on.
    errors = getattr(exc, "errors", None)
    if callable(errors):
        found = errors()
        if found:
            first = found[0]
            return f"{'.'.join(str(p) for p in first.get('loc', ()))}: {first.get('msg', '')}".strip(": ")
    return str(exc).splitlines()[0]

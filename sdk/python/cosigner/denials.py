"""Standing denies on the wire: an approver's "always deny" for a tool, and how it is reported.

A person who answers **Always deny** on a card (SMS `NEVER`, dashboard
`{"decision": "always_deny"}`) denies that request and records a standing deny: later
requests for the same tool, in the same tenant, whose only approver is that same person
and whose run was triggered by the same requester, are refused at once with
`403 PERMISSION_DENIED` carrying `error.denial`. `GET /v1/denials` lists them and
`DELETE /v1/denials/{id}` lifts one.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from cosigner.wire import Timestamp as Moment
from cosigner.wire import Wire as _Wire

DENIAL_ID_PATTERN = r"^den_[A-Za-z0-9_-]{20}$"
"""The shape of every standing deny id (`den_` and 15 random bytes in URL-safe base64)."""


class DenialApprover(_Wire):
    """The person who set a standing deny, as the surface they answered on names them."""

    surface: Literal["slack", "sms", "dashboard"]
    userId: str = Field(description="A Slack user id, an E.164 number, or the tenant app's user id.")
    teamId: str | None = Field(default=None, description="The Slack workspace or org, for Slack only.")


class Denial(_Wire):
    """One standing deny: what it covers, who set it and when, and whether it was lifted."""

    denialId: Annotated[str, Field(pattern=DENIAL_ID_PATTERN)]
    toolName: str
    approver: DenialApprover
    requester: str = Field(
        description=(
            "The trigger of the runs it covers, as cards show it (`slack:U1`, `sms:+1555…`, "
            "`dashboard:u_42`); it never covers runs of anyone else."
        )
    )
    setAt: Moment
    approvalId: str = Field(description="The request on which it was set.")
    liftedAt: Moment | None = None
    liftedBy: str | None = None


class DenialList(_Wire):
    """`GET /v1/denials`: the tenant's standing denies in force, newest first."""

    denials: list[Denial]


__all__ = ["DENIAL_ID_PATTERN", "Denial", "DenialApprover", "DenialList", "Moment"]

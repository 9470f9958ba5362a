"""Standing allows on the wire: an approver's "Allow for …" on a tool, and how it is listed.

A person who answers **Allow for 1h** on a card (SMS `ALLOW 1H`) approves that call and
puts a standing allow in force: later calls of the same tool, in the same tenant, from the
same requester in the same conversation, whose `allow_for_match` arguments equal the
approved call's and whose `allow_for_at_most` numbers are at most its values, are approved
at once (`decidedBy.kind = "allowance"`) until it expires, its uses run out, or someone
revokes it. `GET /v1/allowances` lists them and `DELETE /v1/allowances/{id}` revokes one.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from cosigner.wire import Timestamp as Moment
from cosigner.wire import Wire as _Wire

ALLOWANCE_ID_PATTERN = r"^alw_[A-Za-z0-9_-]{20}$"
"""The shape of every standing allow id (`alw_` and 15 random bytes in URL-safe base64)."""


class AllowanceGrantor(_Wire):
    """The person who granted a standing allow, as the surface they answered on names them."""

    surface: str = Field(description="Where they answered: slack, sms, teams, whatsapp or dashboard.")
    userId: str = Field(description="A Slack user id, an E.164 number, an AAD object id or a user id.")
    teamId: str | None = Field(default=None, description="The Slack workspace or org, for Slack only.")


class Allowance(_Wire):
    """One standing allow: what it covers, who granted it, until when and how often."""

    allowanceId: Annotated[str, Field(pattern=ALLOWANCE_ID_PATTERN)]
    toolName: str
    requester: str = Field(
        description=(
            "The requester and conversation whose calls it covers (`slack:T1/C1/1700.1/U1`, "
            "`sms:+1555…`); never anyone else's."
        )
    )
    grantedBy: AllowanceGrantor
    approvalId: str = Field(description="The request whose answer granted it.")
    match: dict[str, Any] = Field(
        description="The arguments a call must have equal (as the approver saw them, redacted)."
    )
    atMost: dict[str, float] = Field(description="The numbers a call's arguments may not exceed.")
    grantedAt: Moment
    expiresAt: Moment
    uses: int = Field(description="Calls it has allowed so far.")
    maxUses: int = Field(description="Calls it may allow in all (`allow_for_uses`).")
    revokedAt: Moment | None = None
    revokedBy: str | None = None


class AllowanceList(_Wire):
    """`GET /v1/allowances`: the tenant's standing allows in force, newest first."""

    allowances: list[Allowance]


__all__ = ["ALLOWANCE_ID_PATTERN", "Allowance", "AllowanceGrantor", "AllowanceList", "Moment"]

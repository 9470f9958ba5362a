"""`notify = ["email"]` on a tool: besides asking where its route says, tell the tenant's
`admins.email` by email that the request waits, and where to answer.

The email is a notice, never an approval path of its own: the answer counts only on the
surface the request is asked on (the inbox too when the route is the dashboard's). Here is
the value's type; `bot.policy.email_approvers` checks it against the tenants and the route,
and `bot.workers.notices` sends it.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field
from pydantic_core import PydanticCustomError

from bot.policy.schema_types import listed, say
from contracts.reach import Channel


def _email_only(channel: Channel) -> Channel:
    if channel is not Channel.EMAIL:
        raise ValueError("not a channel notify can use")
    return channel


def _once_each(channels: tuple[Channel, ...]) -> tuple[Channel, ...]:
    seen: set[Channel] = set()
    for c in channels:
        if c in seen:
            raise PydanticCustomError(
                "policy", '"{channel}" is listed twice; name each channel once', {"channel": c.value}
            )
        seen.add(c)
    return channels


NotifyChannel = Annotated[
    Channel,
    Field(strict=False),
    AfterValidator(_email_only),
    say(
        '"{input}" is not a channel to notify; use "email" (Web Push reaches every approver '
        "who turned it on in the inbox, without a setting here)"
    ),
]
Notify = Annotated[
    tuple[NotifyChannel, ...], Field(strict=False), listed('["email"]'), AfterValidator(_once_each)
]


def notified(value: Any) -> tuple[Channel, ...]:
    """The channels a merged rule's `notify` names (none when unset)."""
    return tuple(value or ())

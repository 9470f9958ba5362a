"""How a request reaches people outside a chat: the channels, and which adapter carries a route.

A dashboard route is answered in the tenant's app or Cosigner's inbox. With `email`
addresses on it (`admins.email`) it is also told by email: the job worker hands its delivery
to the email adapter, whose message links to the request's inbox page; the answer is still
given there, by a signed-in approver.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Protocol

from contracts.enums import AuditEvent, SurfaceType
from contracts.ports import DashboardRoute, Route


class Channel(StrEnum):
    """A way of telling a person a request waits that is not where they answer it."""

    EMAIL = "email"
    PUSH = "push"


def carrier(route: Route) -> str:
    """The name of the adapter that delivers `route`: its surface's, or `email` for a
    dashboard route that tells its approvers by email."""
    if isinstance(route, DashboardRoute) and route.email:
        return Channel.EMAIL.value
    return SurfaceType(route.surface).value


def delivered_by_worker(route: Route | None) -> bool:
    """True when a job must deliver `route`: every surface but a dashboard no email tells."""
    return route is not None and (not isinstance(route, DashboardRoute) or bool(route.email))


class Unsent(Exception):
    """A message a channel could not hand over, and why (the SMTP server's reply, the
    connection lost, a timeout). `lasting`: sending it again cannot help (a 5xx reply, an
    address refused for good), so it is recorded and not retried."""

    def __init__(self, reason: str, *, lasting: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.lasting = lasting


class Notes(Protocol):
    """Where a channel puts what it did on the request's audit chain (the desk)."""

    async def note(self, approval_id: str, event: AuditEvent, data: Mapping[str, Any]) -> None:
        """Append an event to the approval's audit chain (redacted)."""
        ...

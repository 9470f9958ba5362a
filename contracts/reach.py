"""How a request reaches people outside a chat: the channels, and which adapter carries a route.

A dashboard route is answered in the tenant's app or Cosigner's inbox. With `email`
addresses on it (`admins.email`) it is also told by email: the job worker hands its delivery
to the email adapter, whose message links to the request's inbox page; the answer is still
given there, by a signed-in approver.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from contracts.enums import AuditEvent, SurfaceType
from contracts.ports import ApprovalCard, DashboardRoute, Route


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


@dataclass(frozen=True)
class Device:
    """A browser subscribed to Web Push: its push service endpoint and the keys a message is
    encrypted to (RFC 8291: the P-256 public key `p256dh` and the `auth` secret, base64url)."""

    endpoint: str
    p256dh: str
    auth: str


@dataclass(frozen=True)
class Pushed:
    """What the push services said: the endpoints that took the message, those gone for
    good (404, 410: their subscriptions are removed), and the others' status and reason."""

    sent: tuple[str, ...] = ()
    gone: tuple[str, ...] = ()
    failed: dict[str, str] = field(default_factory=dict)
    retry: bool = False  # a failure that may pass (429, 5xx, no answer): worth another try


class PushBook(Protocol):
    """The subscriptions a push is sent to, kept by the engine's side."""

    async def devices_for(self, approvers: tuple[str, ...]) -> list[Device]:
        """Every browser of a person with one of these ids."""
        ...

    async def forget(self, endpoint: str) -> None:
        """Remove a subscription its push service says is gone."""
        ...

    async def vapid_pem(self) -> bytes:
        """The VAPID private key (PEM) messages are signed with, made at first use."""
        ...


class Post(Protocol):
    """One POST to a push service through the server's checked client: (status, reason)."""

    async def __call__(self, url: str, body: bytes, headers: Mapping[str, str]) -> tuple[int, str]:
        """Send once, never redirected; raises `Unsent` when no answer came."""
        ...


@runtime_checkable
class PushSurface(Protocol):
    """What the push channel offers the job worker besides an adapter's members."""

    async def push(self, card: ApprovalCard, approvers: tuple[str, ...]) -> Pushed:
        """Tell each browser of these approvers that the request waits (tool and tenant only)."""
        ...


@runtime_checkable
class NoticeSurface(Protocol):
    """What the email channel offers the job worker for a tool's `notify`: a notice that the
    request waits on another surface, which is where its answer counts."""

    async def notice(self, card: ApprovalCard, surface: SurfaceType, to: tuple[str, ...]) -> str:
        """Email `to` that the request waits on `surface`; its Message-ID, or `Unsent`."""
        ...

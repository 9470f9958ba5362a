"""The email adapter: a request's message handed to the operator's SMTP server (aiosmtplib).

One SMTP transaction per message, every approver a recipient of the envelope and none named
in the headers (`To: undisclosed-recipients:;`), so no approver learns another's address
and the server accepts the message for all of them at once or refuses it whole. What the
server said goes on the request's audit chain: `email_sent` with the addresses it accepted
(and any it refused, with its reply); a failure is raised as `Unsent` for the job worker,
which records `email_failed` and retries it with backoff (a 4xx reply, a timeout, a dropped
connection) or not (a 5xx reply: retrying cannot help).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from email.message import EmailMessage
from typing import Any

import aiosmtplib

from contracts.audit_events import EmailSent, written
from contracts.enums import AuditEvent, SurfaceType
from contracts.errors import SurfaceUnavailable
from contracts.ports import ApprovalCard, DashboardRoute, Delivered, Route
from contracts.reach import Channel, Notes, Unsent
from surfaces.email.config import EmailConfig
from surfaces.email.message import INBOX, Kind, Where, compose
from surfaces.email.notice import asked_on

log = logging.getLogger("cosigner.email")
CONVERSATION = "email"  # the receipt's conversation: answers come from the inbox, not from mail


def _lasting(code: int) -> bool:
    """A 5xx reply is final (RFC 5321 §4.2.1); a 4xx one may pass."""
    return 500 <= code < 600


class EmailAdapter:
    """Tells a dashboard route's `email` addresses of a request, its reminder and escalation."""

    name = Channel.EMAIL.value

    def __init__(self, config: EmailConfig, notes: Notes, clock: Callable[[], float]) -> None:
        self.config = config
        self.notes = notes
        self.clock = clock

    def routes(self) -> list[Any]:
        """None: nothing arrives by mail (answers are given in the inbox)."""
        return []

    async def start(self) -> None:
        """Nothing to open: each message has its own SMTP connection."""

    async def stop(self) -> None:
        """Nothing to close."""

    async def deliver(self, card: ApprovalCard, route: Route) -> Delivered:
        """Email the request to the route's addresses; `Unsent` if the server took it for none."""
        to = _addresses(route)
        kind = Kind.ESCALATION if card.escalations else Kind.REQUEST
        message_id = await self.send(card, kind, to)
        return Delivered(surface=SurfaceType.DASHBOARD, conversation=CONVERSATION, message_refs=(message_id,))

    async def remind(
        self, card: ApprovalCard, route: Route, delivered: Delivered, approvers: Sequence[str]
    ) -> None:
        """Email the reminder to the addresses still to answer."""
        to = tuple(a for a in _addresses(route) if a in approvers)
        if not to:
            raise SurfaceUnavailable("every approver told by email has answered; nobody to remind")
        try:
            await self.send(card, Kind.REMINDER, to)
        except Unsent as exc:
            raise SurfaceUnavailable(f"the reminder was not sent: {exc.reason}") from exc

    async def show_escalated(self, card: ApprovalCard, route: Route, delivered: Delivered) -> None:
        """Nothing: a sent email cannot change; the escalation's own message says so."""

    async def show_outcome(self, card: ApprovalCard, route: Route, delivered: Delivered) -> None:
        """Nothing: the request's page in the inbox shows the outcome."""

    async def notice(self, card: ApprovalCard, surface: SurfaceType, to: tuple[str, ...]) -> str:
        """Tell `to` that the request waits on `surface` (`notify`): a notice, never a way to
        answer; `Unsent` when the server took it for nobody."""
        return await self.send(card, Kind.NOTICE, to, asked_on(surface))

    async def send(self, card: ApprovalCard, kind: Kind, to: tuple[str, ...], where: Where = INBOX) -> str:
        """Hand one message for `to` to the SMTP server and record what it said; return its
        Message-ID. `Unsent` when the server accepted it for nobody."""
        now = datetime.fromtimestamp(self.clock(), UTC)
        link = self.config.link(card.approval_id)
        msg = compose(card, kind, sender=self.config.sender, link=link, now=now, where=where)
        try:
            refused = await self._transact(msg, to)
        except aiosmtplib.SMTPRecipientsRefused as exc:
            reasons = {r.recipient: f"{r.code} {r.message}" for r in exc.recipients}
            lasting = all(_lasting(r.code) for r in exc.recipients)
            raise Unsent(f"every recipient was refused: {_listed(reasons)}", lasting=lasting) from exc
        except aiosmtplib.SMTPResponseException as exc:
            raise Unsent(
                f"the SMTP server answered {exc.code} {exc.message}", lasting=_lasting(exc.code)
            ) from exc
        except aiosmtplib.SMTPTimeoutError as exc:
            raise Unsent(
                f"the SMTP server did not answer in {self.config.timeout:g} s", lasting=False
            ) from exc
        except aiosmtplib.SMTPServerDisconnected as exc:
            raise Unsent(f"the SMTP server dropped the connection ({exc})", lasting=False) from exc
        except aiosmtplib.SMTPConnectError as exc:
            raise Unsent(f"could not connect to the SMTP server ({exc})", lasting=False) from exc
        except (aiosmtplib.SMTPException, OSError) as exc:
            raise Unsent(f"the SMTP exchange failed: {type(exc).__name__}: {exc}", lasting=False) from exc
        accepted = [a for a in to if a not in refused]
        data = EmailSent(email=kind.name.lower(), to=accepted, messageId=msg["Message-ID"])
        if refused:
            data = data.model_copy(update={"refused": refused})
        await self.notes.note(card.approval_id, AuditEvent.EMAIL_SENT, written(data))
        log.info("email accepted approval=%s recipients=%d", card.approval_id, len(accepted))
        return str(msg["Message-ID"])

    async def _transact(self, msg: EmailMessage, to: tuple[str, ...]) -> dict[str, str]:
        """One SMTP session: connect, TLS, AUTH, the message; the recipients refused, with why."""
        c = self.config
        client = aiosmtplib.SMTP(
            hostname=c.host,
            port=c.port,
            username=c.username,
            password=c.password,
            use_tls=c.implicit_tls,
            # STARTTLS is required, except from a relay on loopback that offers none.
            start_tls=None if c.clear_allowed else (False if c.implicit_tls else True),
            tls_context=c.tls,
            timeout=c.timeout,
        )
        async with client:
            errors, _ = await client.send_message(msg, sender=c.sender, recipients=list(to))
        return {r: f"{e.code} {e.message}" for r, e in errors.items()}


def _addresses(route: Route) -> tuple[str, ...]:
    if not isinstance(route, DashboardRoute) or not route.email:
        raise SurfaceUnavailable(
            f"the email surface cannot deliver a {route.surface} route without addresses"
        )
    return route.email


def _listed(reasons: dict[str, str]) -> str:
    return "; ".join(f"{a}: {why}" for a, why in reasons.items())

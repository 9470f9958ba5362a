"""What the SMS surface remembers between texts: opt-outs, what was texted, and Twilio ids.

`SmsState` is the `SmsStore` (`contracts.sms`) the SMS and WhatsApp surfaces are handed: each
of its methods is one transaction over the functions below. Each kind of fact has its own
namespace in the `flags` table; nothing else writes there. When each request was last texted
to each number is a table of its own (`sms_texts`), read by number: a bare YES must not be
bound to a request when another one was texted then.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import sqlalchemy as sa

from contracts.enums import SurfaceType
from storage import inbound
from storage.database import Database
from storage.ledger import get_flag, insert_ignore, mark_once, set_flag
from storage.tables import sms_texts
from storage.work import Work

T = TypeVar("T")

OPT_OUT = "sms_opt_out"  # number → "1" while it has opted out
SENT_SID = "sms_sid"  # MessageSid → approval id, to map status callbacks
TEXTED = "sms_to"  # "<approval id>:<number>", written just before the request is texted
SENT = "sms_sent"  # "<approval id>:<number>" → MessageSid, so a retried deliver resends nothing
OUTCOME = "sms_outcome"  # "<approval id>:<number>" once the outcome was texted
# "<approval id>:<number>" → why the latest text could not show the call whole (even by
# MORE), so a YES to it is refused; no row when it could.
UNSHOWN = "sms_unshown"


def _pair(approval_id: str, number: str) -> str:
    return f"{approval_id}:{number}"


def opted_out(tx: Work, number: str) -> bool:
    """True while `number` has opted out by STOP."""
    return get_flag(tx, OPT_OUT, number) is not None


def set_opted_out(tx: Work, number: str, out: bool, now: float) -> None:
    """Record an opt-out (STOP) or clear it (START)."""
    set_flag(tx, OPT_OUT, number, "1" if out else None, now)


def mark_texting(
    tx: Work,
    approval_id: str,
    number: str,
    now: float,
    digest: str | None = None,
    unshown: str | None = None,
) -> None:
    """Record that the request is about to be texted to `number`, showing the call with
    `digest` (the latest text to a number is the version its answers are given for), and
    `unshown`: why that text cannot show the call whole, if it cannot."""
    set_flag(tx, TEXTED, _pair(approval_id, number), digest or "1", now)
    set_flag(tx, UNSHOWN, _pair(approval_id, number), unshown, now)
    shown(tx, approval_id, number, now)


def texted_unshown(tx: Work, approval_id: str, number: str) -> str | None:
    """Why the request's latest text to `number` could not show the call whole (None: it could)."""
    return get_flag(tx, UNSHOWN, _pair(approval_id, number))


def shown(tx: Work, approval_id: str, number: str, now: float) -> None:
    """Record that a text about the request (the request, a reminder, its whole call) went
    to `number` at `now`."""
    where = (sms_texts.c.number == number) & (sms_texts.c.approval_id == approval_id)
    if not tx.conn.execute(sms_texts.update().where(where).values(texted_at=now)).rowcount:
        insert_ignore(tx, sms_texts, {"number": number, "approval_id": approval_id, "texted_at": now})


def texted_other(tx: Work, number: str, approval_id: str, since: float) -> str | None:
    """Another request texted to `number` at or after `since`, or at or after this request's
    latest text to it: a bare answer could be meant for it. None when there is none."""
    own = tx.conn.execute(
        sa.select(sms_texts.c.texted_at).where(
            sms_texts.c.number == number, sms_texts.c.approval_id == approval_id
        )
    ).scalar_one_or_none()
    start = since if own is None else min(since, float(own))
    other = tx.conn.execute(
        sa.select(sms_texts.c.approval_id)
        .where(
            sms_texts.c.number == number,
            sms_texts.c.texted_at >= start,
            sms_texts.c.approval_id != approval_id,
        )
        .order_by(sms_texts.c.texted_at.desc())
        .limit(1)
    ).scalar_one_or_none()
    return None if other is None else str(other)


def texted_digest(tx: Work, approval_id: str, number: str) -> str | None:
    """The digest of the call the request's latest text to `number` showed (None: not
    texted, or texted before texts recorded it: the agent's own call)."""
    value = get_flag(tx, TEXTED, _pair(approval_id, number))
    return value if value is not None and value.startswith("sha256:") else None


def was_texted(tx: Work, approval_id: str, number: str) -> bool:
    """True once the request was (or was being) texted to `number`."""
    return get_flag(tx, TEXTED, _pair(approval_id, number)) is not None


def record_sent(tx: Work, approval_id: str, number: str, sid: str, now: float) -> None:
    """Record the MessageSid of the request texted to `number`."""
    set_flag(tx, SENT_SID, sid, approval_id, now)
    set_flag(tx, SENT, _pair(approval_id, number), sid, now)


def sent_sid(tx: Work, approval_id: str, number: str) -> str | None:
    """The MessageSid of the request already texted to `number`, if any."""
    return get_flag(tx, SENT, _pair(approval_id, number))


def approval_of_sid(tx: Work, sid: str) -> str | None:
    """The approval a request text with this MessageSid belongs to."""
    return get_flag(tx, SENT_SID, sid)


def first_outcome(tx: Work, approval_id: str, number: str, now: float) -> bool:
    """Record that the outcome is texted to `number`; False if it was before."""
    return mark_once(tx, OUTCOME, _pair(approval_id, number), now)


class SmsState:
    """The SMS surface's own state in the database (`contracts.sms.SmsStore`), on `clock`'s time."""

    def __init__(self, db: Database, clock: Callable[[], float]) -> None:
        self.db = db
        self.clock = clock

    async def message_seen(self, message_sid: str) -> bool:
        """True if this inbound text was handled before."""
        return await self._read(lambda tx: inbound.seen(tx, SurfaceType.SMS, message_sid))

    async def mark_message_seen(self, message_sid: str) -> bool:
        """Record an inbound text as handled; True the first time."""
        return await self._write(lambda tx, now: inbound.record(tx, SurfaceType.SMS, message_sid, now))

    async def opted_out(self, number: str) -> bool:
        """True while `number` has opted out by STOP."""
        return await self._read(lambda tx: opted_out(tx, number))

    async def set_opted_out(self, number: str, out: bool) -> None:
        """Record an opt-out (STOP) or clear it (START)."""
        await self._write(lambda tx, now: set_opted_out(tx, number, out, now))

    async def mark_texting(
        self, approval_id: str, number: str, digest: str | None = None, unshown: str | None = None
    ) -> None:
        """Record that the request is about to be texted to `number`, showing the call with
        `digest`, and why that text cannot show it whole (`unshown`), if it cannot."""
        await self._write(lambda tx, now: mark_texting(tx, approval_id, number, now, digest, unshown))

    async def texted_digest(self, approval_id: str, number: str) -> str | None:
        """The digest of the call last texted to `number` (what its answer is given for)."""
        return await self._read(lambda tx: texted_digest(tx, approval_id, number))

    async def texted_unshown(self, approval_id: str, number: str) -> str | None:
        """Why the request's latest text to `number` could not show the call whole (None: it could)."""
        return await self._read(lambda tx: texted_unshown(tx, approval_id, number))

    async def shown(self, approval_id: str, number: str) -> None:
        """Record that a text about the request (a reminder, its whole call) went to `number` now."""
        await self._write(lambda tx, now: shown(tx, approval_id, number, now))

    async def texted_other(self, number: str, approval_id: str, within: float) -> str | None:
        """Another request texted to `number` in the last `within` seconds, or since this
        request's latest text to it; None when none was."""
        since = self.clock() - within
        return await self._read(lambda tx: texted_other(tx, number, approval_id, since))

    async def was_texted(self, approval_id: str, number: str) -> bool:
        """True once the request was (or was being) texted to `number`."""
        return await self._read(lambda tx: was_texted(tx, approval_id, number))

    async def record_sent(self, approval_id: str, number: str, message_sid: str) -> None:
        """Record the MessageSid of the request texted to `number`."""
        await self._write(lambda tx, now: record_sent(tx, approval_id, number, message_sid, now))

    async def sent_sid(self, approval_id: str, number: str) -> str | None:
        """The MessageSid of the request already texted to `number`, if any."""
        return await self._read(lambda tx: sent_sid(tx, approval_id, number))

    async def approval_of_sid(self, message_sid: str) -> str | None:
        """The approval a request text with this MessageSid belongs to."""
        return await self._read(lambda tx: approval_of_sid(tx, message_sid))

    async def first_outcome(self, approval_id: str, number: str) -> bool:
        """Record that the outcome is texted to `number`; False if it was before."""
        return await self._write(lambda tx, now: first_outcome(tx, approval_id, number, now))

    async def _read(self, step: Callable[[Work], T]) -> T:
        return await self.db.run_read(step)

    async def _write(self, step: Callable[[Work, float], T]) -> T:
        now = self.clock()
        return await self.db.run_write(lambda tx: step(tx, now))

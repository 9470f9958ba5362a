"""What the SMS surface remembers between texts: opt-outs, what was texted, and Twilio ids.

Each kind of fact has its own namespace in the `flags` table; nothing else writes there.
When each request was last texted to each number is a table of its own (`sms_texts`), read
by number: a bare YES must not be bound to a request when another one was texted then.
"""

from __future__ import annotations

import sqlalchemy as sa

from storage.ledger import get_flag, insert_ignore, mark_once, set_flag
from storage.tables import sms_texts
from storage.work import Work

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

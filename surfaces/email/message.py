"""The email about a request: the call as a card shows it, in a text and an HTML part, with
one link to the request's page in the inbox.

The parameters are the redacted ones every surface gets, read through `contracts.shown`:
every top-level field sorted by name, each value cut to `VALUE_LIMIT` characters, and a
notice naming what was masked or cut, so nobody approves a call they were not shown whole
without being told. Everything the agent or tenant controls is escaped in the HTML part,
and header values are single lines (the message refuses a line break in a header).

The link opens the page; it carries no token and signs nobody in: the reader signs in to
the inbox as usual, and only an approver of the request can answer there. There is no
List-Unsubscribe (an approval is not a mailing list) and no way to answer by reply:
`Auto-Submitted` keeps auto-responders quiet, and the text says replies are not read.
"""

from __future__ import annotations

import base64
import html
import secrets
import textwrap
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from email.utils import format_datetime
from enum import StrEnum

from contracts.ports import ApprovalCard
from contracts.shown import Hidden, fields, hidden, render

VALUE_LIMIT = 200  # characters of one rendered value; the inbox shows the whole call
NAME_LIMIT = 80
TEXT_LIMIT = 1000
SUBJECT_TOOL = 100


class Kind(StrEnum):
    """Why the message is sent: the request itself, its one reminder, or an escalation."""

    REQUEST = "Approval needed"
    REMINDER = "Reminder: approval still needed"
    ESCALATION = "Escalated: approval needed"
    NOTICE = "Waiting for an answer"  # `notify`: told, asked elsewhere (`surfaces.email.notice`)


@dataclass(frozen=True)
class Where:
    """Where the answer is given, in the message's words: the inbox, or the surface the
    request is asked on when the message is only a notice of it (`notify`)."""

    waits: str = "waits for an approver's answer."
    link: str = "Open the request in the inbox to answer"
    footer: str = (
        "This link is not an approval and signs nobody in: you sign in to the inbox as usual, "
        "and only an approver of this request can answer there. Replies to this email are not read."
    )
    subject: str = ""  # added after the kind in the subject: ` in Slack`


INBOX = Where()


def _line(text: str, limit: int = TEXT_LIMIT) -> str:
    """Agent- or tenant-controlled text on one line, cut to `limit` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + "…"


def _rows(card: ApprovalCard) -> tuple[list[tuple[str, str]], Hidden]:
    """(name, value) for every parameter, cut as on a card, and what the rows leave out."""
    shown = fields(card.asked())
    found = hidden(shown, VALUE_LIMIT)
    left_out = Hidden(
        found.masked, tuple(f.name for f in shown if f.name in found.cut or len(f.name) > NAME_LIMIT)
    )
    rows = []
    for f in shown:
        value, dropped = f.cut(VALUE_LIMIT)
        # A name with a line break or other control character is shown quoted, as JSON, so it
        # cannot start a line of its own in the text part.
        name = f.name if f.name.isprintable() else render(f.name)
        name = name if len(name) <= NAME_LIMIT else name[:NAME_LIMIT] + "…"
        rows.append((name, value + (f" … [+{dropped:,} chars cut]" if dropped else "")))
    return rows, left_out


def _facts(card: ApprovalCard) -> list[tuple[str, str]]:
    facts = [("Tenant", card.tenant), ("Triggered by", _line(card.triggered_by, 200))]
    if card.reason:
        facts.append(("Agent's reason (its claim, not verified)", _line(card.reason)))
    facts.append(("Policy", _line(card.policy_rule, 300)))
    facts.append(("Expires", card.expires_at.strftime("%Y-%m-%d %H:%M:%S UTC")))
    if card.quorum > 1:
        facts.append(("Approvals", f"{card.progress()} (distinct approvers)"))
    if card.escalations:
        last = card.escalations[-1]
        facts.append(("Escalated", f"to {last.to.value} at {last.at.strftime('%H:%M UTC')}: nobody answered"))
    return facts


def subject(card: ApprovalCard, kind: Kind, where: Where = INBOX) -> str:
    """`Approval needed: issue_refund (acme)`."""
    return f"{kind.value}{where.subject}: {_line(card.tool_name, SUBJECT_TOOL)} ({_line(card.tenant, 60)})"


def text_part(card: ApprovalCard, kind: Kind, link: str, where: Where = INBOX) -> str:
    """The plain-text part."""
    rows, left_out = _rows(card)
    out = [f"{kind.value}: {card.tool_name} ({card.kind.value}) {where.waits}", ""]
    if card.preview is not None:
        out += [
            "This is an operation: the inbox shows the application's preview, which is what is approved.",
            "",
        ]
    out.append("Parameters (redacted as shown to every approver; the answer binds to exactly this call):")
    out += [f"  {name}: {value}" for name, value in rows] or ["  (none)"]
    if left_out:
        out += ["", f"! {left_out.notice('the inbox shows the whole call')} ({left_out.details()})"]
    out.append("")
    out += [f"{name}: {value}" for name, value in _facts(card)]
    out += ["", f"{where.link}: {link}", "", *textwrap.wrap(where.footer, 92), ""]
    return "\n".join(out)


def html_part(card: ApprovalCard, kind: Kind, link: str, where: Where = INBOX) -> str:
    """The HTML part: the same content, every value escaped."""
    e = html.escape
    rows, left_out = _rows(card)
    cells = "".join(
        f'<tr><th align="left" valign="top">{e(name)}</th><td><code>{e(value)}</code></td></tr>'
        for name, value in rows
    )
    facts = "".join(
        f'<tr><th align="left">{e(name)}</th><td>{e(value)}</td></tr>' for name, value in _facts(card)
    )
    parts = [
        "<!doctype html><html><body>",
        f"<h2>{e(kind.value)}{e(where.subject)}: {e(card.tool_name)}</h2>",
        f"<p>{e(card.tool_name)} ({e(card.kind.value)}) {e(where.waits)}</p>",
    ]
    if card.preview is not None:
        parts.append(
            "<p>This is an operation: the inbox shows the application's preview, "
            "which is what is approved.</p>"
        )
    parts.append(
        "<p>Parameters (redacted as shown to every approver; the answer binds to exactly this call):</p>"
    )
    parts.append(f"<table>{cells}</table>" if cells else "<p>(none)</p>")
    if left_out:
        notice = f"{left_out.notice('the inbox shows the whole call')} ({left_out.details()})"
        parts.append(f"<p><strong>&#9888; {e(notice)}</strong></p>")
    parts += [
        f"<table>{facts}</table>",
        f'<p><a href="{e(link)}">{e(where.link)}</a></p>',
        f"<p><small>{e(where.footer)}</small></p>",
        "</body></html>",
    ]
    return "".join(parts)


def message_id(domain: str) -> str:
    """A new Message-ID: 120 random bits in base32 (letters and the digits 2-7). Not the
    standard library's `make_msgid`, whose long runs of digits (the time, the process, a
    64-bit number) can look like a card number, which the audit record then masks: the
    `email_sent` event would no longer name the message it sent."""
    token = base64.b32encode(secrets.token_bytes(15)).decode("ascii").lower()
    return f"<{token}.cosigner@{domain}>"


def compose(
    card: ApprovalCard, kind: Kind, *, sender: str, link: str, now: datetime, where: Where = INBOX
) -> EmailMessage:
    """The message; its recipients are the envelope's only, so no approver sees another's address."""
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = "undisclosed-recipients:;"
    msg["Subject"] = subject(card, kind, where)
    msg["Date"] = format_datetime(now)
    msg["Message-ID"] = message_id(sender.rsplit("@", 1)[1])
    msg["Auto-Submitted"] = "auto-generated"  # RFC 3834: no auto-reply, no vacation notice
    msg["X-Auto-Response-Suppress"] = "All"
    msg["X-Cosigner-Approval"] = card.approval_id
    msg.set_content(text_part(card, kind, link, where))
    msg.add_alternative(html_part(card, kind, link, where), subtype="html")
    return msg

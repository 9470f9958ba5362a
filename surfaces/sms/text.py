"""What Cosigner texts to ask: the approval request.

Every function here is pure: it gets an `ApprovalCard` (parameters already redacted) and
returns a string. The request text aims for two concatenated GSM-7 segments (`BUDGET`, see
`surfaces.sms.fit`). Parameters are listed sorted by name, each value cut to `VALUE_LIMIT`
characters, and the list is cut with a note if it still does not fit, so the tool name, the
expiry and how to answer always fit; when anything is masked or cut the text says so, and
`MORE` (`surfaces.sms.more`) texts the whole call in parts. A call that even `MORE` cannot
text whole (`unshown`) cannot be approved by text: its text says so, offers only NO, and
points to the inbox. The replies to answers are in `surfaces.sms.replies_text`.
"""

from __future__ import annotations

from datetime import UTC, datetime

from contracts.enums import ApprovalStatus
from contracts.ports import ApprovalCard
from contracts.shown import Hidden, fields, hidden
from surfaces.sms.allow_for_text import allow_line
from surfaces.sms.fit import (
    BUDGET,
    CLAIM_LABEL,
    PLAIN,
    compact_parameters,
    cut,
    preview_line,
    sms_length,
    token,
    value_text,
)
from surfaces.sms.more import unshown

CLAIM_MIN = 40  # the agent's claim never crowds out the parameters...
CLAIM_MAX = 120  # ...nor fills the text when they are short
MIN_PARAMS = 24
VALUE_LIMIT = 60  # characters of one value in the request text; MORE texts the rest
VALUE_LIMITS = (VALUE_LIMIT, 40, 24, 12)  # shorter cuts tried in turn so every field fits


def left_out(card: ApprovalCard, limit: int = VALUE_LIMIT) -> Hidden:
    """What the request text leaves out of the parameters: values masked in place or cut."""
    if card.preview is not None:
        return Hidden()
    call = card.asked()
    masked = hidden(fields(call), limit).masked
    cut = tuple(str(name) for name in sorted(call, key=str) if len(value_text(call[name])) > limit)
    return Hidden(masked=masked, cut=cut)


EDITED_MARKS = (
    " (edited by an approver: this call, not the agent's)",
    " (edited by an approver)",
    " (edited)",
)


def to_sms_text(card: ApprovalCard, *, code_required: bool, inbox: str | None = None) -> str:
    """The request text: tool, redacted parameters, the agent's claim, expiry, how to answer.

    For an operation, the application's preview is what is approved; the agent's request
    is then part of its claim. A call an approver edited is marked so in the first line,
    with a line saying what changed (`changed_lines`) under the call; shorter forms of both
    are used when the long ones would leave the call itself cut, and none at the last. A
    call the texts cannot show whole (`unshown`) is offered NO only, and the text says so,
    naming `inbox` (where the whole call can be read) when there is one."""
    blocked = too_long_notice(inbox) if unshown(card) else None
    if card.step_up and card.status is ApprovalStatus.PENDING:
        # A text proves a phone, not a person: YES cannot approve; the inbox's passkey can.
        blocked = step_up_notice(card, inbox)
    if card.edited is None or card.status is not ApprovalStatus.PENDING:
        return _request_text(card, code_required, "", "", blocked)[0]
    tried = []
    for change in [*changed_lines(card), ""]:
        for mark in EDITED_MARKS:
            text, whole = _request_text(card, code_required, mark, change, blocked)
            if whole and sms_length(text) <= BUDGET:
                return text
            tried.append(text)
    fitting = [t for t in tried if sms_length(t) <= BUDGET]
    return fitting[0] if fitting else tried[-1]


def _request_text(
    card: ApprovalCard, code_required: bool, mark: str, change: str, blocked: str | None = None
) -> tuple[str, bool]:
    """The request text with `mark` after its question and `change` under the call, and
    whether it is whole: the call's list of fields not cut, and the claim's line kept.
    With `blocked` (the call is too long to text whole) that notice replaces the one
    offering MORE, and NO is the only answer offered."""
    what = card.preview.title if card.preview is not None else card.tool_name
    head = f"Cosigner request {card.short_code}: approve {what}?{mark}"
    expiry = f"Expires {_clock(card.expires_at, card.created_at)}."
    code = f" {card.short_code}" if code_required else ""
    needed = " (code needed: several requests are pending)" if code_required else ""
    if blocked is not None:
        how = f"Reply NO{code} to deny{needed}."
    elif code_required:
        how = f"Reply YES{code} or NO{code}{needed}."
    else:
        how = "Reply YES or NO."
    if blocked is None:
        how += allow_line(card, code)
    if card.quorum > 1 and blocked is None:
        # Part of `how`, so the budget counts it: the approver knows one YES is not enough.
        how += f" {card.quorum} approvers must say YES; one NO denies."
    claim = " ".join((card.reason or "").translate(PLAIN).split())
    if card.preview is not None:
        claim = " ".join(f"{compact_parameters(card.parameters)}. {claim}".translate(PLAIN).split())

    def say(missing: Hidden) -> str:
        # What the text leaves out, and where the rest is: MORE, or (too long) nowhere here.
        if blocked is not None:
            return blocked
        return f"{missing.notice(f'reply MORE{code} for the whole call')}." if missing else ""

    missing = left_out(card)
    notice = say(missing)
    said = claim
    claim_line = f'{CLAIM_LABEL}"{claim}"' if claim else ""
    # The parameters come first; the claim keeps only a short minimum for itself.
    reserved = min(sms_length(claim_line), len(CLAIM_LABEL) + CLAIM_MIN)

    def room_for(notice: str) -> int:
        # What is left for the parameters and the claim; each newline is one septet.
        lines = 4 + (1 if claim else 0) + (1 if notice else 0) + (1 if change else 0)
        fixed = sum(sms_length(line) for line in (head, change, expiry, how, notice))
        return BUDGET - fixed - (lines - 1)

    room = room_for(notice)
    shown = preview_line(card) if card.preview is not None else ""
    if card.preview is None:
        # Every field keeps a place: the values are cut shorter, and the claim gives up its
        # reserve, until the list fits.
        limit = VALUE_LIMITS[-1]
        # At the least, the claim line still says how much of the claim it cut.
        least = min(sms_length(claim_line), len(CLAIM_LABEL) + len("(+9999 chars cut)"))
        # At the last, the claim gives up its line (MORE texts it with the whole call).
        for reserve, limit in ((r, v) for r in (reserved, least, 0) for v in VALUE_LIMITS):
            shown = "Params: " + compact_parameters(card.asked(), limit)
            if reserve == 0 and claim:
                claim, room = "", room + 1  # the claim's newline too
            if sms_length(shown) <= room - reserve:
                reserved = reserve
                break
        else:
            reserved = 0  # no cut fits: the claim gave up its line, and the list is cut
        if limit != VALUE_LIMIT:
            missing = left_out(card, limit)
            notice = say(missing)
            room = room_for(notice)
    params = cut(shown, max(room - reserved, MIN_PARAMS))
    if params != shown and blocked is None:
        # The list itself had to be cut: say so, and how to read the rest.
        more = missing.notice(f"reply MORE{code} for the whole call") if missing else ""
        notice = f"Not all fields shown. {more or f'Reply MORE{code} for the whole call'}."
        room = room_for(notice)
        params = cut(shown, max(room - reserved, MIN_PARAMS))
    body = [head, params, *([change] if change else [])]
    if claim:
        budget = min(room - sms_length(params), len(CLAIM_LABEL) + CLAIM_MAX)
        body.append(CLAIM_LABEL + cut(f'"{claim}"', max(budget - len(CLAIM_LABEL), 0)))
    return "\n".join([*body, *([notice] if notice else []), expiry, how]), params == shown and claim == said


def changed_lines(card: ApprovalCard) -> list[str]:
    """What an approver's edit changed, longest first: `Changed: amountCents 40000->4000.`,
    then the fields' names only; none when the call was not edited (or is closed)."""
    if card.edited is None or card.status is not ApprovalStatus.PENDING or card.preview is not None:
        return []
    names = sorted(
        (k for k in card.edited if k not in card.parameters or card.parameters[k] != card.edited[k]), key=str
    )
    if not names:
        return []
    listed = f"Changed: {', '.join(token(str(n)) for n in names)}."
    olds = [value_text(card.parameters[n]) if n in card.parameters else "(none)" for n in names]
    news = [value_text(card.edited[n]) for n in names]
    if any(len(v) > VALUE_LIMITS[-1] for v in (*olds, *news)):
        return [listed]  # long values: the call above shows the new ones, MORE the rest
    pairs = ", ".join(f"{token(str(n))} {o}->{v}" for n, o, v in zip(names, olds, news, strict=True))
    return [f"Changed: {pairs}.", listed]


def step_up_notice(card: ApprovalCard, inbox: str | None) -> str:
    """The request text's line for a step-up call: approve in the inbox with a passkey
    (the link asks for sign-in as usual; it carries no session), never by YES."""
    if inbox is None:
        return "Approve in Cosigner with a passkey: YES cannot approve it."
    return f"Approve in Cosigner with a passkey: {inbox}approvals/{card.approval_id}/step-up"


def too_long_notice(inbox: str | None) -> str:
    """The request text's line for a call too long to text whole: YES cannot approve it."""
    where = f" Read it whole at {inbox}" if inbox else ""
    return f"Too long to text whole, so YES cannot approve it.{where}"


def _clock(at: datetime, reference: datetime) -> str:
    at = at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)
    ref = reference.astimezone(UTC) if reference.tzinfo else reference.replace(tzinfo=UTC)
    if at.date() == ref.date():
        return at.strftime("%H:%M UTC")
    return at.strftime("%b %d %H:%M UTC")

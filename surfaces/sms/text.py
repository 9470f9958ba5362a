"""What Cosigner texts: the approval request, the outcome, and the short replies.

Every function here is pure: it gets an `ApprovalCard` (parameters already redacted) and
returns a string. Texts aim for two concatenated GSM-7 segments (306 septets). Parameters
are listed sorted by name, each value cut to `VALUE_LIMIT` characters, and the list is cut
with a note if it still does not fit, so the tool name, the expiry and how to answer always
fit; when anything is masked or cut the text says so, and `MORE` (see `more_texts`) texts
the whole call in parts. A call that even `MORE` cannot text whole (`unshown`) cannot be
approved by text: its text says so, offers only NO, and points to the inbox.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from contracts.enums import ApprovalStatus
from contracts.ports import ApprovalCard
from contracts.shown import REDACTED, Hidden, fields, hidden
from surfaces.sms.allow_for_text import allow_line

BUDGET = 306  # two concatenated GSM-7 segments of 153 septets
CLAIM_LABEL = "Agent says (unverified): "
CLAIM_MIN = 40  # the agent's claim never crowds out the parameters...
CLAIM_MAX = 120  # ...nor fills the text when they are short
MIN_PARAMS = 24
HELP = (
    "Reply YES or NO (plus the code when asked), or NEVER to deny and always deny this tool for you. "
    "MORE texts the whole call. Nothing was decided."
)
VALUE_LIMIT = 60  # characters of one value in the request text; MORE texts the rest
VALUE_LIMITS = (VALUE_LIMIT, 40, 24, 12)  # shorter cuts tried in turn so every field fits
MORE_PARTS = 15  # texts one MORE answers with at most (about 4,000 characters)

_GSM7_BASIC = set(
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?¡"
    "ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
_GSM7_EXTENDED = set("^{}\\[~]|€\f")
_BARE = re.compile(r"^[A-Za-z0-9_.:@+/\-]+$")
# Typographic punctuation LLMs like to write; one of these would switch the whole
# text to UCS-2 (70 chars a segment), so the agent's reason is folded to plain ASCII.
_PLAIN = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"', "–": "-", "—": "-", "…": "..."})


def sms_length(text: str) -> int:
    """Length as the network counts it: GSM-7 septets, or UTF-16 units if any char is not GSM-7."""
    if all(c in _GSM7_BASIC or c in _GSM7_EXTENDED for c in text):
        return sum(2 if c in _GSM7_EXTENDED else 1 for c in text)
    return len(text.encode("utf-16-le")) // 2


def segments(text: str) -> int:
    """How many SMS segments `text` takes (153 septets or 67 UCS-2 units each when split)."""
    length = sms_length(text)
    gsm = all(c in _GSM7_BASIC or c in _GSM7_EXTENDED for c in text)
    single, part = (160, 153) if gsm else (70, 67)
    return 1 if length <= single else -(-length // part)


def compact_parameters(parameters: Mapping[str, Any], value_limit: int | None = None) -> str:
    """Parameters on one line sorted by name, `key=value, …`; strings are quoted unless
    plainly one token; with `value_limit`, each value is cut to that many characters.

    Quoting keeps a value like `"1, amountCents=1"` from passing for another parameter.
    """
    if not parameters:
        return "(none)"
    shown = []
    for name in sorted(parameters, key=str):
        value = _value(parameters[name])
        if value_limit is not None and len(value) > value_limit:
            value = f"{value[:value_limit]}...(+{len(value) - value_limit})"
        shown.append(f"{_token(str(name))}={value}")
    return ", ".join(shown)


def _token(text: str) -> str:
    if text == REDACTED or _BARE.match(text):
        return text
    return json.dumps(text, ensure_ascii=False)


def _value(value: Any) -> str:
    if isinstance(value, str):
        return _token(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def cut(text: str, budget: int) -> str:
    """`text` if it fits `budget`, else its start and a note like "... (+120 chars cut)"."""
    if sms_length(text) <= budget:
        return text
    keep = len(text)
    while keep > 0:
        candidate = f"{text[:keep]}... (+{len(text) - keep} chars cut)"
        if sms_length(candidate) <= budget:
            return candidate
        keep -= max(1, (sms_length(candidate) - budget) // 2)
    return f"(+{len(text)} chars cut)"


def preview_line(card: ApprovalCard) -> str:
    """An operation's preview on one line: its labelled fields, then its effects."""
    assert card.preview is not None
    fields = ", ".join(f"{f.label}: {f.value}" for f in card.preview.fields)
    effects = " ".join(e if e.endswith(".") else f"{e}." for e in card.preview.effects)
    return " ".join(part for part in (fields + "." if fields else "", effects) if part) or "(no details)"


def left_out(card: ApprovalCard, limit: int = VALUE_LIMIT) -> Hidden:
    """What the request text leaves out of the parameters: values masked in place or cut."""
    if card.preview is not None:
        return Hidden()
    call = card.asked()
    masked = hidden(fields(call), limit).masked
    cut = tuple(str(name) for name in sorted(call, key=str) if len(_value(call[name])) > limit)
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
    claim = " ".join((card.reason or "").translate(_PLAIN).split())
    if card.preview is not None:
        claim = " ".join(f"{compact_parameters(card.parameters)}. {claim}".translate(_PLAIN).split())

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
    listed = f"Changed: {', '.join(_token(str(n)) for n in names)}."
    olds = [_value(card.parameters[n]) if n in card.parameters else "(none)" for n in names]
    news = [_value(card.edited[n]) for n in names]
    if any(len(v) > VALUE_LIMITS[-1] for v in (*olds, *news)):
        return [listed]  # long values: the call above shows the new ones, MORE the rest
    pairs = ", ".join(f"{_token(str(n))} {o}->{v}" for n, o, v in zip(names, olds, news, strict=True))
    return [f"Changed: {pairs}.", listed]


@dataclass(frozen=True)
class MoreParts:
    """The answer to MORE, and how many characters of the call itself no part carries (0:
    the texts show the whole call, which can then be approved by text)."""

    texts: list[str]
    unshown: int


def _more_stream(card: ApprovalCard) -> tuple[str, str, str, int]:
    """What MORE texts: the call, then the claim after it; each part's label, and the room a
    part has for them."""
    what = card.preview.title if card.preview is not None else card.tool_name
    claim = " ".join((card.reason or "").translate(_PLAIN).split())
    if card.preview is not None:
        call = f"Preview: {preview_line(card)}"
        claim = " ".join(f"{compact_parameters(card.parameters)}. {claim}".translate(_PLAIN).split())
    else:
        call = f"Params: {compact_parameters(card.asked())}"
    after = f' {CLAIM_LABEL}"{claim}"' if claim else ""
    label = f"{card.short_code} {what} "
    return call, after, label, BUDGET - sms_length(f"{label}({MORE_PARTS}/{MORE_PARTS}): ")


# The longest note the last part can end with, for `unshown`'s shortcut.
_NOTE_MAX = len("... (+99,999,999 chars not texted: too long for SMS)")


def more_parts(card: ApprovalCard) -> MoreParts:
    """The answer to MORE: the whole call (redacted, never cut) in numbered parts.

    At most `MORE_PARTS` texts of `BUDGET` each; what still does not fit is named in the
    last. The call comes first (an operation's preview, then the agent's request as its
    claim), the agent's reason last: a reason too long to text leaves the call whole."""
    call, after, label, room = _more_stream(card)
    chunks: list[str] = []
    rest = call + after
    while rest and len(chunks) < MORE_PARTS:
        take = _fitting(rest, room)
        chunks.append(rest[:take])
        rest = rest[take:]
    if rest:
        # Sized for the most characters it can name, so the count is exact once it is added.
        note = f"... (+{len(rest) + room:,} chars not texted: too long for SMS)"
        keep = _fitting(chunks[-1], room - sms_length(note))
        rest = chunks[-1][keep:] + rest
        chunks[-1] = chunks[-1][:keep] + f"... (+{len(rest):,} chars not texted: too long for SMS)"
    texts = [f"{label}({i}/{len(chunks)}): {chunk}" for i, chunk in enumerate(chunks, 1)]
    return MoreParts(texts, max(len(rest) - len(after), 0))


def more_texts(card: ApprovalCard) -> list[str]:
    """The answer to MORE: the whole call in numbered parts (see `more_parts`)."""
    return more_parts(card).texts


def unshown(card: ApprovalCard) -> int:
    """How many characters of the call neither the request text nor MORE can text: above
    0, the call is not shown whole by text, so a YES cannot approve it."""
    call, _, _, room = _more_stream(card)
    # Each part holds at least room - 1 units (a character counts 2 at most), and the last
    # may give up a note's length: a call within that is whole without cutting the parts.
    if sms_length(call) <= MORE_PARTS * (room - 1) - _NOTE_MAX:
        return 0
    return more_parts(card).unshown


def not_texted_whole(card: ApprovalCard) -> str | None:
    """Why the texts cannot show this call whole (recorded with each text, and refusing a
    YES to it), or None when they can."""
    left = unshown(card)
    if not left:
        return None
    return (
        f"request {card.short_code} is too long to text whole ({left:,} characters of the call "
        f"do not fit in {MORE_PARTS} texts)"
    )


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


def _fitting(text: str, budget: int) -> int:
    """How many leading characters of `text` fit in `budget` septets (at least one)."""
    text = text[: max(budget, 1)]  # every character counts at least one: no more can fit
    if sms_length(text) <= budget:
        return len(text)
    low, high = 1, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if sms_length(text[:mid]) <= budget:
            low = mid
        else:
            high = mid - 1
    return low


def _clock(at: datetime, reference: datetime) -> str:
    at = at.astimezone(UTC) if at.tzinfo else at.replace(tzinfo=UTC)
    ref = reference.astimezone(UTC) if reference.tzinfo else reference.replace(tzinfo=UTC)
    if at.date() == ref.date():
        return at.strftime("%H:%M UTC")
    return at.strftime("%b %d %H:%M UTC")


def to_outcome_text(card: ApprovalCard) -> str:
    """The confirmation texted to each approver once an approval closed."""
    label = f"{card.preview.title if card.preview else card.tool_name} ({card.short_code})"
    outcome = card.outcome
    if card.status == ApprovalStatus.APPROVED:
        if card.result is not None:
            return f"Approved {label}: {cut(card.result.summary(), 200)}"
        return f"Approved {label}."
    if card.status == ApprovalStatus.DENIED:
        if outcome is not None and outcome.decider_kind == "system":
            why = f" ({outcome.decider})" if outcome.decider else ""
            return f"Denied {label} by Cosigner{why}. Nothing was done."
        return f"Denied {label}. Nothing was done."
    if card.status == ApprovalStatus.EXPIRED:
        return f"Expired {label}: nobody answered in time, nothing was done."
    if card.status == ApprovalStatus.CANCELLED:
        return f"Cancelled {label} by the agent, nothing was done."
    return f"Request {label} is still pending."


def counted_text(card: ApprovalCard) -> str:
    """The reply to a YES that counted toward a quorum still short: `1 of 2 approvals`."""
    label = f"{card.preview.title if card.preview else card.tool_name} ({card.short_code})"
    more = card.quorum - len(card.approvals)
    return (
        f"You approved {label}: {card.progress()} approvals. Nothing runs until "
        f"{more} more approver{'s' if more != 1 else ''} say{'s' if more == 1 else ''} YES."
    )


HANDOFF_HELP = "Reply DONE once you have done the step, or NO to cancel. Nothing was decided."


def help_text(codes: Sequence[str] = (), *, handoffs: Sequence[str] = ()) -> str:
    """The reply to anything that is not an exact answer; names the codes when several wait.

    `handoffs` are the codes among them that are handed-off steps (answered DONE or NO)."""
    if len(codes) > 1:
        listed = ", ".join(codes)
        done = f", DONE or NO for a handed-off step ({', '.join(handoffs)})," if handoffs else ""
        return (
            f"Several requests are pending ({listed}): reply YES, NO or NEVER (always deny){done} "
            f"followed by the code, e.g. YES {codes[0]}. Nothing was decided."
        )
    if handoffs:
        return HANDOFF_HELP
    return HELP


def standing_text(card: ApprovalCard) -> str:
    """The reply to NEVER once it was applied: what is refused from now on, and how to undo it."""
    return (
        f"Always deny set: {card.tool_name} requests you approve are refused from now on, "
        "without a text. To lift it, ask your team's admin (Cosigner lists it under denials)."
    )


def unknown_code_text(code: str, codes: Sequence[str]) -> str:
    """The reply to an answer whose code matches no pending request."""
    listed = ", ".join(codes) if codes else "none"
    return f"No pending request has code {code} (pending: {listed}). Nothing was decided."


def closed_text(card: ApprovalCard) -> str:
    """The reply to an answer that arrives after its request closed."""
    if card.status == ApprovalStatus.EXPIRED:
        return f"Request {card.short_code} expired, nothing was done."
    if card.status == ApprovalStatus.CANCELLED:
        return f"Request {card.short_code} was cancelled, nothing was done."
    return f"Request {card.short_code} is already {card.status.value}. Nothing changed."


def edited_text(card: ApprovalCard) -> str:
    """The reply to an answer to a call an approver edited after it was texted: the call
    texted is not the one asked now, so the answer is not counted; the edited call is texted
    to the same number (`SmsAdapter.retext`), and an answer to that text counts."""
    return (
        f"Not accepted: request {card.short_code} was edited by an approver after it was texted "
        "to you, so your answer was not counted. The edited call has been texted to you (or will "
        "be in a moment): answer that text. Nothing was decided."
    )


def refusal_text(message: str) -> str:
    """The reply when the engine refuses an answer; the message says why."""
    message = cut(message.strip(), 100)
    if not message.endswith((".", "!", "?", ")")):
        message += "."
    return f"Not accepted: {message} Nothing was decided."

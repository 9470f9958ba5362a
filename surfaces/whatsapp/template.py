"""What a WhatsApp approval request carries: the template's variables and its buttons' payloads.

The operator creates one `twilio/quick-reply` template (docs/whatsapp.md) whose body holds
`{{1}}`, the same text an SMS approver gets, and whose two buttons' ids are `{{2}}` and
`{{3}}`. A tap sends that id back as `ButtonPayload`: it names the approval, the answer and
a nonce made for that approver, so a tap counts only from the number the request was sent
to, on the request it was sent with (a forwarded copy, or a payload made up, decides
nothing). A second tap on a decided request is refused as already decided.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from contracts.enums import Verdict
from contracts.ports import ApprovalCard

PREFIX = "cosigner"
# A button's id is at most 200 characters (Content API); ours stay far below it.
_PAYLOAD = re.compile(r"^cosigner:(approve|deny):([A-Za-z0-9_\-]{1,80}):([A-Za-z0-9_\-]{16,64})$")
_VERDICTS = {"approve": Verdict.APPROVE, "deny": Verdict.DENY}
# What the template's body says around `{{1}}` (WhatsApp refuses a body that starts or ends
# with a variable), shown in docs/whatsapp.md and used by `cosigner dev`'s emulator.
# `{{1}}` already ends by saying how to reply (YES or NO, with the code when one is needed),
# so the body around it names only the buttons.
TEMPLATE_BODY = "Cosigner approval request.\n\n{{1}}\n\nOr tap a button below."
TEMPLATE_ACTIONS = [("Approve", "{{2}}"), ("Deny", "{{3}}")]


@dataclass(frozen=True)
class Tap:
    """A quick-reply tap as its payload says: which approval, which answer, which nonce."""

    approval_id: str
    verdict: Verdict
    nonce: str


def new_nonce() -> str:
    """A fresh one-time nonce for one approver of one request (128 bits, URL-safe)."""
    return secrets.token_urlsafe(16)


def nonce_key(number: str) -> str:
    """Where the nonce of approver `number` is kept in the delivery receipt's `extra`."""
    return f"nonce:{number}"


def payload(verdict: Verdict, approval_id: str, nonce: str) -> str:
    """A button's id: `cosigner:<approve|deny>:<approval id>:<nonce>`."""
    word = {v: k for k, v in _VERDICTS.items()}[verdict]
    return f"{PREFIX}:{word}:{approval_id}:{nonce}"


def parse_tap(button_payload: str) -> Tap | None:
    """The tap a `ButtonPayload` names, or None for anything not shaped like ours."""
    match = _PAYLOAD.match(button_payload.strip())
    if match is None:
        return None
    word, approval_id, nonce = match.groups()
    return Tap(approval_id=approval_id, verdict=_VERDICTS[word], nonce=nonce)


def content_variables(card: ApprovalCard, text: str, nonce: str) -> dict[str, str]:
    """The template's variables for one approver: the SMS text and the two buttons' payloads."""
    return {
        "1": text,
        "2": payload(Verdict.APPROVE, card.approval_id, nonce),
        "3": payload(Verdict.DENY, card.approval_id, nonce),
    }

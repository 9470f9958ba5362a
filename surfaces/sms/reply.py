"""Reading an inbound text: an exact answer, or one of Twilio's opt-out/opt-in/help words.

Only an exact `YES`, `NO`, `NEVER` or (for a handoff) `DONE` decides anything (case and
surrounding whitespace ignored), optionally followed by whitespace and the request's short
code. `NEVER` is Always deny: it denies the request and refuses the tool from then on for
requests this person approves. "yes please", "Y", "ok",
"👍" and "YES!" are not answers: a person who means something else must not approve by
accident. An exact `MORE` [code] asks for the whole call in parts and decides nothing.
`ALLOW 1H` (or `ALLOW 15M`, `ALLOW 8H`) [code] approves and allows calls like it for that
long, where the policy offers it; it follows YES's code rule.

A bare `YES` (or `NEVER`) is bound to the only request pending for the number, but not
when another request was texted to that number within `BARE_WINDOW` or after that
request's latest text: the code is then asked for (`needs_code`). A bare `NO` still denies.

A bare `YES` is also one of Twilio's opt-in words. We treat it as an answer; if the number
had opted out, Twilio re-subscribes it at the same time, so the caller also clears its own
opt-out flag. On long codes Twilio may send its own "re-subscribed" reply to that YES
(see docs/sms.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from contracts.allowances import Choice, choice_named
from contracts.enums import Verdict

# A bare answer binds to the one request pending for the number, unless another request was
# texted to that number this recently (or since that request's text): the person may be
# answering the other one (cancelled, or decided elsewhere), so the code is asked for.
BARE_WINDOW = 120.0  # seconds

OPT_OUT_WORDS = frozenset({"STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT", "REVOKE", "OPTOUT"})
OPT_IN_WORDS = frozenset({"START", "UNSTOP", "YES"})
HELP_WORDS = frozenset({"HELP", "INFO"})

# re.ASCII: without it IGNORECASE lets "yeſ" (long s) and the Kelvin sign pass for
# letters, and \s / \d accept exotic spaces and digits a person never typed on purpose.
_ANSWER = re.compile(
    r"[ \t\r\n]*(YES|NO|NEVER|DONE|ALLOW[ \t]+([0-9]{1,2}[MH]))(?:[ \t]+([0-9]{1,8}))?[ \t\r\n]*",
    re.IGNORECASE | re.ASCII,
)
_ASCII_SPACE = " \t\r\n"
# NO is also how a handoff is cancelled (the webhook reads it so for a handoff): CANCEL is
# a Twilio opt-out word and must never be asked for.
_VERDICTS = {"YES": Verdict.APPROVE, "NO": Verdict.DENY, "NEVER": Verdict.ALWAYS_DENY, "DONE": Verdict.DONE}


# MORE asks for the whole call; it decides nothing, and follows the same code rule.
_MORE = re.compile(r"[ \t\r\n]*MORE(?:[ \t]+([0-9]{1,8}))?[ \t\r\n]*", re.IGNORECASE | re.ASCII)


@dataclass(frozen=True)
class More:
    """A request to text the whole call, with the short code if typed."""

    code: str | None = None


def parse_more(body: str) -> More | None:
    """`More` for an exact `MORE` [code] (case and surrounding whitespace ignored), else None."""
    match = _MORE.fullmatch(body)
    return None if match is None else More(code=match.group(1))


@dataclass(frozen=True)
class Reply:
    """An exact answer (approve, deny, always deny, or a handoff's done) and the short code if typed."""

    verdict: Verdict
    code: str | None = None
    allow_for: Choice | None = None  # ALLOW 1H: the length asked for

    @property
    def word(self) -> str:
        """The answer as the person typed it, without the code (`YES`, `ALLOW 1H`)."""
        if self.allow_for is not None:
            return f"ALLOW {self.allow_for.name.upper()}"
        return WORDS[self.verdict]


def needs_code(reply: Reply) -> bool:
    """True for a bare answer that must name its code when another request was texted
    lately: YES (it would approve) and NEVER (it would refuse a tool from then on). NO only
    denies, and DONE is checked with the application before it counts."""
    return reply.code is None and reply.verdict in BARE_REFUSED


BARE_REFUSED = frozenset({Verdict.APPROVE, Verdict.ALWAYS_DENY, Verdict.ALLOW_FOR})


WORDS = {verdict: word for word, verdict in _VERDICTS.items()}


def parse_reply(body: str) -> Reply | None:
    """The answer in `body`, or None if it is anything but an exact `YES`/`NO`/`NEVER`/`DONE` [code]."""
    match = _ANSWER.fullmatch(body)
    if match is None:
        return None
    if match.group(2) is not None:
        choice = choice_named(match.group(2))  # ALLOW 2H is no answer: help, nothing decided
        return None if choice is None else Reply(Verdict.ALLOW_FOR, match.group(3), choice)
    verdict = _VERDICTS[match.group(1).upper()]
    return Reply(verdict=verdict, code=match.group(3))


def keyword(body: str) -> str:
    """`body` trimmed of ASCII whitespace and upper-cased, as Twilio matches its keywords."""
    word = body.strip(_ASCII_SPACE)
    # "ſtop".upper() == "STOP": only plain ASCII may count as a keyword.
    return word.upper() if word.isascii() else ""


def is_opt_out(body: str) -> bool:
    """True for Twilio's opt-out words (STOP, UNSUBSCRIBE, …): Twilio stops texting the number."""
    return keyword(body) in OPT_OUT_WORDS


def is_opt_in(body: str) -> bool:
    """True for Twilio's opt-in words (START, UNSTOP, and a bare YES)."""
    return keyword(body) in OPT_IN_WORDS


def is_help(body: str) -> bool:
    """True for Twilio's help words (HELP, INFO); Twilio answers them itself."""
    return keyword(body) in HELP_WORDS

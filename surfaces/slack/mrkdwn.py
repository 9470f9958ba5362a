"""Safe mrkdwn: escaping untrusted text, fencing code, truncating, and Slack date tokens.

Slack parses `<…>` in mrkdwn as mentions (`<!channel>`, `<@U1>`, `<!subteam^S1>`) and links
(`<http://x|label>`), and `&…;` as entities. Escaping `&`, `<` and `>` (and nothing else)
neutralises all of them; everything here works on already-escaped text so that a cut can
never split an entity and resurrect a `<` or `&`.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_LONGEST_ENTITY = max(len(e) for e in ENTITIES.values())
_USER_ID = re.compile(r"^[UW][A-Z0-9]{1,40}$")


def escape(text: str) -> str:
    """Escape `&`, `<` and `>` for mrkdwn; `&` first so entities are not escaped twice."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def unescape(text: str) -> str:
    """Undo `escape` exactly (only the three entities it produces)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def break_fences(text: str) -> str:
    """Put a zero-width space between consecutive backticks so data cannot close a ``` fence."""
    return re.sub(r"`(?=`)", "`\u200b", text)


def safe_cut(escaped: str, limit: int) -> int:
    """Index at which to cut `escaped` to at most `limit` chars without splitting an entity."""
    if len(escaped) <= limit:
        return len(escaped)
    cut = max(limit, 0)
    amp = escaped.rfind("&", max(cut - _LONGEST_ENTITY + 1, 0), cut)
    if amp != -1 and escaped.find(";", amp, cut) == -1:
        cut = amp
    return cut


def truncate(escaped: str, limit: int) -> tuple[str, int]:
    """Cut escaped text to `limit` chars at a safe point; also count the original chars cut."""
    cut = safe_cut(escaped, limit)
    dropped = escaped[cut:].replace("\u200b", "")
    return escaped[:cut], len(unescape(dropped))


def cut_note(dropped: int) -> str:
    """The note shown after truncated text."""
    return f"_… {dropped:,} more character{'s' if dropped != 1 else ''} not shown_"


def fit(text: str, limit: int) -> str:
    """Escape untrusted text and fit it into `limit` chars, noting what was cut."""
    escaped = escape(text)
    if len(escaped) <= limit:
        return escaped
    reserve = len(cut_note(len(text))) + 1
    kept, dropped = truncate(escaped, limit - reserve)
    return f"{kept}\n{cut_note(dropped)}"


def fenced(text: str, limit: int) -> str:
    """Escape untrusted text into a ``` code block of at most `limit` chars, noting any cut."""
    body = break_fences(escape(text))
    frame = len("```\n\n```")
    if len(body) + frame <= limit:
        return f"```\n{body}\n```"
    reserve = frame + len(cut_note(len(text))) + 1
    kept, dropped = truncate(body, limit - reserve)
    return f"```\n{kept}\n```\n{cut_note(dropped)}"


def mention(user_id: str | None) -> str | None:
    """A `<@U…>` mention, only for a well-formed Slack user id (never built from free text)."""
    if user_id is not None and _USER_ID.match(user_id):
        return f"<@{user_id}>"
    return None


def utc(moment: datetime) -> str:
    """A moment as `YYYY-MM-DD HH:MM UTC`; naive datetimes are taken to be UTC."""
    return _aware(moment).astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def date_token(moment: datetime) -> str:
    """A Slack date token shown in the reader's timezone, with a UTC fallback."""
    epoch = int(_aware(moment).timestamp())
    return f"<!date^{epoch}^{{date_short_pretty}} {{time}}|{utc(moment)}>"


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)

"""Structured logs: one JSON object a line on stderr, for Cosigner and every library.

Parameters, message bodies and request bodies are never logged; a field that is not on
the allow-list is dropped even if a caller passes it. An exception becomes fields of its
line (type, text without the input that caused it, frame locations), never a multi-line
traceback. SQL parameters never reach the text: the database engines are created with
`hide_parameters=True`.

`cosigner dev` uses the readable form instead: one line per approval created, answer and
decision (an `Activity` the engine attaches, `bot/observability/activity.py`), and warnings, for a
person watching the console.
"""

from __future__ import annotations

import json
import logging
import sys
import time
import traceback
from types import TracebackType

from pydantic import ValidationError

ALLOWED = (
    "approval_id",
    "tenant",
    "tool",
    "status",
    "job",
    "surface",
    "surfaces",
    "database",
    "sqlite_synchronous",
    "code",
    "route",
    "method",
    "http_status",
    "port",
    "url",
    "shadow_from",
    "shadow_to",
    "shadow_rule",
    "shadow_loosens",
)
# Other libraries log at INFO and DEBUG what Cosigner must not (httpx: every URL it calls;
# Twilio: request bodies; SQLAlchemy: statements with their values).
LIBRARY_LEVEL = logging.WARNING


def _text(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        # pydantic's own text quotes the input, which may be a request's parameters.
        return "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}"
            for e in exc.errors(include_input=False, include_url=False)
        )
    return str(exc)


def _frames(tb: TracebackType | None) -> list[str]:
    # Where it happened, not the source lines or local values.
    return [f"{f.filename}:{f.lineno} in {f.name}" for f in traceback.extract_tb(tb)]


class JsonFormatter(logging.Formatter):
    """Render a record as JSON with the allow-listed extras and any exception as fields."""

    def format(self, record: logging.LogRecord) -> str:
        """One line of JSON."""
        out = {
            "ts": round(time.time(), 3),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage().strip(),
        }
        for key in ALLOWED:
            if key in record.__dict__:
                out[key] = record.__dict__[key]
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            out["error"] = type(exc).__name__
            out["error_text"] = _text(exc)
            out["traceback"] = _frames(exc.__traceback__)
        return json.dumps(out, default=str)


class ReadableFormatter(logging.Formatter):
    """Render a record as one line for a person: the time, then the approval's activity, or
    the level, logger and message (an exception by its type and text only)."""

    def format(self, record: logging.LogRecord) -> str:
        """One line of text."""
        when = time.strftime("%H:%M:%S", time.localtime(record.created))
        moment = record.__dict__.get("activity")
        if moment is not None:
            return f"{when}  {moment.line()}"
        text = f"{when}  {record.levelname.lower()} {record.name}: {record.getMessage().strip()}"
        if record.exc_info and record.exc_info[1] is not None:
            text += f" ({type(record.exc_info[1]).__name__}: {_text(record.exc_info[1])})"
        return text


def _shown_in_console(record: logging.LogRecord) -> bool:
    # The approvals' activity (logged at DEBUG and INFO) and warnings; not the rest of INFO.
    return record.levelno >= logging.WARNING or "activity" in record.__dict__


def configure(level: str = "INFO", *, readable: bool = False) -> None:
    """Send every log line (Cosigner, uvicorn, asyncio, warnings) to stderr as JSON, or
    with `readable` (`cosigner dev`) the approvals' activity and warnings as text lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(ReadableFormatter() if readable else JsonFormatter())
    if readable:
        handler.addFilter(_shown_in_console)
        level = "DEBUG"
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(LIBRARY_LEVEL)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "asyncio", "py.warnings"):
        library = logging.getLogger(name)
        library.handlers[:] = []
        library.propagate = True
    ours = logging.getLogger("cosigner")
    ours.handlers[:] = []
    ours.propagate = True
    ours.setLevel(level.upper())
    logging.captureWarnings(True)

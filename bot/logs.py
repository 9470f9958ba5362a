"""Structured logs: one JSON object a line, carrying allow-listed fields only.

Parameters, message bodies and request bodies are never logged; a field that is not on
the allow-list is dropped even if a caller passes it.
"""

from __future__ import annotations

import json
import logging
import sys
import time

ALLOWED = (
    "approval_id",
    "tenant",
    "tool",
    "status",
    "job",
    "surface",
    "code",
    "route",
    "method",
    "http_status",
    "port",
    "url",
)


class JsonFormatter(logging.Formatter):
    """Render a record as JSON with the allow-listed extras."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": round(time.time(), 3),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in ALLOWED:
            if key in record.__dict__:
                out[key] = record.__dict__[key]
        if record.exc_info and record.exc_info[0] is not None:
            out["error"] = record.exc_info[0].__name__
        return json.dumps(out, default=str)


def configure(level: str = "INFO") -> None:
    """Send Cosigner's logs to stderr as JSON lines."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger("cosigner")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False

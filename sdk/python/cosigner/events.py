"""Server-sent events of `GET /v1/approvals/{id}/events`, parsed into decisions."""

from __future__ import annotations

from dataclasses import dataclass

from cosigner.decision import Decision, parse_approval

__all__ = ["DECIDED", "ApprovalEvent", "EventParser"]

DECIDED = "approval_decided"  # the last event of a stream


@dataclass(frozen=True)
class ApprovalEvent:
    """One event: `approval_start` (pending) or `approval_decided`, with the approval it carries."""

    event: str
    decision: Decision


class EventParser:
    """Turns `text/event-stream` lines into ApprovalEvents (comments and keep-alives skipped)."""

    def __init__(self) -> None:
        self._event = "message"
        self._data: list[str] = []

    def feed(self, line: str) -> ApprovalEvent | None:
        """Take one line; return the event a blank line completes, else None."""
        if not line:
            if not self._data:
                return None
            event = ApprovalEvent(self._event, parse_approval("\n".join(self._data)))
            self._event, self._data = "message", []
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None

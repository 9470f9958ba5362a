"""The server's name for the typed audit events, defined once in the agent SDK
(`cosigner.audit_events`): one pydantic model per kind, which storage writes and reads and
every reader (the export, the timeline, policy replay, the SDK) takes."""

from __future__ import annotations

# Every public name, so a name added there is importable here without an edit.
from cosigner.audit_events import *  # noqa: F403

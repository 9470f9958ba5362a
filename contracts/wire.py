"""The server's name for the request models of the agent API, defined in `cosigner.wire`."""

from __future__ import annotations

# Every public name, so a name added there is importable here without an edit.
from cosigner.wire import *  # noqa: F403

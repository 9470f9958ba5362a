"""The server's name for the answer models of the agent API, defined in `cosigner.answers`."""

from __future__ import annotations

# Every public name, so a name added there is importable here without an edit.
from cosigner.answers import *  # noqa: F403

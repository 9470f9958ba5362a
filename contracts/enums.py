"""The server's name for the closed sets, defined once in the agent SDK (`cosigner.enums`)."""

from __future__ import annotations

# Every public name, so a name added there is importable here without an edit.
from cosigner.enums import *  # noqa: F403

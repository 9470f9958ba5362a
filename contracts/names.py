"""The server's name for the names the API and the policy agree on, defined in `cosigner.names`."""

from __future__ import annotations

# Every public name, so a name added there is importable here without an edit.
from cosigner.names import *  # noqa: F403

"""The server's name for the operation-contract wire models, defined in `cosigner.operations`."""

from __future__ import annotations

# Every public name, so a name added there is importable here without an edit.
from cosigner.operations import *  # noqa: F403

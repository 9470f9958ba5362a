"""The server's name for the hook models of Claude Code's `http` hook, defined in `cosigner.hooks.wire`."""

from __future__ import annotations

# Every public name, so a name added there is importable here without an edit.
from cosigner.hooks.wire import *  # noqa: F403

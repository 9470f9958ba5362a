"""The CLI's own error: a command was used wrongly."""

from __future__ import annotations


class UsageError(Exception):
    """A command was given something it cannot use; the message names the fix."""

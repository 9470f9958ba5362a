"""The Slack surface: approval cards in Block Kit, verified clicks and OAuth installs.

The emulator (`surfaces.slack.emulator`) is for `cosigner dev` and tests; it is not imported here.
"""

from surfaces.slack.adapter import SlackAdapter, SlackConfig

__all__ = ["SlackAdapter", "SlackConfig"]

"""The Slack surface: approval cards in Block Kit, verified clicks, installs, and an emulator."""

from surfaces.slack.adapter import SlackAdapter, SlackConfig
from surfaces.slack.emulator import SlackEmulator

__all__ = ["SlackAdapter", "SlackConfig", "SlackEmulator"]

"""The `cosigner` command (`main`): serve, dev, migrate, tenants, policy, audit, denials, inbox,
doctor, backup."""

from bot.cli.commands import main

__all__ = ["main"]

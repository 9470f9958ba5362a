"""Whoever is on call: PagerDuty and Opsgenie rotations as approvers (docs/oncall.md)."""

from typing import TYPE_CHECKING

from bot import lazy_exports

if TYPE_CHECKING:
    from bot.oncall.directory import Asked, Fallback, Found, OnCall
    from bot.oncall.providers import OnCallPerson, Opsgenie, PagerDuty, Unreachable, provider_for

__all__ = [
    "Asked",
    "Fallback",
    "Found",
    "OnCall",
    "OnCallPerson",
    "Opsgenie",
    "PagerDuty",
    "Unreachable",
    "provider_for",
]
__getattr__ = lazy_exports(
    __name__,
    __all__,
    {
        "bot.oncall.directory": ["Asked", "Fallback", "Found", "OnCall"],
        "bot.oncall.providers": ["OnCallPerson", "Opsgenie", "PagerDuty", "Unreachable", "provider_for"],
    },
)

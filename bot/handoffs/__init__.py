"""Handoffs: Done claimed once, then checked against the application's `expect` URL."""

from typing import TYPE_CHECKING

from bot import lazy_exports

if TYPE_CHECKING:
    from bot.handoffs.lifecycle import Handoffs

__all__ = ["Handoffs"]
__getattr__ = lazy_exports(
    __name__,
    __all__,
    {
        "bot.handoffs.lifecycle": ["Handoffs"],
    },
)

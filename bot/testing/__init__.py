"""Test support that runs inside a real server: the stepped clock. Never on in production."""

from typing import TYPE_CHECKING

from bot import lazy_exports

if TYPE_CHECKING:
    from bot.testing.stepped_clock import SteppedClock, is_loopback

__all__ = ["SteppedClock", "is_loopback"]
__getattr__ = lazy_exports(
    __name__,
    __all__,
    {
        "bot.testing.stepped_clock": ["SteppedClock", "is_loopback"],
    },
)

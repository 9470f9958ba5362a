"""`cosigner dev`: the sandbox (emulated Slack, Twilio and Teams), its page and its sample policy.
Never loaded by the serving path (an import-linter contract says so).
"""

from typing import TYPE_CHECKING

from bot import lazy_exports

if TYPE_CHECKING:
    from bot.dev.sandbox import run_dev

__all__ = ["run_dev"]
__getattr__ = lazy_exports(
    __name__,
    __all__,
    {
        "bot.dev.sandbox": ["run_dev"],
    },
)

"""Egress: where outbound requests may go (URL and address checks) and the pinned client they
leave through.
"""

from typing import TYPE_CHECKING

from bot import lazy_exports

if TYPE_CHECKING:
    from bot.egress.transport import Egress, EgressFailed, Reply, Unreached, callback_client
    from bot.egress.urls import LOOPBACK_ALLOW, AllowList, EgressRefused, check_url, parse_allow_list

__all__ = [
    "LOOPBACK_ALLOW",
    "AllowList",
    "Egress",
    "EgressFailed",
    "EgressRefused",
    "Reply",
    "Unreached",
    "callback_client",
    "check_url",
    "parse_allow_list",
]
__getattr__ = lazy_exports(
    __name__,
    __all__,
    {
        "bot.egress.transport": ["Reply", "Egress", "EgressFailed", "Unreached", "callback_client"],
        "bot.egress.urls": ["LOOPBACK_ALLOW", "AllowList", "EgressRefused", "check_url", "parse_allow_list"],
    },
)

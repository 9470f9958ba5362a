"""Web Push's server side: the VAPID key kept sealed, the subscriptions, and the adapter's wiring.

keys.py  the VAPID key pair: made at first use or by `cosigner vapid`, sealed under COSIGNER_SECRET
book.py  the subscriptions a push goes to (`contracts.reach.PushBook`) over the database
post.py  one POST to a push service through the checked, pinned egress client
wiring.py  the push adapter's factory for `build_app`, on whenever the inbox's sign-in is
"""

from typing import TYPE_CHECKING

from bot import lazy_exports

if TYPE_CHECKING:
    from bot.push.keys import public_key, vapid_pem
    from bot.push.wiring import contact_of, push_surface

__all__ = ["contact_of", "public_key", "push_surface", "vapid_pem"]
__getattr__ = lazy_exports(
    __name__,
    __all__,
    {
        "bot.push.keys": ["public_key", "vapid_pem"],
        "bot.push.wiring": ["contact_of", "push_surface"],
    },
)

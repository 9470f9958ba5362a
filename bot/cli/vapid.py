"""`cosigner vapid [--new]`: the Web Push key pair (VAPID) browsers subscribe to.

Prints the public key (the Push API's `applicationServerKey`), making the pair first if
there is none; the private key is kept sealed in the database under COSIGNER_SECRET and is
never printed. `--new` replaces the pair and removes every subscription, since browsers
subscribed to the old public key (people press "Notify me on this device" again).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.cli.inbox import WithDb
    from storage.database import Database


def register(sub: Any, with_db: WithDb) -> None:
    """Add the `vapid` command to the CLI's subparsers."""

    def vapid(args: argparse.Namespace) -> int:
        from bot.push import public_key, vapid_pem
        from storage.sealing import TokenSeal

        async def go(db: Database, settings: Any) -> bytes:
            return await vapid_pem(db, TokenSeal(settings.secret or ""), time.time(), new=args.new)

        pem: bytes = asyncio.run(with_db(go))
        print(public_key(pem))
        if args.new:
            print("a new key pair: every subscription was removed; each person turns notifications on again")
        return 0

    v = sub.add_parser("vapid", help="print the Web Push public key, making the key pair at first use")
    v.add_argument("--new", action="store_true", help="replace the key pair (removes every subscription)")
    v.set_defaults(fn=vapid)

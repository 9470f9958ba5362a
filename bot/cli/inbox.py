"""`cosigner inbox sign-out PERSON`: end every inbox session of a person at once, on every
replica (each request reads its session from the database), e.g. when they leave or a
laptop is lost."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from storage.database import Database

    WithDb = Callable[[Callable[[Database, Any], Awaitable[Any]]], Coroutine[Any, Any, Any]]


async def sign_out(db: Database, person: str) -> int:
    """End every inbox session whose person holds the id `person`; how many there were."""
    from bot.inbox.session import end_every

    return await end_every(db, person)


def register(sub: Any, with_db: WithDb, usage_error: type[Exception]) -> None:
    """Add the `inbox` command group to the CLI's subparsers."""

    def signed_out(args: argparse.Namespace) -> int:
        person = args.person.strip()
        if not person:
            raise usage_error(
                "name the person: the Slack user id (U…), verified email or phone number they sign in with"
            )

        async def go(db: Database, settings: Any) -> int:
            return await sign_out(db, person)

        ended: int = asyncio.run(with_db(go))
        if ended:
            print(f"ended {ended} inbox session{'s' if ended > 1 else ''} of {person}")
        else:
            print(f"no inbox session of {person} was open")
        return 0

    group = sub.add_parser("inbox", help="the approvers' inbox")
    actions = group.add_subparsers(dest="action", required=True)
    so = actions.add_parser("sign-out", help="end every inbox session of a person, in every browser")
    so.add_argument(
        "person",
        help="any id the person signed in with: Slack user id (U…), verified email, or phone number",
    )
    so.set_defaults(fn=signed_out)

"""`cosigner tenants`: create tenants, issue, revoke and rotate their keys, print their secrets."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING, Any

from bot.cli.database import with_db
from bot.cli.errors import UsageError
from contracts.enums import KeyScope

if TYPE_CHECKING:
    from bot.http import IssuedKey, NewTenant
    from bot.settings import Settings
    from storage.database import Database


def _key_line(k: IssuedKey) -> str:
    what = {KeyScope.AGENT: "for the agent", KeyScope.APPROVER: "for the approval app; decides"}[k.scope]
    return f"{k.scope.value} key ({what}; id {k.key_id}): {k.key}"


def tenants_create(args: argparse.Namespace) -> int:
    """Create a tenant and print its agent key and approver key once."""
    from bot.approvals import callback_secret
    from bot.http import TenantKeys
    from bot.settings import load_settings

    async def go(db: Database, settings: Settings) -> NewTenant:
        return await TenantKeys(db).create(args.name)

    made: NewTenant = asyncio.run(with_db(go, create=True))
    settings = load_settings()
    print(f"tenant {args.name} created. Each key is shown once; only its hash is stored.")
    print(_key_line(made.agent))
    print(_key_line(made.approver))
    if settings.secret:
        print(f"callback signing secret: {callback_secret(settings.secret, args.name)}")
    else:
        print(
            "note: COSIGNER_SECRET is not set, so the callback signing secret is not shown; "
            f"set it and run `cosigner tenants secret {args.name}`",
            file=sys.stderr,
        )
    return 0


def tenants_key_create(args: argparse.Namespace) -> int:
    """Add a key of one scope to a tenant and print it once."""
    from bot.http import TenantKeys

    async def go(db: Database, settings: Settings) -> IssuedKey:
        return await TenantKeys(db).add_key(args.tenant, KeyScope(args.scope))

    made: IssuedKey = asyncio.run(with_db(go))
    print(f"new {_key_line(made)}")
    print("(shown once; only its hash is stored)")
    return 0


def tenants_key_revoke(args: argparse.Namespace) -> int:
    """Remove one of a tenant's keys by its id."""
    from bot.http import TenantKeys

    async def go(db: Database, settings: Settings) -> bool:
        await TenantKeys(db).revoke(args.tenant, args.key_id)
        return db.is_sqlite

    sqlite = asyncio.run(with_db(go))
    print(f"revoked {args.key_id} of {args.tenant}: {_refused_when(sqlite)}")
    return 0


def _refused_when(sqlite: bool) -> str:
    # PostgreSQL tells every running server at commit; a server on SQLite only notices as
    # the key it checked runs out of its cache.
    if sqlite:
        return "refused by a running server within 30 s (SQLite: it re-reads keys every 30 s)"
    return "refused by every running server from its next request (PostgreSQL tells each at once)"


def tenants_secret(args: argparse.Namespace) -> int:
    """Print a tenant's callback signing secret (derived from COSIGNER_SECRET)."""
    from bot.approvals import callback_secret
    from bot.http import TenantKeys
    from bot.settings import load_settings

    settings = load_settings()
    if not settings.secret:
        print("error: set COSIGNER_SECRET (the server's value) to derive callback secrets", file=sys.stderr)
        return 2

    async def go(db: Database, settings: Settings) -> list[str]:
        return await TenantKeys(db).names()

    if args.name not in asyncio.run(with_db(go)):
        raise UsageError(f"no tenant {args.name!r}; create it with `cosigner tenants create`")
    print(callback_secret(settings.secret, args.name))
    return 0


def tenants_rotate(args: argparse.Namespace) -> int:
    """Give a tenant a new agent key, revoking its other agent keys."""
    from bot.http import TenantKeys

    async def go(db: Database, settings: Settings) -> tuple[str, bool]:
        return await TenantKeys(db).rotate(args.name), db.is_sqlite

    key, sqlite = asyncio.run(with_db(go))
    print(f"new agent key for {args.name} (shown once): {key}")
    print(f"the old agent keys are {_refused_when(sqlite)}")
    return 0


def tenants_list(args: argparse.Namespace) -> int:
    """List tenant names."""
    from bot.http import TenantKeys

    async def go(db: Database, settings: Settings) -> list[str]:
        return await TenantKeys(db).names()

    for name in asyncio.run(with_db(go)):
        print(name)
    return 0


def register(sub: Any) -> None:
    """Add the commands to the CLI's subcommands."""
    t = sub.add_parser("tenants", help="manage tenants").add_subparsers(dest="action", required=True)
    tc = t.add_parser("create", help="create a tenant; prints its agent and approver keys once")
    tc.add_argument("name")
    tc.set_defaults(fn=tenants_create)
    k = t.add_parser("key", help="add or revoke a tenant's API keys").add_subparsers(
        dest="key_action", required=True
    )
    kc = k.add_parser("create", help="add a key of one scope; prints it once with its id")
    kc.add_argument("tenant")
    kc.add_argument("--scope", required=True, choices=[s.value for s in KeyScope])
    kc.set_defaults(fn=tenants_key_create)
    kr = k.add_parser("revoke", help="remove a key by its id (key_…)")
    kr.add_argument("tenant")
    kr.add_argument("key_id")
    kr.set_defaults(fn=tenants_key_revoke)
    tr = t.add_parser("rotate", help="replace a tenant's agent keys with one new agent key")
    tr.add_argument("name")
    tr.set_defaults(fn=tenants_rotate)
    t.add_parser("list", help="list tenants").set_defaults(fn=tenants_list)
    ts = t.add_parser("secret", help="print a tenant's callback signing secret")
    ts.add_argument("name")
    ts.set_defaults(fn=tenants_secret)

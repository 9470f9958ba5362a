"""`cosigner allowances list [--tenant T]` and `cosigner allowances revoke ID`: the operator's
view of the standing allows (Allow for …) approvers gave, and the way to revoke one."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from storage.allowances import StandingAllow
    from storage.database import Database

    WithDb = Callable[[Callable[[Database, Any], Awaitable[Any]]], Coroutine[Any, Any, Any]]


def line(a: StandingAllow) -> str:
    """One standing allow on one line: id, tenant, tool, who gave it, whose calls, until when, uses."""
    from storage.record_columns import iso

    return (
        f"{a.id}  {a.scope.tenant}  {a.scope.tool_name}  granted by {a.surface.value}:{a.granted_by}  "
        f"for calls of {a.scope.requester}  until {iso(a.expires_at)}  used {a.uses}/{a.max_uses}  "
        f"on {a.approval_id}"
    )


def register(sub: Any, with_db: WithDb, usage_error: type[Exception]) -> None:
    """Add the `allowances` command group to the CLI's subparsers."""

    def listed(args: argparse.Namespace) -> int:
        from bot.approvals import Allowances
        from bot.http import TenantKeys

        async def go(db: Database, settings: Any) -> list[StandingAllow]:
            if args.tenant is not None and args.tenant not in await TenantKeys(db).names():
                raise usage_error(f"no tenant {args.tenant!r}; `cosigner tenants list` shows them")
            return await Allowances(db, time.time).listed(args.tenant)

        found: list[StandingAllow] = asyncio.run(with_db(go))
        for a in found:
            print(line(a))
        if not found:
            print("no standing allows in force")
        return 0

    def revoke(args: argparse.Namespace) -> int:
        from bot.approvals import Allowances

        async def go(db: Database, settings: Any) -> StandingAllow:
            return await Allowances(db, time.time).revoke(None, args.id, "operator", {"kind": "operator"})

        a: StandingAllow = asyncio.run(with_db(go))
        print(f"revoked {a.id}: {a.scope.tool_name} calls it covered are asked again from the next one")
        return 0

    group = sub.add_parser("allowances", help="standing allows (Allow for …) approvers gave")
    actions = group.add_subparsers(dest="action", required=True)
    ls = actions.add_parser("list", help="the standing allows in force, newest first")
    ls.add_argument("--tenant", help="only this tenant's")
    ls.set_defaults(fn=listed)
    rv = actions.add_parser("revoke", help="revoke one: the calls it covered are asked again")
    rv.add_argument("id", help="the standing allow's id (alw_…), from `cosigner allowances list`")
    rv.set_defaults(fn=revoke)

"""`cosigner denials list [--tenant T]` and `cosigner denials lift ID`: the operator's view of
the standing denies (Always deny) approvers set, and the way to lift one."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from storage.database import Database
    from storage.denials import StandingDeny

    WithDb = Callable[[Callable[[Database, Any], Awaitable[Any]]], Coroutine[Any, Any, Any]]


def line(d: StandingDeny) -> str:
    """One standing deny on one line: id, tenant, tool, who set it, whose runs, when, where."""
    from bot.approvals import setter
    from storage.record_columns import iso

    return (
        f"{d.id}  {d.scope.tenant}  {d.scope.tool_name}  set by {setter(d)}  "
        f"for runs of {d.scope.requester}  at {iso(d.created_at)}  on {d.approval_id}"
    )


def register(sub: Any, with_db: WithDb, usage_error: type[Exception]) -> None:
    """Add the `denials` command group to the CLI's subparsers."""

    def listed(args: argparse.Namespace) -> int:
        from bot.approvals import Denials
        from bot.http import TenantKeys

        async def go(db: Database, settings: Any) -> list[StandingDeny]:
            if args.tenant is not None and args.tenant not in await TenantKeys(db).names():
                raise usage_error(f"no tenant {args.tenant!r}; `cosigner tenants list` shows them")
            return await Denials(db, time.time).listed(args.tenant)

        found: list[StandingDeny] = asyncio.run(with_db(go))
        for d in found:
            print(line(d))
        if not found:
            print("no standing denies in force")
        return 0

    def lift(args: argparse.Namespace) -> int:
        from bot.approvals import Denials, setter

        async def go(db: Database, settings: Any) -> StandingDeny:
            return await Denials(db, time.time).lift(None, args.id, "operator", {"kind": "operator"})

        d: StandingDeny = asyncio.run(with_db(go))
        print(f"lifted {d.id}: {d.scope.tool_name} requests that {setter(d)} approves are asked again")
        return 0

    group = sub.add_parser("denials", help="standing denies (Always deny) approvers set")
    actions = group.add_subparsers(dest="action", required=True)
    ls = actions.add_parser("list", help="the standing denies in force, newest first")
    ls.add_argument("--tenant", help="only this tenant's")
    ls.set_defaults(fn=listed)
    lf = actions.add_parser("lift", help="lift one: its requests are asked again")
    lf.add_argument("id", help="the standing deny's id (den_…), from `cosigner denials list`")
    lf.set_defaults(fn=lift)

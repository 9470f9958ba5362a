"""The `cosigner` command: serve, dev, migrate, tenants, policy, audit, denials, allowances, inbox,
doctor, backup."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NoReturn

from bot.cli import allowances as allowance_cli
from bot.cli import audit as audit_cli
from bot.cli import backup as backup_cli
from bot.cli import denials as denial_cli
from bot.cli import doctor as doctor_cli
from bot.cli import inbox as inbox_cli
from bot.cli import policy as policy_cli
from bot.cli import suggest as suggest_cli
from bot.cli import tenants as tenants_cli
from bot.cli import vapid as vapid_cli
from bot.cli.database import with_db
from bot.cli.errors import UsageError
from cosigner._listen import ListenError, valid_port

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

    from bot.policy import Policy
    from bot.settings import Settings

# Each command imports what it uses when it runs (the server, the database, the policy
# engine), so that `cosigner policy check` or `cosigner backup` does not load the server.

log = logging.getLogger("cosigner.cli")


def _policy_at(path: str) -> Policy:
    from bot.policy import load_policy_file
    from contracts.errors import PolicyError

    policy = load_policy_file(path)
    if problems := policy.operation_problems():
        raise PolicyError(problems, policy.source)
    return policy


def _shadow(settings: Settings) -> Policy | None:
    """The shadow policy, checked as strictly as the policy: one that fails to load stops serve."""
    if not settings.policy_shadow:
        return None
    shadow = _policy_at(settings.policy_shadow)
    log.warning(
        "COSIGNER_POLICY_SHADOW is set: every request is also decided by %s, which acts on nothing",
        settings.policy_shadow,
    )
    return shadow


def _policy(settings: Settings) -> Policy:
    from bot.policy import load_policy

    if settings.policy:
        return _policy_at(settings.policy)
    log.warning("COSIGNER_POLICY is not set; every tool is treated as danger (a person approves each call)")
    return load_policy("")


def serve(args: argparse.Namespace) -> int:
    """Run the server."""
    import asyncio
    import time

    import uvicorn

    from bot.cli.database import require_schema
    from bot.http import Server, announce, bind, build_app
    from bot.observability import configure
    from bot.settings import load_settings
    from storage.database import Database

    settings = load_settings()
    configure(settings.log_level)
    policy = _policy(settings)
    shadow = _shadow(settings)

    async def check() -> None:
        db = Database(settings.database_url, sqlite_synchronous=settings.sqlite_sync)
        try:
            if not db.is_sqlite:
                await require_schema(db)
        finally:
            await db.close()

    clock: Callable[[], float] = time.time
    extra_routes: list[BaseRoute] = []
    if settings.test_clock is not None:
        from bot.testing import SteppedClock, is_loopback

        if not is_loopback(args.host):
            raise UsageError(
                "COSIGNER_TEST_CLOCK lets any local process move time and is for tests only; "
                f"unset it, or serve on --host 127.0.0.1 (not {args.host})"
            )
        stepped = SteppedClock(settings.test_clock)
        clock, extra_routes = stepped, stepped.routes()
        log.warning(
            "COSIGNER_TEST_CLOCK is set: time moves only by POST /test/clock; never do this in production"
        )

    sock = bind(args.host, args.port)
    try:
        asyncio.run(check())
        app = build_app(settings, policy=policy, shadow=shadow, clock=clock, extra_routes=extra_routes)
        # Keep idle connections longer than a load balancer's idle timeout (60 s is common):
        # otherwise the server closes a connection the balancer is about to reuse, and that
        # request fails with a reset. log_config=None: uvicorn logs through bot.observability.logs, as JSON.
        config = uvicorn.Config(
            app,
            log_config=None,
            log_level="warning",
            access_log=False,
            proxy_headers=True,
            timeout_graceful_shutdown=5,
            timeout_keep_alive=75,
            backlog=4096,
        )
        port = sock.getsockname()[1]
        Server(config, on_listening=lambda: announce(app, port)).run(sockets=[sock])
    finally:
        sock.close()
    return 0


def dev(args: argparse.Namespace) -> int:
    """Run the sandbox: SQLite, the bundled emulators, a sample policy, a demo tenant."""
    from bot.dev import run_dev

    return int(
        run_dev(host=args.host, port=args.port, data_dir=args.data, socket_mode=args.slack_socket_mode)
    )


async def _migrate(settings: Settings) -> str | None:
    from storage.database import Database

    db = Database(settings.database_url, sqlite_synchronous=settings.sqlite_sync)
    try:
        await db.migrate()
        return await db.revision()
    finally:
        await db.close()


def migrate(args: argparse.Namespace) -> int:
    """Bring the database schema up to date."""
    import asyncio

    from bot.settings import load_settings

    revision = asyncio.run(_migrate(load_settings()))
    print(f"database is at revision {revision}")
    return 0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def policy_check(args: argparse.Namespace) -> int:
    """Validate a policy file, printing every problem with its key path."""
    from bot.policy import load_policy_file
    from contracts.errors import PolicyError

    policy = load_policy_file(args.file)
    if problems := policy.operation_problems():
        raise PolicyError(problems, str(args.file))

    def verdict(name: str) -> str:
        rule = policy.rule_for("", name)
        said = "deny" if rule.deny else rule.mode.value
        return f"{said}, {len(rule.when)} when blocks" if rule.when else said

    tools = ", ".join(f"{n} ({verdict(n)})" for n in policy.tools)
    print(f"{args.file}: OK — {_count(len(policy.tools), 'tool')}, {_count(len(policy.tenants), 'tenant')}")
    if policy.cedar is not None:
        files = policy.cedar.files
        print(
            f"  cedar: {files.policies_path.name}, {len(files.statements)} Cedar policies "
            f"validated against {files.schema_path.name}; Cedar decides every call"
        )
    elif tools:
        print(f"  tools: {tools}")
    if policy.operations:
        print(f"  operations: {', '.join(policy.operations)}")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse, reporting a usage mistake as one `error:` line like every other failure."""

    def error(self, message: str) -> NoReturn:
        """Print one line naming the mistake and where help is, and exit 2."""
        self.exit(2, f"error: {self.prog}: {message}; see `{self.prog} --help`\n")


def parser() -> argparse.ArgumentParser:
    """The argument parser."""
    p = _Parser(prog="cosigner", description="Approval gate for AI agents.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run the server (configured by environment)")
    s.add_argument("--host", default="127.0.0.1")
    s.add_argument("--port", type=valid_port, default=8000)
    s.set_defaults(fn=serve)
    d = sub.add_parser("dev", help="run the sandbox: emulated Slack and Twilio, demo tenant")
    d.add_argument("--host", default="127.0.0.1")
    d.add_argument("--port", type=valid_port, default=8000)
    d.add_argument("--data", default="cosigner-data", help="folder for the sandbox database")
    d.add_argument(
        "--slack-socket-mode",
        action="store_true",
        help="run Slack over Socket Mode (an app-level token, no /slack/events), as without a public URL",
    )
    d.set_defaults(fn=dev)
    sub.add_parser("migrate", help="create or upgrade the database schema").set_defaults(fn=migrate)
    tenants_cli.register(sub)
    pc = sub.add_parser("policy", help="policy tools").add_subparsers(dest="action", required=True)
    check = pc.add_parser("check", help="validate a policy file")
    check.add_argument("file")
    check.set_defaults(fn=policy_check)
    policy_cli.register(pc, UsageError)
    suggest_cli.register(pc, UsageError)
    audit_cli.register(sub, with_db, UsageError)
    # Parsed by the gateway itself (see main): listed here for `cosigner --help`.
    sub.add_parser("mcp-gateway", help="an MCP server in front of another, each tool call gated by Cosigner")
    sub.add_parser(
        "hook", help="the PreToolUse hook of Claude Code or Codex: hook JSON in, allow or deny out"
    )
    denial_cli.register(sub, with_db, UsageError)
    allowance_cli.register(sub, with_db, UsageError)
    inbox_cli.register(sub, with_db, UsageError)
    doctor_cli.register(sub)
    backup_cli.register(sub, UsageError)
    vapid_cli.register(sub, with_db)
    return p


def mcp_gateway(argv: Sequence[str]) -> int:
    """`cosigner mcp-gateway …`: the agent SDK's gateway, with its own options."""
    try:
        from cosigner.mcp_gateway.cli import main as gateway_main
    except ImportError:
        print("error: the MCP gateway needs the mcp extra: pip install 'cosigner-sdk[mcp]'", file=sys.stderr)
        return 2
    return gateway_main(argv, prog="cosigner mcp-gateway")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `cosigner` command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["mcp-gateway"]:
        return mcp_gateway(argv[1:])
    if argv[:1] == ["hook"]:
        from cosigner.hooks.command import main as hook_main

        return hook_main(argv[1:], prog="cosigner hook")
    args = parser().parse_args(argv)
    try:
        code: int = args.fn(args)
    except BrokenPipeError:
        # `cosigner audit export | head` closed our stdout: that is not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        if not _told(exc):
            raise
        return 2
    return code


def _loaded(module: str, name: str) -> tuple[type[BaseException], ...]:
    """The exception class `module.name` if that module was imported: an exception of a
    module never imported cannot have been raised."""
    found = sys.modules.get(module)
    return () if found is None else (getattr(found, name),)


def _told(exc: Exception) -> bool:
    """Print the one line an expected failure gets; False for a failure not expected (a bug)."""
    said = (
        *_loaded("contracts.errors", "PolicyError"),
        *_loaded("cosigner.errors", "CosignerError"),
        *_loaded("storage.urls", "DatabaseUrlError"),
        *_loaded("bot.settings", "SettingsError"),
        ListenError,
        UsageError,
    )
    if isinstance(exc, said):
        print(f"error: {exc}", file=sys.stderr)
        return True
    if isinstance(exc, (*_loaded("sqlalchemy.exc", "DBAPIError"), OSError)):
        from bot.settings import load_settings
        from storage.urls import safe_url

        print(
            f"error: cannot use the database at {safe_url(load_settings().database_url)} "
            f"({type(exc).__name__}); check COSIGNER_DATABASE_URL and that the server is up",
            file=sys.stderr,
        )
        return True
    if isinstance(exc, _loaded("bot.http.surface_config", "ConfigurationError")):
        print(f"error: {exc}", file=sys.stderr)
        return True
    return False

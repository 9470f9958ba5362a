"""`cosigner-mcp-gateway` (and `cosigner mcp-gateway`): run the gateway from the command line.

    cosigner-mcp-gateway --upstream-cmd "python server.py" --surface slack:T0ACME/C0OPS/U0ALICE
    cosigner-mcp-gateway --upstream-url http://127.0.0.1:9000/mcp --surface sms:+15550100200 \\
        --transport http --port 8765
    cosigner-mcp-gateway --upstream-cmd "python server.py" --surface dashboard:u_42 --pin tools.lock.json

COSIGNER_URL and COSIGNER_API_KEY come from the environment (the tenant is the key's).
Everything of the `mcp` extra is imported inside the functions, after `main` has checked
that it is installed: without it the command says what to install instead of failing on
an import.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from cosigner import AsyncCosigner
from cosigner._listen import ListenError, bind, valid_port
from cosigner.mcp_gateway import MISSING_EXTRA, mcp_missing
from cosigner.mcp_gateway.pins import LockFile, NewTools
from cosigner.mcp_gateway.surface_spec import SurfaceSpecError, parse_surface

if TYPE_CHECKING:
    from mcp import StdioServerParameters

    from cosigner.mcp_gateway.gateway import GatewayOptions

__all__ = ["add_arguments", "main", "run"]


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to host:port for `--transport http`, or `ListenError` naming the fix.

    Bound before the upstream is started, so a taken port is one error line, not a
    traceback after the upstream came up."""
    return bind(host, port, pick="--port N")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The gateway's options, shared by both command names."""
    upstream = p.add_mutually_exclusive_group(required=True)
    upstream.add_argument(
        "--upstream-cmd", help='the upstream MCP server as a command, e.g. "python server.py"'
    )
    upstream.add_argument("--upstream-url", help="the upstream MCP server's Streamable HTTP URL")
    p.add_argument(
        "--upstream-env",
        action="append",
        default=[],
        metavar="NAME",
        help="pass this environment variable on to the --upstream-cmd process (repeatable); it "
        "gets only HOME, LOGNAME, PATH, SHELL, TERM and USER otherwise, never COSIGNER_API_KEY",
    )
    p.add_argument(
        "--surface",
        required=True,
        help="where approvals are shown: slack:TEAM/CHANNEL/USER, sms:+15550100200 or dashboard:USER_ID",
    )
    p.add_argument(
        "--transport", choices=["stdio", "http"], default="stdio", help="how agents reach the gateway"
    )
    p.add_argument("--host", default="127.0.0.1", help="address for --transport http")
    p.add_argument("--port", type=valid_port, default=8765, help="port for --transport http (path /mcp)")
    p.add_argument("--tool-prefix", default="", help="put before each tool name for the policy, e.g. github.")
    p.add_argument(
        "--hold",
        type=float,
        default=20.0,
        help="seconds one call may wait for a person before it is answered 'pending' (keep it under "
        "the client's timeout; default 20)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=8,
        help="input-required rounds a 2026-07-28 client may wait through in one call before the "
        "'pending' answer (default 8; the mcp clients allow 10)",
    )
    p.add_argument(
        "--timeout", type=int, default=None, help="the approvals' timeout in seconds (default: policy's)"
    )
    p.add_argument(
        "--pin",
        type=Path,
        metavar="FILE",
        help="offer only tools whose definition (description, schemas, annotations) an approver "
        "approved, recorded in this JSON lock file (made if missing); a changed one waits for an approver",
    )
    p.add_argument(
        "--new-tools",
        choices=[n.value for n in NewTools],
        default=None,
        help="with --pin, a tool the lock file does not name: ask an approver first (default), allow "
        "(pin it as listed), or deny",
    )
    p.add_argument(
        "--inbox-url",
        metavar="URL",
        help="Cosigner's inbox as approvers' browsers reach it, sent in elicitations "
        "(default: COSIGNER_URL/inbox/)",
    )
    p.add_argument(
        "--no-elicitation",
        action="store_true",
        help="never send the person at the client to the inbox (URL elicitation)",
    )


def upstream_of(args: argparse.Namespace) -> StdioServerParameters | str:
    """What `mcp.Client` connects to: a command line, or a URL."""
    from mcp import StdioServerParameters

    if args.upstream_url:
        return str(args.upstream_url)
    words = shlex.split(args.upstream_cmd)
    if not words:
        raise ValueError("--upstream-cmd is empty: give the command that starts the MCP server")
    if any(name.upper().startswith("COSIGNER_") for name in args.upstream_env):
        raise ValueError("--upstream-env: Cosigner's own variables (its API key) stay with the gateway")
    missing = [name for name in args.upstream_env if name not in os.environ]
    if missing:
        raise ValueError(f"--upstream-env {', '.join(missing)}: not set in the gateway's environment")
    env = {name: os.environ[name] for name in args.upstream_env}
    return StdioServerParameters(command=words[0], args=words[1:], env=env or None)


async def run(
    args: argparse.Namespace,
    options: GatewayOptions,
    cosigner: AsyncCosigner,
    target: StdioServerParameters | str,
    listener: socket.socket | None = None,
) -> None:
    """Connect the upstream, then serve until the agent hangs up (stdio) or forever (http,
    on `listener`, a socket bound by `listen`, or one bound here to --host and --port)."""
    from mcp.server.stdio import stdio_server

    from cosigner.mcp_gateway.gateway import Gateway
    from cosigner.mcp_gateway.pipes import open_stdio
    from cosigner.mcp_gateway.strict import guard_http
    from cosigner.mcp_gateway.upstream import upstream_client

    async with cosigner, upstream_client(target) as upstream:
        gateway = Gateway(upstream, cosigner, options)
        server = gateway.server
        if args.transport == "http":
            listener = listener or listen(args.host, args.port)
            # Listening before the line says so: an agent that connects as soon as it reads
            # it waits in the backlog until uvicorn accepts, instead of being refused.
            listener.listen(2048)
        print(started(args, cosigner.config.url, listener), file=sys.stderr, flush=True)
        try:
            if args.transport == "stdio":
                # Windows event loops cannot watch console pipes: the SDK's own streams there.
                stdin, stdout = await open_stdio() if sys.platform != "win32" else (None, None)
                async with stdio_server(stdin, stdout) as (read, write):
                    await server.run(read, write, server.create_initialization_options())
                return
            import uvicorn

            app = guard_http(server.streamable_http_app(host=args.host))
            config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning")
            await uvicorn.Server(config).serve(sockets=[listener] if listener else None)
        finally:
            await gateway.drain()


def started(args: argparse.Namespace, cosigner_url: str, listener: socket.socket | None) -> str:
    """The one line the gateway prints once its upstream is connected: what it is in front
    of, which Cosigner it asks, and where agents reach it (stdio, or the address it listens on)."""
    upstream = shown(args.upstream_url) if args.upstream_url else args.upstream_cmd
    where = "serving MCP on stdio"
    if listener is not None:
        host, port = listener.getsockname()[:2]
        where = f"listening on http://{f'[{host}]' if ':' in host else host}:{port}/mcp"
    return f"cosigner-mcp-gateway: upstream {upstream}, Cosigner at {shown(cosigner_url)}, {where}"


def shown(url: str) -> str:
    """`url` without user name, password, query or fragment, which may carry credentials."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return f"{parts.scheme}://{netloc}{parts.path}"


def pinning(args: argparse.Namespace) -> tuple[Path | None, NewTools]:
    """`--pin` and `--new-tools`, checked; the lock file is read here once, so that one that is
    not a lock file stops the command (LockFileError, a ValueError) before the upstream starts."""
    if args.pin is None:
        if args.new_tools is not None:
            raise ValueError(
                "--new-tools needs --pin FILE: without a lock file every tool is offered as the upstream "
                "lists it"
            )
        return None, NewTools.ASK
    LockFile.load(args.pin)
    return args.pin, NewTools(args.new_tools or NewTools.ASK)


def inbox_url(url: str | None) -> str | None:
    """`--inbox-url`, checked: an http(s) address with nothing in it that could authenticate."""
    if url is None:
        return None
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"--inbox-url {url!r} is not an http(s) URL; give e.g. https://cosigner.example/inbox/"
        )
    if parts.username or parts.password or parts.query or parts.fragment:
        raise ValueError(
            "--inbox-url must hold no user name, password, query or fragment: the link sent to the "
            "client is never pre-authenticated; give the inbox's plain address"
        )
    return url


def main(argv: Sequence[str] | None = None, prog: str = "cosigner-mcp-gateway") -> int:
    """The console script's entry point."""
    if mcp_missing():  # before parsing, so that even --help says it
        print(f"error: {MISSING_EXTRA}", file=sys.stderr)
        return 2
    p = argparse.ArgumentParser(
        prog=prog,
        description="An MCP server in front of another: each tool call goes through Cosigner's policy first.",
    )
    add_arguments(p)
    return execute(p.parse_args(argv))


def execute(args: argparse.Namespace) -> int:
    """Run the parsed command; a configuration problem is one `error:` line and exit status 2."""
    from cosigner.mcp_gateway.gateway import GatewayOptions
    from cosigner.mcp_gateway.pins import LockFileError
    from cosigner.mcp_gateway.upstream import UpstreamUnavailable

    if args.hold < 0 or args.rounds < 0:
        print("error: --hold and --rounds must be 0 or more", file=sys.stderr)
        return 2
    try:
        pin, new_tools = pinning(args)
        options = GatewayOptions(
            surface=parse_surface(args.surface),
            hold_seconds=args.hold,
            rounds=args.rounds,
            tool_prefix=args.tool_prefix,
            timeout_seconds=args.timeout,
            pin=pin,
            new_tools=new_tools,
            elicit=not args.no_elicitation,
            inbox_url=inbox_url(args.inbox_url),
        )
        upstream = upstream_of(args)
        cosigner = AsyncCosigner()  # COSIGNER_URL and COSIGNER_API_KEY
        listener = listen(args.host, args.port) if args.transport == "http" else None
    except (SurfaceSpecError, ValueError, ListenError) as exc:  # LockFileError is a ValueError
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(run(args, options, cosigner, upstream, listener))
    except LockFileError as exc:  # changed since it was checked above
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (UpstreamUnavailable, OSError) as exc:
        which = (
            f"--upstream-url {args.upstream_url}"
            if args.upstream_url
            else f"--upstream-cmd {args.upstream_cmd!r}"
        )
        print(f"error: could not start or reach the upstream MCP server ({which}): {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0

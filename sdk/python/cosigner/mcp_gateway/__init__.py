"""The MCP gateway: put Cosigner in front of any MCP server without changing the agent.

Install with the extra, `pip install 'cosigner-sdk[mcp]'`, and run `cosigner-mcp-gateway`
(see `cli.py`), or build one in code:

    async with AsyncCosigner() as cosigner, upstream_client(upstream) as client:
        gateway = Gateway(client, cosigner, GatewayOptions(surface=parse_surface("dashboard:u_42")))
        # serve gateway.server (an mcp low-level Server) over stdio or Streamable HTTP,
        # behind guard_http / GuardedLines (ambiguous JSON refused; see strict.py)

The names below are loaded on first use, so that the command can still start without the
extra and say what to install instead of failing on an import (`MISSING_EXTRA`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cosigner.mcp_gateway.gateway import Gateway, GatewayOptions
    from cosigner.mcp_gateway.pins import LockFileError, NewTools
    from cosigner.mcp_gateway.strict import GuardedLines, guard_http
    from cosigner.mcp_gateway.surface_spec import SurfaceSpecError, parse_surface
    from cosigner.mcp_gateway.upstream import UpstreamUnavailable, upstream_client

__all__ = [
    "MISSING_EXTRA",
    "Gateway",
    "GatewayOptions",
    "GuardedLines",
    "LockFileError",
    "NewTools",
    "SurfaceSpecError",
    "UpstreamUnavailable",
    "guard_http",
    "mcp_missing",
    "parse_surface",
    "upstream_client",
]

MISSING_EXTRA = "the MCP gateway needs the mcp extra: pip install 'cosigner-sdk[mcp]'"

_HOMES = {
    "Gateway": "gateway",
    "GatewayOptions": "gateway",
    "UpstreamUnavailable": "upstream",
    "upstream_client": "upstream",
    "GuardedLines": "strict",
    "LockFileError": "pins",
    "NewTools": "pins",
    "guard_http": "strict",
    "SurfaceSpecError": "surface_spec",
    "parse_surface": "surface_spec",
}


def mcp_missing() -> bool:
    """Whether the `mcp` package (the extra) cannot be imported here."""
    try:
        importlib.import_module("mcp")
    except ModuleNotFoundError as exc:
        if exc.name == "mcp":
            return True
        raise
    return False


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'cosigner.mcp_gateway' has no attribute {name!r}")
    if mcp_missing():
        raise ImportError(MISSING_EXTRA, name="mcp")
    return getattr(importlib.import_module(f"cosigner.mcp_gateway.{home}"), name)

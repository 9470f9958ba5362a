"""The MCP gateway: put Cosigner in front of any MCP server without changing the agent.

Install with the extra, `pip install 'cosigner-sdk[mcp]'`, and run `cosigner-mcp-gateway`
(see `cli.py`), or build one in code:

    async with AsyncCosigner() as cosigner, upstream_client(upstream) as client:
        gateway = Gateway(client, cosigner, GatewayOptions(surface=parse_surface("dashboard:u_42")))
        # serve gateway.server (an mcp low-level Server) over stdio or Streamable HTTP,
        # behind guard_http / GuardedLines (ambiguous JSON refused; see strict.py)
"""

from __future__ import annotations

from cosigner.mcp_gateway.gateway import Gateway, GatewayOptions, UpstreamUnavailable, upstream_client
from cosigner.mcp_gateway.strict import GuardedLines, guard_http
from cosigner.mcp_gateway.surface_spec import SurfaceSpecError, parse_surface

__all__ = [
    "Gateway",
    "GatewayOptions",
    "GuardedLines",
    "SurfaceSpecError",
    "UpstreamUnavailable",
    "guard_http",
    "parse_surface",
    "upstream_client",
]

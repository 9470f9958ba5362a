"""The HTTP side: the ASGI app composed from its parts, the agent API and its route table,
request decoding, tenant API keys, and the listening server.
"""

from typing import TYPE_CHECKING

from bot import lazy_exports

if TYPE_CHECKING:
    from bot.http.app import ConfigurationError, announce, build_app, parts_of
    from bot.http.decoding import decode_json, read_body
    from bot.http.server import ListenError, Server, bind, valid_port
    from bot.http.tenants import IssuedKey, NewTenant, TenantKeys

__all__ = [
    "ConfigurationError",
    "IssuedKey",
    "ListenError",
    "NewTenant",
    "Server",
    "TenantKeys",
    "announce",
    "bind",
    "build_app",
    "decode_json",
    "parts_of",
    "read_body",
    "valid_port",
]
__getattr__ = lazy_exports(
    __name__,
    __all__,
    {
        "bot.http.app": ["ConfigurationError", "announce", "build_app", "parts_of"],
        "bot.http.decoding": ["decode_json", "read_body"],
        "bot.http.server": ["ListenError", "Server", "bind", "valid_port"],
        "bot.http.tenants": ["IssuedKey", "NewTenant", "TenantKeys"],
    },
)

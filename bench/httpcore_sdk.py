"""A copy of the SDK whose plain-http requests go over httpcore, to measure against the SDK as it is.

    .venv/bin/python bench/httpcore_sdk.py DIR
    .venv/bin/python bench/mcp_gateway.py --rounds 8 --compare-sdk DIR
    PYTHONPATH=.:DIR .venv/bin/python bench/sdk.py --calls 600

DIR receives `cosigner/`: sdk/python/cosigner as it is in this tree, with
bench/httpcore_connections.py as `cosigner/_connections.py` and `AsyncCosigner`, `Cosigner`
and the outbox sending through it instead of `cosigner._keepalive`: httpcore's
`AsyncHTTP11Connection` on a stream of the event loop's protocol callbacks and its blocking
`HTTP11Connection` on a socket, each kept in a free list (docs/performance.md, "One HTTP
client family, measured"). Everything else (flows, checks, the outbox's reports written at
once) is the same code, so a comparison measures the connections alone. The SDK's tests run
against the copy too: `PYTHONPATH=.:DIR pytest tests/sdk` (less test_keepalive.py).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (module, text in it, text in the copy): each must occur exactly once.
WIRING = [
    (
        "async_client.py",
        "from cosigner._keepalive import BlockingKeepAlive, KeepAlive, Origin, send_async\n",
        "from cosigner._connections import AsyncConnections, BlockingConnections, Origin\n",
    ),
    (
        "async_client.py",
        "KeepAlive(self._origin.host, self._origin.port) if self._origin else None",
        "AsyncConnections(self._origin) if self._origin else None",
    ),
    ("async_client.py", "BlockingKeepAlive(self._origin)", "BlockingConnections(self._origin)"),
    (
        "async_client.py",
        "return await send_async(self._keepalive, self._origin, step)",
        "return await self._keepalive.send(step)",
    ),
    (
        "client.py",
        "from cosigner._keepalive import BlockingKeepAlive, Origin\n",
        "from cosigner._connections import BlockingConnections, Origin\n",
    ),
    ("client.py", "BlockingKeepAlive(origin)", "BlockingConnections(origin)"),
    (
        "_outbox.py",
        "from cosigner._keepalive import Started\n",
        "from cosigner._connections import Started\n",
    ),
]


def build(target: Path) -> Path:
    """Write the httpcore build of the SDK's package into `target`; the package's path."""
    package = target / "cosigner"
    if package.exists():
        shutil.rmtree(package)
    shutil.copytree(
        ROOT / "sdk" / "python" / "cosigner", package, ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "bench" / "httpcore_connections.py", package / "_connections.py")
    for module, old, new in WIRING:
        path = package / module
        text = path.read_text()
        if text.count(old) != 1:
            raise SystemExit(
                f"{module} changed: {old.strip()!r} is not in it once; update bench/httpcore_sdk.py"
            )
        path.write_text(text.replace(old, new))
    return package


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("dir", type=Path, help="where to write cosigner/ (pass it to --compare-sdk)")
    args = parser.parse_args()
    print(build(args.dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())

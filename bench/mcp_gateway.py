"""What the MCP gateway costs: the latency it adds to a read tool over stdio, and its memory.

    .venv/bin/python bench/mcp_gateway.py [--calls 50] [--rounds 12] [--sessions 100] [--pin]

It starts `cosigner serve` on SQLite pinned to one core (as bench/roundtrip.py does); the
agent, the gateway and the upstream (examples/mcp_server.py) share the other core.

- **Latency.** An `mcp.Client` calls `lookup_order` (a read: the policy lets it through
  with nobody asked) one call at a time, over stdio, three ways: straight to the example
  server, through a bare MCP passthrough in front of it (bench/mcp_passthrough.py: the
  gateway's `mcp` pieces without Cosigner, the protocol's own cost of one hop), and
  through `cosigner-mcp-gateway` in front of the same server. The ways alternate in rounds
  to spread machine noise over all. The added latency is the difference of the medians;
  the Cosigner request inside the gateway's (one POST answered 200, the policy's answer)
  is measured on its own too, with the SDK's `AsyncCosigner`. The CPU time of the
  passthrough and gateway processes per read is read from /proc.
- **Pinning** (`--pin`): a second gateway with `--pin FILE --new-tools allow` (a lock file
  it writes on its first listing, then checks every call against) runs as another path in
  the same rounds, so the cost of pinning is measured beside the gateway without it.
- **Another SDK** (`--compare-sdk DIR`): a second gateway whose `cosigner` package is
  imported from DIR (a checkout's `sdk/python`, or a changed copy of the package) runs as a
  fourth path in the same rounds, so two versions of the SDK are compared in one run.
- **Memory.** The gateway serves Streamable HTTP; 100 MCP sessions (`mode="legacy"`, each
  its own execution) open and each makes one read. The gateway process's resident memory
  (VmRSS) is read with one session open and with all of them open.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import httpx
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from roundtrip import READ_POLICY, ROOT, Server, _stop_all, free_port, machine, pick_cores, running_server

from cosigner import AsyncCosigner, DashboardSurface

POLICY = READ_POLICY
BIN = Path(sys.executable).parent
EXAMPLE = [sys.executable, str(ROOT / "examples" / "mcp_server.py")]
PASSTHROUGH = [sys.executable, str(Path(__file__).resolve().parent / "mcp_passthrough.py"), " ".join(EXAMPLE)]
SURFACE = "dashboard:u_bench"
ARGS = {"order_id": "ord_4421"}
COMPARED = "import sys; from cosigner.mcp_gateway.cli import main; sys.exit(main())  # compared gateway"
PINNED = "import sys; from cosigner.mcp_gateway.cli import main; sys.exit(main())  # pinned gateway"


def gateway_args(*extra: str) -> list[str]:
    """The gateway command line in front of the example server."""
    return ["--upstream-cmd", " ".join(EXAMPLE), "--surface", SURFACE, *extra]


def env_of(server: Server) -> dict[str, str]:
    """The environment a gateway runs in: the bench tenant's key."""
    return {**os.environ, "COSIGNER_URL": server.url, "COSIGNER_API_KEY": server.key}


@asynccontextmanager
async def stdio_agent(command: list[str], env: dict[str, str]) -> AsyncIterator[Client]:
    """An MCP client of `command` over stdio, its stderr (and the upstream's) discarded."""
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    with open(os.devnull, "w") as quiet:  # noqa: ASYNC230 (opening /dev/null does not block)
        async with Client(stdio_client(params, errlog=quiet)) as client:
            yield client


async def timed_reads(agent: Client, calls: int) -> list[float]:
    """Milliseconds of each of `calls` sequential `lookup_order` calls."""
    out: list[float] = []
    for _ in range(calls):
        start = time.perf_counter()
        result = await agent.call_tool("lookup_order", ARGS)
        out.append((time.perf_counter() - start) * 1000)
        if result.is_error:
            raise RuntimeError(f"lookup_order failed: {result.content}")
    return out


async def timed_policy(server: Server, calls: int) -> list[float]:
    """Milliseconds of the request the gateway makes per read, alone (fresh tool call ids)."""
    out: list[float] = []
    async with AsyncCosigner(url=server.url, api_key=server.key) as cosigner:
        for i in range(calls):
            start = time.perf_counter()
            d = await cosigner.request_approval(
                execution_id="bench_policy",
                tool_call_id=f"c{time.monotonic_ns()}_{i}",
                tool_name="lookup_order",
                parameters=ARGS,
                surface=DashboardSurface(user_id="u_bench"),
            )
            out.append((time.perf_counter() - start) * 1000)
            assert d.approved
    return out


def child_pid(marker: bytes) -> int:
    """The pid of this process's child whose command line holds `marker`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and marker in cmdline:
            return int(entry.name)
    raise RuntimeError(f"no {marker.decode()} process found")


def cpu_ms(pid: int) -> float:
    """User plus system CPU time of `pid`, in milliseconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def latency(
    server: Server, calls: int, rounds: int, compare_sdk: str | None = None, pin: bool = False
) -> None:
    env = env_of(server)
    direct: list[float] = []
    passed: list[float] = []
    gated: list[float] = []
    policy: list[float] = []
    compared: list[float] = []
    pinned: list[float] = []
    async with AsyncExitStack() as stack:
        plain = await stack.enter_async_context(stdio_agent(EXAMPLE, env))
        bare = await stack.enter_async_context(stdio_agent(PASSTHROUGH, env))
        gateway = [str(BIN / "cosigner-mcp-gateway"), *gateway_args()]
        through = await stack.enter_async_context(stdio_agent(gateway, env))
        other = None
        if compare_sdk is not None:
            path = os.pathsep.join(p for p in (compare_sdk, env.get("PYTHONPATH", "")) if p)
            # The same entry point, told apart from the first gateway by its command line.
            marked = [sys.executable, "-c", COMPARED, *gateway[1:]]
            other = await stack.enter_async_context(stdio_agent(marked, {**env, "PYTHONPATH": path}))
        locking = None
        if pin:
            folder = stack.enter_context(tempfile.TemporaryDirectory())
            lock = ["--pin", str(Path(folder) / "tools.lock.json"), "--new-tools", "allow"]
            locking = await stack.enter_async_context(
                stdio_agent([sys.executable, "-c", PINNED, *gateway[1:], *lock], env)
            )
        for agent in (plain, bare, through, other, locking):
            if agent is not None:
                await timed_reads(agent, 20)  # warm every path (imports, keys, connections)
        pid, bare_pid = child_pid(b"cosigner-mcp-gateway"), child_pid(b"mcp_passthrough.py")
        other_pid = child_pid(b"compared gateway") if other is not None else 0
        pinned_pid = child_pid(b"pinned gateway") if locking is not None else 0
        load = os.getloadavg()[0]
        gateway_cpu = bare_cpu = other_cpu = pinned_cpu = 0.0
        for _ in range(rounds):
            direct += await timed_reads(plain, calls)
            before = cpu_ms(bare_pid)
            passed += await timed_reads(bare, calls)
            bare_cpu += cpu_ms(bare_pid) - before
            before = cpu_ms(pid)
            gated += await timed_reads(through, calls)
            gateway_cpu += cpu_ms(pid) - before
            if other is not None:
                before = cpu_ms(other_pid)
                compared += await timed_reads(other, calls)
                other_cpu += cpu_ms(other_pid) - before
            if locking is not None:
                before = cpu_ms(pinned_pid)
                pinned += await timed_reads(locking, calls)
                pinned_cpu += cpu_ms(pinned_pid) - before
            policy += await timed_policy(server, calls)
        load = max(load, os.getloadavg()[0])
    print(f"read tool over stdio, {rounds} rounds x {calls} sequential calls (ms):")
    print("| path | p50 | p90 | p99 | mean |")
    print("| --- | --- | --- | --- | --- |")
    for name, v in (
        ("direct to the upstream", direct),
        ("through a bare MCP passthrough", passed),
        ("through the gateway", gated),
        ("policy request alone", policy),
        *((("through the gateway on the compared SDK", compared),) if compared else ()),
        *((("through the gateway with --pin", pinned),) if pinned else ()),
    ):
        print(
            f"| {name} | {pct(v, 50):.2f} | {pct(v, 90):.2f} | {pct(v, 99):.2f} | {statistics.fmean(v):.2f} |"
        )
    print(
        f"CPU per read: gateway process {gateway_cpu / len(gated):.2f} ms, passthrough process "
        f"{bare_cpu / len(passed):.2f} ms; machine load average up to {load:.1f} during the runs"
    )
    print(
        f"added by the passthrough (MCP's own hop): p50 {pct(passed, 50) - pct(direct, 50):.2f} ms; "
        f"added by the gateway: p50 {pct(gated, 50) - pct(direct, 50):.2f} ms "
        f"(of which the policy request {pct(policy, 50):.2f} ms), "
        f"p90 {pct(gated, 90) - pct(direct, 90):.2f} ms"
    )
    print(
        "the gateway's own part (added p50 less the MCP hop and the policy request): "
        f"{pct(gated, 50) - pct(passed, 50) - pct(policy, 50):.2f} ms"
    )
    if compared:
        print(
            f"the gateway on the compared SDK ({compare_sdk}): added p50 "
            f"{pct(compared, 50) - pct(direct, 50):.2f} ms, CPU per read {other_cpu / len(compared):.2f} ms"
        )
    if pinned:
        print(
            f"the gateway with --pin: added p50 {pct(pinned, 50) - pct(direct, 50):.2f} ms, "
            f"p90 {pct(pinned, 90) - pct(direct, 90):.2f} ms, CPU per read {pinned_cpu / len(pinned):.2f} ms"
        )


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def memory(server: Server, sessions: int) -> None:
    port = free_port()
    proc = subprocess.Popen(  # noqa: ASYNC220 (started once, before anything is measured)
        [str(BIN / "cosigner-mcp-gateway"), *gateway_args("--transport", "http", "--port", str(port))],
        env=env_of(server),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with httpx.AsyncClient() as http:
            for _ in range(300):
                try:
                    await http.get(url, timeout=1)
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
        async with AsyncExitStack() as stack:
            first = await stack.enter_async_context(Client(url, mode="legacy"))
            await first.call_tool("lookup_order", ARGS)
            one = rss_mib(proc.pid)
            for _ in range(sessions - 1):
                client = await stack.enter_async_context(Client(url, mode="legacy"))
                await client.call_tool("lookup_order", ARGS)
            full = rss_mib(proc.pid)
        print(
            f"gateway memory (VmRSS): {one:.1f} MiB with 1 session, {full:.1f} MiB with {sessions} open "
            f"({(full - one) * 1024 / max(1, sessions - 1):.0f} KiB per session)"
        )
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def main_async(args: argparse.Namespace) -> None:
    server_core, client_core = pick_cores()
    print(machine().split("; client:")[0])
    async with running_server("sqlite", "", server_core, "WARNING", policy_text=POLICY) as server:
        if client_core is not None:
            os.sched_setaffinity(0, {client_core})  # children (gateway, upstream) inherit it
        await latency(server, args.calls, args.rounds, args.compare_sdk, args.pin)
        await memory(server, args.sessions)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument(
        "--calls",
        type=int,
        default=50,
        help="calls per path and round (short rounds, alternated often, keep a drifting "
        "machine from favouring one path)",
    )
    p.add_argument("--rounds", type=int, default=12)
    p.add_argument("--sessions", type=int, default=100)
    p.add_argument(
        "--compare-sdk",
        metavar="DIR",
        help="also run a gateway whose cosigner package is imported from DIR (first on PYTHONPATH)",
    )
    p.add_argument(
        "--pin",
        action="store_true",
        help="also run a gateway with --pin (a lock file of tool definitions) as another path",
    )
    args = p.parse_args()
    try:
        asyncio.run(main_async(args))
    finally:
        _stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())

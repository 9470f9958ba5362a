"""Cosigner's round-trip benchmark: a real server process on one core, driven over loopback.

    .venv/bin/python bench/roundtrip.py [--db sqlite|postgres|both] [--concurrency 1,16,64,256]
                                        [--seconds 5] [--py-spy FILE [--profile-concurrency 64]
                                                               [--profile-db sqlite|postgres]]
                                        [--client raw|aiohttp|httpx]
    .venv/bin/python bench/roundtrip.py --slack [bench/clicks.py options]
                           (Slack click-to-ack latency instead: see bench/clicks.py)
    .venv/bin/python bench/roundtrip.py --contract [options]
                           (operation contract round trips instead: see bench/contract_trips.py)
    ./run bench            (the same, with the defaults)

For each database it starts `cosigner serve` (uvicorn, uvloop + httptools when installed, one
worker) as a separate process pinned to one core, with a fresh database (a temporary SQLite
file, or a new PostgreSQL database `cosigner_bench_<random>` that is dropped afterwards), a
policy with one dashboard-approved danger tool, COSIGNER_SECRET set and no Slack or Twilio.
The tenant is created with `cosigner tenants create` before the server starts.

The client (this process, pinned to another core) speaks HTTP/1.1 with keep-alive through
`--client` (bench/httpclients.py): `raw`, the default, a minimal asyncio.Protocol client that
costs a fraction of the server's CPU per request, so the numbers measure the server;
`aiohttp` (ClientSession + TCPConnector); or `httpx` (AsyncClient, the original client, which
needed about as much CPU as the server and was the bottleneck at high concurrency).
At each concurrency level it runs two phases for a fixed time:

- create:     workers loop on `POST /v1/approvals` (dashboard surface, expects 201).
- round trip: the agent creates an approval, starts `GET /v1/approvals/{id}?wait=30`; once
              that request is on the wire, the "person" posts `POST .../decision` (approve);
              the round trip ends when the long-poll answers `approved` with a grant.
              notify = time from the decision POST's response to the long-poll's response
              (clamped at 0: the agent may hear first), i.e. push latency, not poll interval.

Every non-2xx answer, unexpected body and exception counts as an error and is printed.
The bar: 400 round trips/s on one core with SQLite, and no errors at 256 concurrent.
Nothing is left running: the server is stopped and the PostgreSQL database dropped on exit,
Ctrl-C and errors alike. Exit status: 0 when no request failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import os
import platform
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from httpclients import CLIENTS, Client, Resp, client_version, make_client

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
BAR_RT_PER_SECOND = 400.0
BAR_CONCURRENCY = 256
DEFAULT_PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
USER = "u_bench"
TOOL = "wire_money"
POLICY = f"""
[defaults]
timeout = "1h"
max_gated_calls_per_execution = 1000

[tools.{TOOL}]
kind = "danger"
approvers = ["requester"]
redact = ["cardToken"]
"""
DRAIN_SECONDS = 45.0  # after a phase's time is up, in-flight requests get this long to finish

_live: list[subprocess.Popen[bytes]] = []  # server processes to stop at exit, whatever happens


READ_POLICY = """
[defaults]
timeout = "1h"
max_gated_calls_per_execution = 1000000

[tools.lookup_order]
kind = "read"
"""
"""A policy under which `lookup_order` is a read the policy answers at once, nobody asked:
the call the adapter, gateway and server-CPU benches make."""


def _stop_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(5)
    if proc in _live:
        _live.remove(proc)


@atexit.register
def _stop_all() -> None:
    for proc in list(_live):
        _stop_process(proc)


# --- measurements -------------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-p * len(ordered) // 100))))
    return ordered[rank - 1]


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent busy since boot (every process, ours included)."""
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return float("nan")
    ticks = [int(x) for x in first]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


@dataclass
class PhaseResult:
    ok: int = 0
    elapsed: float = 0.0
    latencies: list[float] = field(default_factory=list)
    notify: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    server_cpu: float = 0.0  # fraction of one core
    client_cpu: float = 0.0
    other_cpu: float = 0.0  # cores used by every other process (PostgreSQL, other jobs)

    @property
    def rate(self) -> float:
        return self.ok / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def server_ms_per_op(self) -> float:
        """Server CPU per completed operation: stable even when other jobs steal the core."""
        return 1000.0 * self.server_cpu / self.rate if self.rate > 0 else float("nan")

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())


@dataclass
class Level:
    concurrency: int
    create: PhaseResult
    roundtrip: PhaseResult


class Failure(Exception):
    """One failed request, with a short description for the error table."""


def _expect(r: Resp, status: int, what: str) -> dict[str, Any]:
    if r.status != status:
        code = ""
        with contextlib.suppress(Exception):
            code = " " + str(r.json()["error"]["code"])
        raise Failure(f"{what}: HTTP {r.status}{code}")
    try:
        body: dict[str, Any] = r.json()
    except ValueError as exc:
        raise Failure(f"{what}: body is not JSON") from exc
    if not isinstance(body, dict):
        raise Failure(f"{what}: body is not a JSON object")
    return body


# --- the server ---------------------------------------------------------------------------


@dataclass
class Server:
    url: str
    key: str
    approver: str  # the approver key: the "person" decides through the tenant app's route
    pid: int
    stderr: Path
    database: str

    def stderr_problems(self) -> list[str]:
        """Lines of the server's stderr that report errors or tracebacks."""
        try:
            lines = self.stderr.read_text(errors="replace").splitlines()
        except OSError:
            return []
        return [
            ln
            for ln in lines
            if '"level": "ERROR"' in ln
            or '"level": "CRITICAL"' in ln
            or "Traceback" in ln
            or ln.startswith(("ERROR", "CRITICAL"))
        ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def cosigner(args: list[str], env: dict[str, str]) -> str:
    """Run a `cosigner` subcommand to completion; return its stdout or raise with stderr."""
    done = subprocess.run(
        [PYTHON, "-m", "bot.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"cosigner {' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
        )
    return done.stdout


@contextlib.asynccontextmanager
async def postgres_database(admin_dsn: str) -> AsyncIterator[str]:
    """A new, empty PostgreSQL database (its SQLAlchemy URL), dropped on exit."""
    import asyncpg

    name = f"cosigner_bench_{secrets.token_hex(4)}"
    admin = await asyncpg.connect(admin_dsn, timeout=10)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    # postgresql://user@host:port/db, or ...@/db?host=/var/run/postgresql for the Unix socket
    where, _, query = admin_dsn.split("://", 1)[1].partition("?")
    base = where.rsplit("/", 1)[0]
    try:
        yield f"postgresql+asyncpg://{base}/{name}" + (f"?{query}" if query else "")
    finally:
        admin = await asyncpg.connect(admin_dsn, timeout=10)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


@contextlib.asynccontextmanager
async def database_url(kind: str, admin_dsn: str, tmp: Path) -> AsyncIterator[str]:
    if kind == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp / 'bench.db'}"
        return
    async with postgres_database(admin_dsn) as url:
        yield url


def spawn_server(port: int, env: dict[str, str], stderr: Path, core: int | None) -> subprocess.Popen[bytes]:
    """Start `cosigner serve` in its own session, pinned to `core`, output to `stderr`."""

    def pin() -> None:
        if core is not None:
            os.sched_setaffinity(0, {core})

    with stderr.open("wb") as err:
        return subprocess.Popen(
            [PYTHON, "-m", "bot.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
            preexec_fn=pin,
            start_new_session=True,
        )


@contextlib.asynccontextmanager
async def running_server(
    kind: str,
    admin_dsn: str,
    core: int | None,
    log_level: str,
    *,
    policy_text: str = POLICY,
    extra_env: dict[str, str] | None = None,
    tenant: str = "bench",
) -> AsyncIterator[Server]:
    """Migrate, create a tenant, start `cosigner serve` pinned to `core`; stop it on exit.

    `extra_env` (e.g. SLACK_*) is added after every SLACK_/TWILIO_/COSIGNER_ variable of
    this process's environment has been dropped."""
    with tempfile.TemporaryDirectory(prefix="cosigner-bench-") as tmp_name:
        tmp = Path(tmp_name)
        async with database_url(kind, admin_dsn, tmp) as url:
            policy = tmp / "policy.toml"
            policy.write_text(policy_text)
            env = {
                k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "TWILIO_", "COSIGNER_"))
            }
            env.update(
                {
                    "COSIGNER_DATABASE_URL": url,
                    "COSIGNER_POLICY": str(policy),
                    "COSIGNER_SECRET": secrets.token_urlsafe(32),
                    "COSIGNER_LOG_LEVEL": log_level,
                    "PYTHONUNBUFFERED": "1",
                }
            )
            env.update(extra_env or {})
            port = free_port()
            env["COSIGNER_PUBLIC_URL"] = f"http://127.0.0.1:{port}"
            cosigner(["migrate"], env)
            out = cosigner(["tenants", "create", tenant], env)
            found, approver = re.search(r"csk_\S+", out), re.search(r"csa_\S+", out)
            if not found or not approver:
                raise RuntimeError(f"no API keys in `cosigner tenants create` output:\n{out}")
            key = found.group(0)
            stderr = tmp / "server.stderr"

            proc = spawn_server(port, env, stderr, core)
            _live.append(proc)
            server = Server(
                url=f"http://127.0.0.1:{port}",
                key=key,
                approver=approver.group(0),
                pid=proc.pid,
                stderr=stderr,
                database=kind,
            )
            try:
                await wait_ready(server, proc)
                yield server
            finally:
                _stop_process(proc)
                problems = server.stderr_problems()
                if proc.returncode not in (0, -signal.SIGTERM) or problems:
                    print(
                        f"\n!! {kind} server exited with {proc.returncode}; "
                        f"{len(problems)} error line(s) on its stderr. Last 60 lines:"
                    )
                    tail = stderr.read_text(errors="replace").splitlines()[-60:]
                    print("\n".join("   | " + ln for ln in tail))


async def wait_ready(server: Server, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    async with httpx.AsyncClient(base_url=server.url, timeout=2) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"the server exited with {proc.returncode} while starting:\n"
                    + server.stderr.read_text(errors="replace")[-4000:]
                )
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get("/readyz")).status_code == 200:
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError(
        "the server did not become ready within 60 s:\n" + server.stderr.read_text(errors="replace")[-4000:]
    )


# --- the load -----------------------------------------------------------------------------


class Load:
    """The requests an agent and a person make, on one keep-alive client (or the person's
    decision on a client of its own: another replica, in bench/replicas.py)."""

    def __init__(self, client: Client, key: str, approver: str, person: Client | None = None) -> None:
        self.client = client
        self.person = person if person is not None else client
        self.headers = {"Authorization": f"Bearer {key}"}
        self.approver = {"Authorization": f"Bearer {approver}"}
        self.run = secrets.token_hex(4)
        self.counter = 0

    def _body(self) -> dict[str, Any]:
        self.counter += 1
        n = self.counter
        return {
            "executionId": f"run_{self.run}_{n}",
            "toolCallId": f"call_{n}",
            "toolName": TOOL,
            "parameters": {
                "orderId": f"ord_{n}",
                "amountCents": 12900,
                "cardToken": "tok_x",
                "note": "bench",
            },
            "reason": "benchmark",
            "surface": {"type": "dashboard", "userId": USER},
        }

    async def create(self) -> str:
        r = await self.client.request("POST", "/v1/approvals", json=self._body(), headers=self.headers)
        body = _expect(r, 201, "create")
        if body.get("status") != "pending":
            raise Failure(f"create: status {body.get('status')!r}, wanted pending")
        approval_id: str = body["approvalId"]
        return approval_id

    async def round_trip(self) -> tuple[float, float]:
        """One agent/person round trip; returns (round trip seconds, notify seconds)."""
        t0 = time.perf_counter()
        approval_id = await self.create()
        on_wire = asyncio.Event()
        poll = asyncio.create_task(
            self.client.request(
                "GET", f"/v1/approvals/{approval_id}?wait=30", headers=self.headers, on_wire=on_wire
            )
        )
        try:
            if not on_wire.is_set():
                wire = asyncio.create_task(on_wire.wait())
                await asyncio.wait({poll, wire}, return_when=asyncio.FIRST_COMPLETED)
                wire.cancel()
            r = await self.person.request(
                "POST",
                f"/v1/approvals/{approval_id}/decision",
                json={"decision": "approve", "userId": USER, "comment": "ok"},
                headers=self.approver,
            )
            t_decided = time.perf_counter()
            body = _expect(r, 200, "decision")
            if body.get("status") != "approved":
                raise Failure(f"decision: status {body.get('status')!r}")
            answer = _expect(await poll, 200, "long-poll")
        finally:
            if not poll.done():
                poll.cancel()
                with contextlib.suppress(BaseException):
                    await poll
        t_end = time.perf_counter()
        if answer.get("status") != "approved":
            raise Failure(f"long-poll: status {answer.get('status')!r}, wanted approved")
        if not answer.get("grant"):
            raise Failure("long-poll: approved without a grant")
        return t_end - t0, max(0.0, t_end - t_decided)


async def attempt(res: PhaseResult, op: Awaitable[tuple[float, float] | None]) -> None:
    """Await one operation and record it in `res`: its latency (and notify, when it reports
    its own timing), or its error."""
    s = time.perf_counter()
    try:
        timing = await op
    except Failure as exc:
        res.errors[str(exc)] += 1
        return
    except Exception as exc:
        res.errors[f"{type(exc).__name__}: {exc}"[:120]] += 1
        return
    res.ok += 1
    if timing is None:
        res.latencies.append(time.perf_counter() - s)
    else:
        res.latencies.append(timing[0])
        res.notify.append(timing[1])


async def drain(res: PhaseResult, tasks: Collection[asyncio.Task[None]], within: float) -> None:
    """Wait up to `within` seconds for `tasks`; those still running are cancelled and counted
    as errors."""
    if not tasks:
        return
    _, pending = await asyncio.wait(tasks, timeout=within)
    for task in pending:
        task.cancel()
    if pending:
        res.errors[f"still running {DRAIN_SECONDS:.0f} s after the phase ended"] += len(pending)
        await asyncio.gather(*pending, return_exceptions=True)


class Meter:
    """The clock and the CPU counters at a phase's start; `stop` fills in the phase's rates."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.t0 = time.perf_counter()
        self.server = cpu_seconds(pid)
        self.client = time.process_time()
        self.busy = machine_busy_seconds()

    def stop(self, res: PhaseResult) -> None:
        res.elapsed = time.perf_counter() - self.t0
        res.server_cpu = (cpu_seconds(self.pid) - self.server) / res.elapsed
        res.client_cpu = (time.process_time() - self.client) / res.elapsed
        busy = (machine_busy_seconds() - self.busy) / res.elapsed
        res.other_cpu = max(0.0, busy - res.server_cpu - res.client_cpu)


async def run_phase(
    concurrency: int,
    seconds: float,
    max_ops: int,
    pid: int,
    op: Callable[[int], Awaitable[tuple[float, float] | None]],
) -> PhaseResult:
    """Run `op` from `concurrency` workers for `seconds` (and at most `max_ops` times)."""
    res = PhaseResult()
    started = 0
    meter = Meter(pid)
    deadline = meter.t0 + seconds

    async def worker(i: int) -> None:
        nonlocal started
        while time.perf_counter() < deadline and started < max_ops:
            started += 1
            await attempt(res, op(i))

    tasks = [asyncio.create_task(worker(i)) for i in range(concurrency)]
    await drain(res, tasks, seconds + DRAIN_SECONDS)
    meter.stop(res)
    return res


async def other_load(pid: int, seconds: float = 1.0) -> float:
    """Cores used by processes other than the server and this client, over `seconds`."""
    busy0, cpu0, proc0 = machine_busy_seconds(), cpu_seconds(pid), time.process_time()
    await asyncio.sleep(seconds)
    busy = machine_busy_seconds() - busy0
    return max(0.0, (busy - (cpu_seconds(pid) - cpu0) - (time.process_time() - proc0)) / seconds)


async def wait_quiet(pid: int, max_wait: float) -> None:
    """Wait up to `max_wait` s for other jobs to leave the machine; say so if they don't."""
    deadline = time.monotonic() + max_wait
    while True:
        other = await other_load(pid)
        if other < 0.2:
            return
        if time.monotonic() >= deadline:
            print(f"   (other processes are using {other:.0%} of a core; measuring anyway)")
            return
        await asyncio.sleep(1.0)


Op = Callable[[int], Awaitable[tuple[float, float] | None]]


def per_worker(loads: list[Load], fn: Callable[[Load], Awaitable[tuple[float, float] | None]]) -> Op:
    """Worker i runs `fn` on its own client `loads[i]`."""
    return lambda i: fn(loads[i])


async def create_only(load: Load) -> None:
    await load.create()
    return None


@contextlib.asynccontextmanager
async def py_spy(pid: int, out: str, seconds: float) -> AsyncIterator[None]:
    """Sample the server with py-spy while the body runs (raw folded stacks in `out`)."""
    exe = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(PYTHON).parent))
    if exe is None:
        print(f"   (py-spy not found; `{PYTHON} -m pip install py-spy` to profile)")
        yield
        return
    proc = await asyncio.create_subprocess_exec(
        exe,
        "record",
        "--pid",
        str(pid),
        "--format",
        "raw",
        "--output",
        out,
        "--duration",
        str(max(1, int(seconds))),
        "--rate",
        "250",
        "--subprocesses",
        "--threads",
        "--gil",  # only the thread holding the GIL: Python CPU time, never an idle thread
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        await asyncio.sleep(0.5)  # let py-spy attach
        yield
    finally:
        try:
            _, err = await asyncio.wait_for(proc.communicate(), 30)
            print(
                f"   py-spy wrote {out}"
                if proc.returncode == 0
                else f"   py-spy failed ({proc.returncode}): {err.decode(errors='replace')[-500:]}"
            )
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def bench_database(
    kind: str, args: argparse.Namespace, cores: tuple[int | None, int | None]
) -> list[Level]:
    levels: list[Level] = []
    sync = {"COSIGNER_SQLITE_SYNCHRONOUS": args.sqlite_synchronous} if kind == "sqlite" else {}
    if kind == "postgres" and args.pool_size is not None:
        sync["COSIGNER_DATABASE_POOL_SIZE"] = str(args.pool_size)
    async with running_server(kind, args.pg_admin, cores[0], args.server_log_level, extra_env=sync) as server:
        print(
            f"\n== {kind}: server pid {server.pid} on {server.url}, pinned to core "
            f"{cores[0]}; client on core {cores[1]}"
        )
        for c in args.concurrency:
            async with contextlib.AsyncExitStack() as stack:

                def client(limit: int) -> Client:
                    made = make_client(args.client, server.url, limit=limit, timeout=60.0)
                    stack.push_async_callback(made.aclose)
                    return made

                if args.pool == "shared":
                    shared = client(2 * c + 4)
                    loads = [Load(shared, server.key, server.approver) for _ in range(c)]
                else:  # one small keep-alive pool per agent/person pair
                    loads = [Load(client(2), server.key, server.approver) for _ in range(c)]
                await wait_quiet(server.pid, args.wait_quiet)
                # Warm up every connection and the server's caches; not measured.
                await run_phase(c, 0.5, 2 * c, server.pid, per_worker(loads, Load.round_trip))
                create = await run_phase(
                    c, args.seconds, args.max_ops, server.pid, per_worker(loads, create_only)
                )
                profile = bool(args.py_spy) and kind == args.profile_db and c == args.profile_concurrency
                if profile:
                    await stack.enter_async_context(py_spy(server.pid, args.py_spy, args.seconds))
                rt = await run_phase(
                    c, args.seconds, args.max_ops, server.pid, per_worker(loads, Load.round_trip)
                )
            level = Level(c, create, rt)
            levels.append(level)
            print_row(level)
        problems = server.stderr_problems()
        if problems:
            print(f"   server stderr has {len(problems)} error line(s); first 5:")
            for ln in problems[:5]:
                print("   | " + ln)
    return levels


# --- output -------------------------------------------------------------------------------

HEADER = (
    f"{'conc':>5} {'creates/s':>10} {'rt/s':>8} {'rt p50':>8} {'rt p99':>8} "
    f"{'notify p50':>10} {'notify p99':>10} {'errors':>7} {'srv cpu':>8} {'cli cpu':>8} "
    f"{'other cpu':>9} {'srv/create':>10} {'srv/rt':>7} {'rt/s@1core':>10}"
)
UNITS = (
    f"{'':>5} {'':>10} {'':>8} {'ms':>8} {'ms':>8} {'ms':>10} {'ms':>10} {'':>7} "
    f"{'% core':>8} {'% core':>8} {'% core':>9} {'cpu ms':>10} {'cpu ms':>7} "
    f"{'(projected)':>10}"
)


def print_header() -> None:
    print(HEADER)
    print(UNITS)


def print_row(level: Level) -> None:
    c, rt = level.create, level.roundtrip
    ms = 1000.0
    print(
        f"{level.concurrency:>5} {c.rate:>10.0f} {rt.rate:>8.0f} "
        f"{percentile(rt.latencies, 50) * ms:>8.1f} {percentile(rt.latencies, 99) * ms:>8.1f} "
        f"{percentile(rt.notify, 50) * ms:>10.1f} {percentile(rt.notify, 99) * ms:>10.1f} "
        f"{c.error_count + rt.error_count:>7} {rt.server_cpu:>8.0%} {rt.client_cpu:>8.0%} "
        f"{rt.other_cpu:>9.0%} {c.server_ms_per_op:>10.2f} {rt.server_ms_per_op:>7.2f} "
        f"{1000.0 / rt.server_ms_per_op:>10.0f}",
        flush=True,
    )
    for phase, res in (("create", c), ("round trip", rt)):
        for what, n in res.errors.most_common():
            print(f"      ! {phase}: {n} x {what}")


def print_summary(results: dict[str, list[Level]], skipped: dict[str, str]) -> None:
    print("\n" + "=" * len(HEADER))
    print(
        "Summary (creates/s from the create phase; rt = full agent/person round trip; "
        "notify = decision response -> long-poll response; errors = create + round-trip "
        "phases; cpu = share of one core during the round-trip phase: srv = the Cosigner "
        "server, cli = this client, other = every other process (PostgreSQL, other jobs on "
        "the machine); srv/create, srv/rt = server CPU ms per create / per round trip; "
        "rt/s@1core = 1000 / srv/rt, the rate one fully available core would sustain "
        "if the server stays CPU-bound)"
    )
    for kind, levels in results.items():
        print(f"\n{kind}")
        print_header()
        for level in levels:
            print_row(level)
    for kind, why in skipped.items():
        print(f"\n{kind}: NOT RUN: {why}")
    sqlite = results.get("sqlite")
    print(
        f"\nBar: >= {BAR_RT_PER_SECOND:.0f} round trips/s on one core with SQLite, "
        f"and no errors at {BAR_CONCURRENCY} concurrent."
    )
    if not sqlite:
        print("  not checked: SQLite was not run")
        return
    best = max(sqlite, key=lambda lv: lv.roundtrip.rate)
    verdict = "MET" if best.roundtrip.rate >= BAR_RT_PER_SECOND else "MISSED"
    print(f"  throughput: {verdict}: best {best.roundtrip.rate:.0f} rt/s (at concurrency {best.concurrency})")
    at_bar = [lv for lv in sqlite if lv.concurrency == BAR_CONCURRENCY]
    if at_bar:
        lv = at_bar[0]
        errs = lv.create.error_count + lv.roundtrip.error_count
        print(
            f"  at {BAR_CONCURRENCY}: {lv.roundtrip.rate:.0f} rt/s, {errs} errors: "
            f"{'MET' if errs == 0 else 'MISSED'}"
        )
    else:
        print(f"  errors at {BAR_CONCURRENCY}: not checked (that level was not run)")
    busy = [lv for levels in results.values() for lv in levels if lv.roundtrip.client_cpu > 0.9]
    if busy:
        print(
            "  note: the client used >90% of its core at concurrency "
            f"{sorted({lv.concurrency for lv in busy})}; there the client may be the limit."
        )
    noisy = [lv for lv in sqlite if lv.roundtrip.other_cpu > 0.2]
    if noisy:
        print(
            "  note: other processes used >20% of a core during SQLite levels "
            f"{[lv.concurrency for lv in noisy]}; those numbers are lower than on a quiet "
            "machine."
        )


def machine() -> str:
    affinity = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    try:
        model = next(
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        )
    except (OSError, StopIteration):
        model = platform.processor() or "unknown CPU"
    loop = "uvloop" if _has("uvloop") else "asyncio"
    http = "httptools" if _has("httptools") else "h11"
    return (
        f"machine: {os.cpu_count()} cores (usable {affinity}), {model}; "
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.system()} {platform.release()}; server: uvicorn + {loop} + {http}, "
        f"1 worker; client: {client_version(_CLIENT[0])} HTTP/1.1 keep-alive"
    )


_CLIENT = ["raw"]


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def pick_cores() -> tuple[int | None, int | None]:
    """(server core, client core); None when the machine cannot pin."""
    if not hasattr(os, "sched_setaffinity"):
        return None, None
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) == 1:
        return usable[0], usable[0]
    return usable[0], usable[1]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    p.add_argument("--concurrency", default="1,16,64,256", help="comma-separated concurrency levels")
    p.add_argument("--seconds", type=float, default=5.0, help="duration of each phase")
    p.add_argument("--max-ops", type=int, default=200_000, help="at most this many operations per phase")
    p.add_argument(
        "--pg-admin",
        default=os.environ.get("COSIGNER_BENCH_PG", DEFAULT_PG_ADMIN),
        help="libpq URL of a PostgreSQL database to run CREATE/DROP DATABASE from",
    )
    p.add_argument(
        "--server-log-level",
        default="INFO",
        help="COSIGNER_LOG_LEVEL for the server (INFO is the shipped default)",
    )
    p.add_argument(
        "--sqlite-synchronous",
        choices=["NORMAL", "FULL"],
        default="NORMAL",
        help="COSIGNER_SQLITE_SYNCHRONOUS for a SQLite server (NORMAL is the shipped default)",
    )
    p.add_argument(
        "--py-spy",
        metavar="FILE",
        default=None,
        help="record a py-spy profile (raw folded stacks) of the --profile-db server "
        "during the round-trip phase at --profile-concurrency; only the thread "
        "holding the GIL is sampled, so the stacks' shares are Python CPU time "
        "(time in C with the GIL released, e.g. SQLite itself, is not seen)",
    )
    p.add_argument("--profile-concurrency", type=int, default=64)
    p.add_argument(
        "--pool-size",
        type=int,
        default=None,
        help="COSIGNER_DATABASE_POOL_SIZE for the PostgreSQL server (default: the server's own, 20)",
    )
    p.add_argument(
        "--profile-db",
        choices=["sqlite", "postgres"],
        default="sqlite",
        help="the server --py-spy profiles (the other runs unprofiled)",
    )
    p.add_argument(
        "--wait-quiet",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="before each level, wait up to this long for other processes to "
        "stop using the CPU (a shared machine)",
    )
    p.add_argument(
        "--pool",
        choices=["per-worker", "shared"],
        default="per-worker",
        help="per-worker: one client (2 keep-alive connections) per "
        "agent/person pair; shared: one client whose pool holds 2*c+4 "
        "connections (httpcore's pool costs grow with its size)",
    )
    p.add_argument(
        "--client",
        choices=CLIENTS,
        default="raw",
        help="raw: minimal asyncio HTTP/1.1 client (cheapest, the default); "
        "aiohttp: ClientSession + TCPConnector; httpx: AsyncClient",
    )
    p.add_argument(
        "--slack",
        action="store_true",
        help="run the Slack click-to-ack benchmark (bench/clicks.py) instead; "
        "put --slack first, the other options are then clicks.py's",
    )
    args = p.parse_args(argv)
    try:
        args.concurrency = [int(c) for c in args.concurrency.split(",") if c.strip()]
    except ValueError:
        p.error("--concurrency takes whole numbers, e.g. 1,16,64,256")
    if not args.concurrency or min(args.concurrency) < 1:
        p.error("--concurrency needs at least one level >= 1")
    if args.seconds <= 0 or args.seconds > 600:
        p.error("--seconds must be in (0, 600]")
    return args


async def main_async(args: argparse.Namespace) -> int:
    task = asyncio.current_task()
    if task is not None:  # SIGTERM: unwind like Ctrl-C, so every cleanup step runs
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    cores = pick_cores()
    _CLIENT[0] = args.client
    print(machine())
    if cores[1] is not None:
        os.sched_setaffinity(0, {cores[1]})
    if cores[0] == cores[1]:
        print("warning: one usable core; the server and the client share it")
    print(
        f"levels {args.concurrency}, {args.seconds:g} s per phase, server log level {args.server_log_level}"
    )
    print_header()
    kinds = ["sqlite", "postgres"] if args.db == "both" else [args.db]
    results: dict[str, list[Level]] = {}
    skipped: dict[str, str] = {}
    for kind in kinds:
        if kind == "postgres":
            why = await postgres_unreachable(args.pg_admin)
            if why:
                skipped[kind] = why
                print(f"\n== postgres: NOT RUN: {why}")
                continue
        results[kind] = await bench_database(kind, args, cores)
    print_summary(results, skipped)
    failed = any(
        lv.create.error_count or lv.roundtrip.error_count for levels in results.values() for lv in levels
    )
    return 1 if failed else 0


async def postgres_unreachable(dsn: str) -> str | None:
    try:
        import asyncpg

        conn = await asyncpg.connect(dsn, timeout=5)
        await conn.close()
    except Exception as exc:
        return f"cannot connect to {dsn} ({type(exc).__name__}: {exc}); pass --pg-admin"
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--slack" in argv:
        import clicks

        return clicks.main([a for a in argv if a != "--slack"])
    if "--contract" in argv:
        import contract_trips

        return contract_trips.main([a for a in argv if a != "--contract"])
    args = parse_args(argv)
    with _event_loop_policy():
        try:
            return asyncio.run(main_async(args))
        except (KeyboardInterrupt, asyncio.CancelledError):
            print("\ninterrupted; the server was stopped and the database dropped", file=sys.stderr)
            return 130
        finally:
            _stop_all()


@contextlib.contextmanager
def _event_loop_policy() -> Iterator[None]:
    try:
        import uvloop
    except ImportError:
        yield
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    try:
        yield
    finally:
        asyncio.set_event_loop_policy(None)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())

"""Two `cosigner serve` replicas on one PostgreSQL database: do they add, not share?

    .venv/bin/python bench/replicas.py [--concurrency 2,16,64] [--seconds 5] [--race 40]
                                       [--pg-admin postgresql://postgres@127.0.0.1:5432/test]

One fresh PostgreSQL database (`cosigner_bench_<random>`, dropped on exit), migrated and
given a tenant with the operator's own commands; replica A pinned to the first core and
replica B to the second, both `cosigner serve` with the same secret and database, and the
policy of bench/roundtrip.py (one dashboard-approved danger tool). The client (this
process) runs on the second core too. At each concurrency level, three phases of round
trips (create, long-poll, decision, as bench/roundtrip.py makes them):

- single: half the workers, every round trip on A, B idle: A's server CPU per round trip
          at the load each replica carries in split, the reference.
- split:  all the workers, half on A and half on B, each round trip on one replica: each
          replica's CPU per round trip (the target: at most 1.1x single's).
- cross:  the agent creates and long-polls on one replica, the person decides on the
          other (alternating): the long-poll wakes by the other replica's NOTIFY, so
          notify (decision response -> long-poll response) is the cross-replica
          wake-up latency (the target: 5 ms p50); CPU per round trip of A and B together.

With `--rate R1,R2` it then runs the same three phases paced instead of as fast as the
workers go: round trips start at a fixed rate (R per second on each replica that serves;
in single only A serves, at R; in split and cross both serve, 2R in all), whatever the
answers' latency. The closed-loop levels above fill both cores of a small machine, where
the two replicas, PostgreSQL and the client take turns on the same cores and each
process's CPU per request grows with the contention, not with anything one replica does
for the other; a paced level below saturation compares each replica's CPU per round trip
at the same work per replica with the cores not contended, which isolates what a second
replica costs the first (its NOTIFYs). The machine's busy cores are printed per phase.

Then a race: `--race` approvals, each decided by 8 concurrent decision POSTs spread over
both replicas: exactly one must win (200) and the others get 409 ALREADY_DECIDED.

Server CPU is read from /proc (user + system) per process, so it holds on a shared machine
where wall-clock rates do not. Exit status: 0 when no request failed and every race had
exactly one winner, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import re
import secrets
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import roundtrip as rt
from httpclients import Client, make_client

DECIDERS = 8  # concurrent decision POSTs per approval in the race


@dataclass
class Replica:
    name: str
    server: rt.Server


async def connections(admin_dsn: str, url: str) -> tuple[int, int]:
    """(connections to the bench database, of them LISTEN connections), from pg_stat_activity."""
    import asyncpg

    name = url.rsplit("/", 1)[1]
    admin = await asyncpg.connect(admin_dsn, timeout=10)
    try:
        row = await admin.fetchrow(
            "SELECT count(*), count(*) FILTER (WHERE query LIKE 'LISTEN %') "
            "FROM pg_stat_activity WHERE datname = $1",
            name,
        )
    finally:
        await admin.close()
    return int(row[0]), int(row[1])


async def headroom(admin_dsn: str) -> tuple[int, int, int]:
    """(max_connections, superuser_reserved_connections, connections open now) of the server."""
    import asyncpg

    admin = await asyncpg.connect(admin_dsn, timeout=10)
    try:
        most = int(await admin.fetchval("SHOW max_connections"))
        reserved = int(await admin.fetchval("SHOW superuser_reserved_connections"))
        open_now = int(
            await admin.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
            )
        )
    finally:
        await admin.close()
    return most, reserved, open_now


def most_held(pool_size: int) -> int:
    """The connections one replica holds at the most: its pool, as many again under a burst
    (`max_overflow`), and its LISTEN connection."""
    return 2 * pool_size + 1


@dataclass
class Replicas:
    a: Replica
    b: Replica
    url: str  # the database both serve


@contextlib.asynccontextmanager
async def two_replicas(admin_dsn: str, log_level: str, pool_size: int) -> AsyncIterator[Replicas]:
    """Migrate a fresh database, create a tenant, start replicas A and B on it."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_setaffinity") else []
    with tempfile.TemporaryDirectory(prefix="cosigner-replicas-") as tmp_name:
        tmp = Path(tmp_name)
        async with rt.postgres_database(admin_dsn) as url:
            policy = tmp / "policy.toml"
            policy.write_text(rt.POLICY)
            env = {
                k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "TWILIO_", "COSIGNER_"))
            }
            env.update(
                {
                    "COSIGNER_DATABASE_URL": url,
                    "COSIGNER_POLICY": str(policy),
                    "COSIGNER_SECRET": secrets.token_urlsafe(32),
                    "COSIGNER_LOG_LEVEL": log_level,
                    "COSIGNER_DATABASE_POOL_SIZE": str(pool_size),
                    "PYTHONUNBUFFERED": "1",
                }
            )
            rt.cosigner(["migrate"], env)
            out = rt.cosigner(["tenants", "create", "bench"], env)
            key, approver = re.search(r"csk_\S+", out), re.search(r"csa_\S+", out)
            if not key or not approver:
                raise RuntimeError(f"no API keys in `cosigner tenants create` output:\n{out}")
            replicas: list[Replica] = []
            procs = []
            try:
                for i, name in enumerate("AB"):
                    port = rt.free_port()
                    own = env | {"COSIGNER_PUBLIC_URL": f"http://127.0.0.1:{port}"}
                    core = cores[i % len(cores)] if cores else None
                    stderr = tmp / f"{name}.stderr"
                    proc = rt.spawn_server(port, own, stderr, core)
                    rt._live.append(proc)
                    procs.append(proc)
                    server = rt.Server(
                        f"http://127.0.0.1:{port}",
                        key.group(0),
                        approver.group(0),
                        proc.pid,
                        stderr,
                        "postgres",
                    )
                    await rt.wait_ready(server, proc)
                    replicas.append(Replica(name, server))
                yield Replicas(replicas[0], replicas[1], url)
            finally:
                for proc in procs:
                    rt._stop_process(proc)
                for r in replicas:
                    problems = r.server.stderr_problems()
                    if problems:
                        print(f"!! replica {r.name}: {len(problems)} error line(s) on its stderr; first 5:")
                        print("\n".join("   | " + ln for ln in problems[:5]))


def opened(stack: contextlib.AsyncExitStack, url: str) -> Client:
    """A kept-alive client of `url` for one round trip at a time, closed with `stack`."""
    made = make_client("raw", url, limit=2, timeout=60.0)
    stack.push_async_callback(made.aclose)
    return made


def loads(stack: contextlib.AsyncExitStack, n: int, agent: Replica, person: Replica) -> list[rt.Load]:
    """`n` agent and person pairs: the agent on `agent`'s replica, the person on `person`'s."""
    keys = (agent.server.key, agent.server.approver)
    return [trip(opened(stack, agent.server.url), opened(stack, person.server.url), *keys) for _ in range(n)]


def trip(agent: Client, person: Client, key: str, approver: str) -> rt.Load:
    """One agent (on `agent`'s replica) and one person (on `person`'s replica)."""
    return rt.Load(agent, key, approver, person=person)


def of(trips: list[rt.Load]) -> rt.Op:
    """Worker i runs round trips on `trips[i]`."""

    async def op(i: int) -> tuple[float, float]:
        return await trips[i].round_trip()

    return op


@dataclass
class Phase:
    name: str
    result: rt.PhaseResult
    cpu_ms: dict[str, float]  # per replica: CPU ms per round trip it served (or shared)


def cpu_per_trip(
    name: str, reps: tuple[Replica, Replica], cpu0: dict[str, float], served: dict[str, float], done: int
) -> dict[str, float]:
    """Each replica's CPU ms per round trip it served (`served`: its share of the `done`), or,
    in cross, where each round trip is served by both, their CPU together."""
    if name == "cross":
        total = sum(rt.cpu_seconds(r.server.pid) for r in reps) - sum(cpu0.values())
        return {"A+B": 1000.0 * total / done if done else float("nan")}
    cpu_ms = {}
    for r in reps:
        used = rt.cpu_seconds(r.server.pid) - cpu0[r.name]
        share = served[r.name] * done
        cpu_ms[r.name] = 1000.0 * used / share if share else float("nan")
    return cpu_ms


async def phase(
    name: str, trips: list[rt.Load], served: dict[str, float], reps: tuple[Replica, Replica], args: Any
) -> Phase:
    """Run round trips for `args.seconds`; `served` is each replica's share of the work."""
    cpu0 = {r.name: rt.cpu_seconds(r.server.pid) for r in reps}
    res = await rt.run_phase(len(trips), args.seconds, args.max_ops, reps[0].server.pid, of(trips))
    return Phase(name, res, cpu_per_trip(name, reps, cpu0, served, res.ok))


async def paced_run(pid: int, rate: float, seconds: float, groups: list[list[rt.Load]]) -> rt.PhaseResult:
    """Start one round trip every 1/`rate` s for `seconds`, taking the groups in turn (one per
    replica, so each serves its share) and in each the next free `Load` (one round trip at a
    time each); a start that finds its group's clients all busy is an error ("no free
    client": the level is past what the replicas serve, lower the rate)."""
    res = rt.PhaseResult()
    free = [list(g) for g in groups]
    running: set[asyncio.Task[None]] = set()
    meter = rt.Meter(pid)

    async def one(load: rt.Load, back: list[rt.Load]) -> None:
        try:
            await rt.attempt(res, load.round_trip())
        finally:
            back.append(load)

    for k in range(int(rate * seconds)):
        delay = meter.t0 + k / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        group = free[k % len(free)]
        if not group:
            res.errors["no free client: the replicas are behind the rate"] += 1
            continue
        task = asyncio.create_task(one(group.pop(), group))
        running.add(task)
        task.add_done_callback(running.discard)
    await rt.drain(res, set(running), rt.DRAIN_SECONDS)
    meter.stop(res)
    return res


async def paced_phase(
    name: str,
    rate: float,
    groups: list[list[rt.Load]],
    served: dict[str, float],
    reps: tuple[Replica, Replica],
    args: Any,
) -> Phase:
    """`phase`, paced at `rate` round trips per second in all."""
    cpu0 = {r.name: rt.cpu_seconds(r.server.pid) for r in reps}
    res = await paced_run(reps[0].server.pid, rate, args.seconds, groups)
    return Phase(name, res, cpu_per_trip(name, reps, cpu0, served, res.ok))


async def race(reps: tuple[Replica, Replica], approvals: int, client_for: dict[str, Client]) -> Counter[str]:
    """Create approvals on A; decide each with DECIDERS concurrent POSTs over A and B."""
    a = reps[0]
    load = rt.Load(client_for["A"], a.server.key, a.server.approver)
    outcomes: Counter[str] = Counter()

    async def decide(approval_id: str, i: int) -> int:
        client = client_for["AB"[i % 2]]
        body = {"decision": "approve" if i % 3 else "deny", "userId": rt.USER, "comment": f"racer {i}"}
        r = await client.request(
            "POST", f"/v1/approvals/{approval_id}/decision", json=body, headers=load.approver
        )
        return r.status

    for _ in range(approvals):
        approval_id = await load.create()
        statuses = await asyncio.gather(*(decide(approval_id, i) for i in range(DECIDERS)))
        wins = statuses.count(200)
        outcomes["exactly one winner" if wins == 1 else f"{wins} winners"] += 1
        outcomes.update(f"HTTP {s}" for s in statuses)
    return outcomes


def row(level: int, p: Phase, *, machine: bool = False) -> str:
    """One phase's line; `machine` adds the busy cores of the whole machine (paced phases)."""
    r = p.result
    ms = 1000.0
    cpu = ", ".join(f"{k} {v:.2f}" for k, v in p.cpu_ms.items())
    busy = f" {r.server_cpu + r.client_cpu + r.other_cpu:>8.2f}" if machine else ""
    return (
        f"{level:>5} {p.name:>6} {r.rate:>7.0f} {rt.percentile(r.latencies, 50) * ms:>8.1f} "
        f"{rt.percentile(r.latencies, 99) * ms:>8.1f} {rt.percentile(r.notify, 50) * ms:>10.1f} "
        f"{rt.percentile(r.notify, 99) * ms:>10.1f} {r.error_count:>7}{busy}   {cpu}"
    )


HEADER = (
    f"{'conc':>5} {'phase':>6} {'rt/s':>7} {'rt p50':>8} {'rt p99':>8} {'notify p50':>10} "
    f"{'notify p99':>10} {'errors':>7}   server CPU ms per round trip\n"
    f"{'':>5} {'':>6} {'':>7} {'ms':>8} {'ms':>8} {'ms':>10} {'ms':>10}"
)


async def main_async(args: argparse.Namespace) -> int:
    task = asyncio.current_task()
    if task is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    why = await rt.postgres_unreachable(args.pg_admin)
    if why:
        print(f"PostgreSQL: NOT RUN: {why}")
        return 1
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_setaffinity") else []
    print(rt.machine())
    most, reserved, open_now = await headroom(args.pg_admin)
    needed = 2 * most_held(args.pool_size) + 1  # and this process's connection for pg_stat_activity
    room = most - reserved - open_now
    print(
        f"PostgreSQL max_connections {most} ({reserved} reserved), {open_now} open by other clients: "
        f"room for {room}; two replicas at COSIGNER_DATABASE_POOL_SIZE={args.pool_size} hold at "
        f"most 2 x {most_held(args.pool_size)}, and the bench 1: {needed}"
    )
    if needed > room:
        print(
            f"!! not enough connections left: expect `too many clients already`; lower --pool-size "
            f"to {max(1, (room - 3) // 4)} or less, or wait for the other clients to finish"
        )
    failed = False
    async with two_replicas(args.pg_admin, args.server_log_level, args.pool_size) as pair:
        a, b = reps = (pair.a, pair.b)
        if len(cores) > 1:
            os.sched_setaffinity(0, {cores[1]})
        print(f"replica A pid {a.server.pid}, replica B pid {b.server.pid}; {args.seconds:g} s per phase")
        print(HEADER)
        for c in args.concurrency:
            async with contextlib.AsyncExitStack() as stack:
                client = functools.partial(opened, stack)
                key, approver = a.server.key, a.server.approver
                single = [trip(cl, cl, key, approver) for cl in (client(a.server.url) for _ in range(c // 2))]
                split = [
                    trip(cl, cl, key, approver)
                    for cl in (client((a if i % 2 == 0 else b).server.url) for i in range(c))
                ]
                cross = []
                for i in range(c):
                    here, there = (a, b) if i % 2 == 0 else (b, a)
                    cross.append(trip(client(here.server.url), client(there.server.url), key, approver))
                # Warm up every connection on both replicas; not measured.
                for trips in (split, cross):
                    await rt.run_phase(c, 0.5, 2 * c, a.server.pid, of(trips))
                phases = [
                    await phase("single", single, {"A": 1.0, "B": 0.0}, reps, args),
                    await phase("split", split, {"A": 0.5, "B": 0.5}, reps, args),
                    await phase("cross", cross, {"A": 0.5, "B": 0.5}, reps, args),
                ]
                for p in phases:
                    print(row(c, p))
                    for err, n in p.result.errors.most_common(5):
                        print(f"      {n} x {err}")
                    failed = failed or p.result.error_count > 0
                total, _listening = await connections(args.pg_admin, pair.url)
                print(f"      connections to the database after the level (both replicas' pools): {total}")
                single_ms = phases[0].cpu_ms["A"]
                worst = max(phases[1].cpu_ms.values())
                print(
                    f"      split / single: {worst / single_ms:.2f}x (target <= 1.10); "
                    f"cross notify p50 {rt.percentile(phases[2].result.notify, 50) * 1000:.1f} ms "
                    "(target <= 5)"
                )
        if args.rate:
            print(
                "\npaced: R round trips per second on each replica that serves (single: A at R; "
                "split and cross: 2R in all); machine = busy cores of 2 during the phase"
            )
            print(HEADER.replace("errors   ", "errors  machine   ", 1))
        for per_replica in args.rate:
            async with contextlib.AsyncExitStack() as stack:
                # Clients for a second of round trips at the rate: far more than are ever busy
                # at once below saturation.
                clients_of = functools.partial(loads, stack, max(8, int(per_replica)))
                alone = [clients_of(a, a)]
                halves = [clients_of(a, a), clients_of(b, b)]
                crossed = [clients_of(a, b), clients_of(b, a)]
                for groups in (halves, crossed):
                    warm = [t for g in groups for t in g]
                    await rt.run_phase(len(warm), 0.5, 2 * len(warm), a.server.pid, of(warm))
                phases = [
                    await paced_phase("single", per_replica, alone, {"A": 1.0, "B": 0.0}, reps, args),
                    await paced_phase("split", 2 * per_replica, halves, {"A": 0.5, "B": 0.5}, reps, args),
                    await paced_phase("cross", 2 * per_replica, crossed, {"A": 0.5, "B": 0.5}, reps, args),
                ]
                for p in phases:
                    print(row(int(per_replica), p, machine=True))
                    for err, count in p.result.errors.most_common(5):
                        print(f"      {count} x {err}")
                    failed = failed or p.result.error_count > 0
                single_ms = phases[0].cpu_ms["A"]
                worst = max(phases[1].cpu_ms.values())
                print(
                    f"      paced at {per_replica:g}/s per replica: split / single {worst / single_ms:.2f}x "
                    f"(target <= 1.10); cross notify p50 "
                    f"{rt.percentile(phases[2].result.notify, 50) * 1000:.1f} ms (target <= 5)"
                )
        async with contextlib.AsyncExitStack() as stack:
            clients: dict[str, Client] = {}
            for r in reps:
                clients[r.name] = make_client("raw", r.server.url, limit=DECIDERS, timeout=60.0)
                stack.push_async_callback(clients[r.name].aclose)
            outcomes = await race(reps, args.race, clients)
        print(f"race: {args.race} approvals x {DECIDERS} concurrent decisions over A and B: {dict(outcomes)}")
        total, listening = await connections(args.pg_admin, pair.url)
        print(
            f"connections to the database now: {total}, of them LISTEN: {listening} "
            "(one per replica expected)"
        )
        failed = failed or listening != 2
        failed = failed or outcomes["exactly one winner"] != args.race
    return 1 if failed else 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument(
        "--concurrency",
        default="2,16,64",
        help="comma-separated levels: workers over both replicas (single runs half of them on A)",
    )
    p.add_argument("--seconds", type=float, default=5.0, help="duration of each phase")
    p.add_argument("--max-ops", type=int, default=200_000, help="at most this many round trips per phase")
    p.add_argument("--race", type=int, default=40, help="approvals decided concurrently over both replicas")
    p.add_argument(
        "--pg-admin",
        default=os.environ.get("COSIGNER_BENCH_PG", rt.DEFAULT_PG_ADMIN),
        help="libpq URL of a PostgreSQL database to run CREATE/DROP DATABASE from",
    )
    p.add_argument(
        "--pool-size",
        type=int,
        default=8,
        help="COSIGNER_DATABASE_POOL_SIZE of each replica: each holds at most 2 x this + 1 "
        "connections (see docs/scaling.md); 8 fits both beside other clients of a default "
        "max_connections of 100",
    )
    p.add_argument(
        "--rate",
        default="",
        help="comma-separated paced levels: round trips per second on each serving replica "
        "(e.g. 40,80), run after the closed-loop levels; below saturation of the machine",
    )
    p.add_argument("--server-log-level", default="INFO", help="COSIGNER_LOG_LEVEL for both replicas")
    args = p.parse_args(argv)
    try:
        args.rate = [float(r) for r in args.rate.split(",") if r.strip()]
    except ValueError:
        p.error("--rate takes numbers, e.g. 40,80")
    if any(r <= 0 for r in args.rate):
        p.error("--rate levels must be above 0")
    try:
        args.concurrency = [int(c) for c in args.concurrency.split(",") if c.strip()]
    except ValueError:
        p.error("--concurrency takes whole numbers, e.g. 16,64")
    if not args.concurrency or min(args.concurrency) < 2:
        p.error("--concurrency needs levels >= 2 (the workers are split over two replicas)")
    if args.pool_size < 1:
        p.error("--pool-size must be at least 1")
    if args.seconds <= 0 or args.seconds > 600:
        p.error("--seconds must be in (0, 600]")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with rt._event_loop_policy():
        try:
            return asyncio.run(main_async(args))
        except (KeyboardInterrupt, asyncio.CancelledError):
            print("\ninterrupted; the replicas were stopped and the database dropped", file=sys.stderr)
            return 130
        finally:
            rt._stop_all()


if __name__ == "__main__":
    sys.exit(main())

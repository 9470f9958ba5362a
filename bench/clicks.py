"""Slack click-to-ack latency: really signed Approve clicks against a real server process.

    .venv/bin/python bench/clicks.py [--db sqlite|postgres] [--concurrency 1,16,64]
                                     [--seconds 5] [--max-clicks 20000] [--round-size 1024]
                                     [--client raw|aiohttp|httpx] [--py-spy FILE]
    .venv/bin/python bench/roundtrip.py --slack [the same options]

Set-up (all on loopback):
- The Slack emulator (`SlackEmulator.running`, port 0) runs in a helper process pinned to the
  client's core, with one extra read-only route, `/bench/records`, through which this process
  reads the cards (`chat.postMessage`), updates and ephemerals it recorded.
- `cosigner serve` runs as its own process pinned to the other core, with a fresh database,
  SLACK_SIGNING_SECRET, SLACK_BOT_TOKEN, SLACK_APP_ID = the emulator's app, SLACK_API_URL =
  the emulator, and a policy whose tenant `bench` has `slack_team` = the emulator's team.

At each concurrency level it runs rounds until `--seconds` of click time have accumulated:
1. (not timed) create `--round-size` approvals over the API, each with a `slack` surface in
   its own channel (so the per-channel pacing of posts does not throttle delivery) and the
   requester `U0BENCHER` as approver; wait until the emulator holds every card; build one
   Approve click per card, exactly as Slack sends it: a `block_actions` payload
   (`surfaces.slack.interactions.block_actions_payload`, the button read off the recorded
   card), form-encoded and signed with the signing secret (`signed_headers`);
2. (timed) `concurrency` workers, each on its own keep-alive connection, POST those clicks
   to `/slack/events`; click-to-ack = the HTTP response time of one click. The app runs
   Bolt with process_before_response, so the decision is committed before the ack;
3. (not timed) read every clicked approval back over the API: it must be `approved`, by
   U0BENCHER, on the slack surface. Anything else, a non-200 ack, an ack with a body, or an
   ephemeral from the server (a refused click) counts as an error.

CPU is measured over the timed windows only: srv = the server, cli = this process, emu =
the emulator process (it answers the server's chat.update calls during the clicks).
Bounded: at most `--max-clicks` clicks per level, 60 s for cards to arrive, 45 s for
in-flight clicks to drain. Everything started is stopped on exit, Ctrl-C and errors alike.
Exit status 0 when there was no error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent))
import roundtrip as rt
from httpclients import CLIENTS, Client, client_version, make_client

ROOT = rt.ROOT
TEAM = "T0BENCH"
APP_ID = "A0BENCH"
USER = "U0BENCHER"
TOOL = rt.TOOL
SIGNING_SECRET = "bench-slack-signing-" + secrets.token_hex(8)
BOT_TOKEN = "xoxb-bench-" + secrets.token_hex(4)
APPROVE = "cosigner.approve"
# The round-trip benchmark's policy, plus a tenant that owns the emulator's workspace.
POLICY = (
    rt.POLICY
    + f"""
[tenants.bench]
slack_team = "{TEAM}"
"""
)
CARD_WAIT = 60.0
DRAIN = 45.0
SETUP_CONCURRENCY = 32


# --- the emulator, in a helper process ------------------------------------------------------


def emulator_child(team: str, app_id: str) -> int:
    """Serve the Slack emulator until stdin closes or SIGTERM; print its port first."""
    sys.path.insert(0, str(ROOT))
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from surfaces.slack.emulator import SlackEmulator

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)

        def watch_stdin() -> None:
            sys.stdin.read()
            loop.call_soon_threadsafe(stop.set)

        threading.Thread(target=watch_stdin, daemon=True).start()
        async with SlackEmulator.running(team_id=team, app_id=app_id) as emu:

            async def records(request: Request) -> JSONResponse:
                after = int(request.query_params.get("after", "0"))
                eph_after = int(request.query_params.get("eph", "0"))
                msgs, ephs = emu.messages, emu.ephemerals
                new = msgs[after:]
                return JSONResponse(
                    {
                        "next": len(msgs),
                        "eph_next": len(ephs),
                        "posts": [
                            {"channel": m.channel, "ts": m.ts, "blocks": m.blocks}
                            for m in new
                            if m.method == "chat.postMessage"
                        ],
                        "updates": sum(1 for m in new if m.method == "chat.update"),
                        "ephemerals": [
                            {"channel": m.channel, "user": m.user, "text": m.text} for m in ephs[eph_after:]
                        ],
                        "calls": Counter(c[0] for c in emu.calls),
                    }
                )

            emu.app.router.routes.append(Route("/bench/records", records, methods=["GET"]))
            print(json.dumps({"port": emu.port, "api_url": emu.api_url}), flush=True)
            await stop.wait()

    with rt._event_loop_policy():
        asyncio.run(serve())
    return 0


@dataclass
class Emulator:
    proc: subprocess.Popen[bytes]
    port: int
    api_url: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def start_emulator(core: int | None) -> Emulator:
    def pin() -> None:
        if core is not None:
            os.sched_setaffinity(0, {core})

    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [rt.PYTHON, str(Path(__file__).resolve()), "--emulator-child", "--team", TEAM, "--app-id", APP_ID],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        preexec_fn=pin,
        start_new_session=True,
    )
    rt._live.append(proc)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the child prints its port once it serves
    if not line:
        rt._stop_process(proc)
        raise RuntimeError("the Slack emulator process exited before it printed its port")
    info = json.loads(line)
    return Emulator(proc, int(info["port"]), str(info["api_url"]))


# --- clicks ---------------------------------------------------------------------------------


@dataclass
class Card:
    approval_id: str
    channel: str
    ts: str = ""
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class LevelResult:
    concurrency: int
    clicks: int = 0  # acked 200 with an empty body
    elapsed: float = 0.0
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    server_cpu_s: float = 0.0
    client_cpu_s: float = 0.0
    emulator_cpu_s: float = 0.0
    verified: int = 0
    rounds: int = 0
    setup_s: float = 0.0

    @property
    def rate(self) -> float:
        return self.clicks / self.elapsed if self.elapsed > 0 else 0.0

    def share(self, cpu: float) -> float:
        return cpu / self.elapsed if self.elapsed > 0 else float("nan")

    @property
    def server_ms_per_click(self) -> float:
        return 1000 * self.server_cpu_s / self.clicks if self.clicks else float("nan")

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())


class Bench:
    def __init__(self, server: rt.Server, emu: Emulator, args: argparse.Namespace) -> None:
        self.server, self.emu, self.args = server, emu, args
        self.auth = {"Authorization": f"Bearer {server.key}"}
        self.run = secrets.token_hex(3).upper()
        self.n = 0
        self.records_next = 0
        self.eph_next = 0
        self.updates = 0  # chat.update calls seen: cards closed after their decision

    def client(self, limit: int, base: str | None = None) -> Client:
        return make_client(self.args.client, base or self.server.url, limit=limit, timeout=60.0)

    async def records(self, emu_http: Client) -> dict[str, Any]:
        r = await emu_http.request("GET", f"/bench/records?after={self.records_next}&eph={self.eph_next}")
        if r.status != 200:
            raise RuntimeError(f"emulator /bench/records: HTTP {r.status}")
        got: dict[str, Any] = r.json()
        self.records_next, self.eph_next = got["next"], got["eph_next"]
        self.updates += int(got["updates"])
        return got

    async def create(self, api: Client, count: int, errors: Counter[str]) -> list[Card]:
        cards: list[Card] = []
        todo = deque(range(count))

        async def worker() -> None:
            while todo:
                todo.popleft()
                self.n += 1
                n = self.n
                channel = f"C{self.run}{n:07d}"
                body = {
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
                    "surface": {"type": "slack", "teamId": TEAM, "channelId": channel, "userId": USER},
                }
                try:
                    r = await api.request("POST", "/v1/approvals", json=body, headers=self.auth)
                    got = rt._expect(r, 201, "create")
                    if got.get("status") != "pending":
                        raise rt.Failure(f"create: status {got.get('status')!r}")
                    cards.append(Card(got["approvalId"], channel))
                except rt.Failure as exc:
                    errors[str(exc)] += 1
                except Exception as exc:
                    errors[f"create: {type(exc).__name__}: {exc}"[:120]] += 1

        await asyncio.gather(*(worker() for _ in range(SETUP_CONCURRENCY)))
        return cards

    async def await_cards(self, emu_http: Client, cards: list[Card], errors: Counter[str]) -> list[Card]:
        """Wait for each card's chat.postMessage; build its signed Approve click."""
        from surfaces.slack.interactions import (
            _find_button,
            block_actions_payload,
            signed_headers,
        )

        by_channel = {c.channel: c for c in cards}
        ready: list[Card] = []
        deadline = time.monotonic() + CARD_WAIT
        while len(ready) < len(cards) and time.monotonic() < deadline:
            got = await self.records(emu_http)
            for post in got["posts"]:
                card = by_channel.get(post["channel"])
                if card is None or card.ts:
                    continue
                card.ts = post["ts"]
                try:
                    button = _find_button(post["blocks"], APPROVE)
                except LookupError:
                    errors["card without an Approve button"] += 1
                    continue
                if button.get("value") != card.approval_id:
                    errors["card's Approve button names another approval"] += 1
                    continue
                payload = block_actions_payload(
                    action=button,
                    blocks=post["blocks"],
                    channel=card.channel,
                    ts=card.ts,
                    user=USER,
                    team=TEAM,
                    app_id=APP_ID,
                    trigger_id=f"{int(time.time())}.{self.n}.bench",
                    response_url=f"{self.emu.url}/hooks/actions/{card.approval_id}",
                )
                card.body = urlencode({"payload": json.dumps(payload)}).encode()
                card.headers = signed_headers(card.body, SIGNING_SECRET)
                ready.append(card)
            for e in got["ephemerals"]:
                errors[f"ephemeral before any click: {str(e.get('text'))[:80]}"] += 1
            if len(ready) < len(cards):
                await asyncio.sleep(0.05)
        if len(ready) < len(cards):
            errors[f"card not delivered within {CARD_WAIT:.0f} s"] += len(cards) - len(ready)
        return ready

    async def click_phase(
        self, clients: list[Client], cards: list[Card], budget: float, res: LevelResult
    ) -> list[Card]:
        """Click through `cards` from len(clients) workers until they run out or `budget`
        seconds pass; returns the cards clicked (acked or not)."""
        queue = deque(cards)
        clicked: list[Card] = []
        t0 = time.perf_counter()
        deadline = t0 + budget
        srv0, cli0, emu0 = (
            rt.cpu_seconds(self.server.pid),
            time.process_time(),
            rt.cpu_seconds(self.emu.proc.pid),
        )

        async def worker(client: Client) -> None:
            while queue and time.perf_counter() < deadline:
                card = queue.popleft()
                clicked.append(card)
                s = time.perf_counter()
                try:
                    r = await client.request("POST", "/slack/events", body=card.body, headers=card.headers)
                except Exception as exc:
                    res.errors[f"click: {type(exc).__name__}: {exc}"[:120]] += 1
                    continue
                took = time.perf_counter() - s
                if r.status != 200:
                    res.errors[f"click: HTTP {r.status} {r.text[:60]}"] += 1
                elif r.body:
                    res.errors[f"click: ack with a body: {r.text[:60]}"] += 1
                else:
                    res.clicks += 1
                    res.latencies.append(took)

        tasks = [asyncio.create_task(worker(c)) for c in clients]
        _, pending = await asyncio.wait(tasks, timeout=budget + DRAIN)
        for task in pending:
            task.cancel()
        if pending:
            res.errors[f"click still running {DRAIN:.0f} s after the phase"] += len(pending)
            await asyncio.gather(*pending, return_exceptions=True)
        res.elapsed += time.perf_counter() - t0
        res.server_cpu_s += rt.cpu_seconds(self.server.pid) - srv0
        res.client_cpu_s += time.process_time() - cli0
        res.emulator_cpu_s += rt.cpu_seconds(self.emu.proc.pid) - emu0
        return clicked

    async def verify(self, api: Client, clicked: list[Card], res: LevelResult) -> None:
        todo = deque(clicked)

        async def worker() -> None:
            while todo:
                card = todo.popleft()
                try:
                    r = await api.request("GET", f"/v1/approvals/{card.approval_id}", headers=self.auth)
                    got = rt._expect(r, 200, "read back")
                except rt.Failure as exc:
                    res.errors[str(exc)] += 1
                    continue
                except Exception as exc:
                    res.errors[f"read back: {type(exc).__name__}: {exc}"[:120]] += 1
                    continue
                who = got.get("decidedBy") or {}
                if got.get("status") != "approved":
                    res.errors[f"after the click: status {got.get('status')!r}"] += 1
                elif who.get("userId") != USER or who.get("surface") != "slack":
                    res.errors[f"approved by {who!r}, not {USER} on slack"] += 1
                else:
                    res.verified += 1

        await asyncio.gather(*(worker() for _ in range(SETUP_CONCURRENCY)))

    async def level(self, c: int, api: Client, emu_http: Client) -> LevelResult:
        res = LevelResult(c)
        clients = [self.client(1) for _ in range(c)]
        try:
            while res.elapsed < self.args.seconds and res.clicks + res.error_count < self.args.max_clicks:
                t_setup = time.perf_counter()
                size = min(
                    max(self.args.round_size, 8 * c), self.args.max_clicks - res.clicks - res.error_count
                )
                cards = await self.create(api, size, res.errors)
                ready = await self.await_cards(emu_http, cards, res.errors)
                res.setup_s += time.perf_counter() - t_setup
                if not ready:
                    break
                clicked = await self.click_phase(clients, ready, self.args.seconds - res.elapsed, res)
                res.rounds += 1
                await self.verify(api, clicked, res)
                await asyncio.sleep(0.3)  # let the server's chat.update jobs land
                got = await self.records(emu_http)
                for e in got["ephemerals"]:
                    res.errors[f"ephemeral (refused click): {str(e.get('text'))[:90]}"] += 1
        finally:
            for cl in clients:
                await cl.aclose()
        return res


# --- output ---------------------------------------------------------------------------------

HEADER = (
    f"{'conc':>5} {'clicks':>7} {'clicks/s':>9} {'ack p50':>8} {'ack p90':>8} "
    f"{'ack p99':>8} {'ack max':>8} {'errors':>7} {'approved':>9} {'srv cpu':>8} "
    f"{'cli cpu':>8} {'emu cpu':>8} {'srv/click':>10} {'clicks/s@1core':>14}"
)
UNITS = (
    f"{'':>5} {'':>7} {'':>9} {'ms':>8} {'ms':>8} {'ms':>8} {'ms':>8} {'':>7} "
    f"{'(checked)':>9} {'% core':>8} {'% core':>8} {'% core':>8} {'cpu ms':>10} "
    f"{'(projected)':>14}"
)


def print_row(r: LevelResult) -> None:
    ms = 1000.0
    lat = r.latencies
    print(
        f"{r.concurrency:>5} {r.clicks:>7} {r.rate:>9.0f} {rt.percentile(lat, 50) * ms:>8.1f} "
        f"{rt.percentile(lat, 90) * ms:>8.1f} {rt.percentile(lat, 99) * ms:>8.1f} "
        f"{(max(lat) if lat else float('nan')) * ms:>8.1f} {r.error_count:>7} "
        f"{r.verified:>9} {r.share(r.server_cpu_s):>8.0%} {r.share(r.client_cpu_s):>8.0%} "
        f"{r.share(r.emulator_cpu_s):>8.0%} {r.server_ms_per_click:>10.2f} "
        f"{1000.0 / r.server_ms_per_click:>14.0f}",
        flush=True,
    )
    for what, n in r.errors.most_common():
        print(f"      ! {n} x {what}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    p.add_argument("--concurrency", default="1,16,64")
    p.add_argument(
        "--seconds",
        type=float,
        default=5.0,
        help="click time per level (card set-up between rounds not counted)",
    )
    p.add_argument("--max-clicks", type=int, default=20_000, help="at most this many per level")
    p.add_argument(
        "--round-size", type=int, default=1024, help="approvals created per round (at least 8 x concurrency)"
    )
    p.add_argument("--client", choices=CLIENTS, default="raw")
    p.add_argument("--pg-admin", default=os.environ.get("COSIGNER_BENCH_PG", rt.DEFAULT_PG_ADMIN))
    p.add_argument("--server-log-level", default="INFO")
    p.add_argument(
        "--py-spy",
        metavar="FILE",
        default=None,
        help="py-spy raw profile of the server during the clicks at --profile-concurrency (first round)",
    )
    p.add_argument("--profile-concurrency", type=int, default=64)
    p.add_argument("--emulator-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--team", default=TEAM, help=argparse.SUPPRESS)
    p.add_argument("--app-id", default=APP_ID, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.emulator_child:
        return args
    try:
        args.concurrency = [int(x) for x in args.concurrency.split(",") if x.strip()]
    except ValueError:
        p.error("--concurrency takes whole numbers, e.g. 1,16,64")
    if not args.concurrency or min(args.concurrency) < 1 or max(args.concurrency) > 1024:
        p.error("--concurrency levels must be in 1..1024")
    if not 0 < args.seconds <= 600:
        p.error("--seconds must be in (0, 600]")
    if args.max_clicks < 1 or args.round_size < 1:
        p.error("--max-clicks and --round-size must be >= 1")
    return args


async def main_async(args: argparse.Namespace) -> int:
    task = asyncio.current_task()
    if task is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    cores = rt.pick_cores()
    if cores[1] is not None:
        os.sched_setaffinity(0, {cores[1]})
    emu = start_emulator(cores[1])
    print(
        f"Slack click-to-ack: server on core {cores[0]}, this client and the Slack emulator "
        f"(pid {emu.proc.pid}, {emu.url}) on core {cores[1]}; client "
        f"{client_version(args.client)}; {args.db}; levels {args.concurrency}, "
        f"{args.seconds:g} s of clicks per level"
    )
    slack_env = {
        "SLACK_SIGNING_SECRET": SIGNING_SECRET,
        "SLACK_BOT_TOKEN": BOT_TOKEN,
        "SLACK_API_URL": emu.api_url,
        "SLACK_APP_ID": APP_ID,
    }
    results: list[LevelResult] = []
    closed = "cards closed with chat.update: not counted"
    problems: list[str] = []
    warnings: Counter[str] = Counter()
    try:
        if args.db == "postgres":
            why = await rt.postgres_unreachable(args.pg_admin)
            if why:
                print(f"postgres: NOT RUN: {why}")
                return 1
        async with rt.running_server(
            args.db, args.pg_admin, cores[0], args.server_log_level, policy_text=POLICY, extra_env=slack_env
        ) as server:
            bench = Bench(server, emu, args)
            api = bench.client(SETUP_CONCURRENCY + 4)
            emu_http = bench.client(2, emu.url)
            try:
                ready = await server_surfaces(api)
                print(f"server pid {server.pid} on {server.url}; /readyz surfaces: {ready}")
                # Warm-up (not reported): the Slack path, Bolt's auth.test, every cache.
                warm = LevelResult(0)
                cards = await bench.await_cards(
                    emu_http, await bench.create(api, 64, warm.errors), warm.errors
                )
                clients = [bench.client(1) for _ in range(8)]
                await bench.verify(api, await bench.click_phase(clients, cards, 30, warm), warm)
                for cl in clients:
                    await cl.aclose()
                if warm.error_count:
                    print(f"warm-up errors: {dict(warm.errors)}")
                print(HEADER)
                print(UNITS)
                for c in args.concurrency:
                    if args.py_spy and c == args.profile_concurrency:
                        res = await profiled_level(bench, c, api, emu_http, server.pid)
                    else:
                        res = await bench.level(c, api, emu_http)
                    results.append(res)
                    print_row(res)
                await asyncio.sleep(1.0)  # the last chat.update jobs
                await bench.records(emu_http)
                verified = sum(r.verified for r in results) + warm.verified
                closed = (
                    f"cards closed with chat.update: {bench.updates} for {verified} "
                    "approved clicks (warm-up included)"
                )
            finally:
                await api.aclose()
                await emu_http.aclose()
            problems = server.stderr_problems()
            warnings = stderr_warnings(server)
    finally:
        if emu.proc.stdin is not None:
            with contextlib.suppress(OSError):
                emu.proc.stdin.close()
        rt._stop_process(emu.proc)

    print(
        "\nSummary (ack = HTTP response time of one signed Approve click on /slack/events; "
        "the decision is committed before the ack; errors = non-200 or non-empty acks, "
        "refused clicks (ephemerals), approvals not `approved` by the clicker afterwards, "
        "cards not delivered; approved = clicked approvals read back as approved; cpu = "
        "share of one core during the click windows; srv/click = server CPU ms per click, "
        "including the chat.update it triggers when that lands inside the window)"
    )
    print(HEADER)
    print(UNITS)
    for r in results:
        print_row(r)
    for r in results:
        print(
            f"   conc {r.concurrency}: {r.rounds} round(s), {r.setup_s:.1f} s of untimed "
            f"set-up (create + card delivery + read back)"
        )
    print(closed)
    if problems:
        print(f"server stderr: {len(problems)} error line(s); first 5:")
        for ln in problems[:5]:
            print("   | " + ln[:300])
    else:
        print("server stderr: no error lines, no tracebacks")
    if warnings:
        print(f"server stderr warnings: {sum(warnings.values())}; by message:")
        for msg, n in warnings.most_common(5):
            print(f"   {n} x {msg[:200]}")
    failed = any(r.error_count for r in results) or bool(problems)
    return 1 if failed else 0


async def profiled_level(bench: Bench, c: int, api: Client, emu_http: Client, pid: int) -> LevelResult:
    """One level with py-spy attached for its first click window (cards made beforehand)."""
    orig = bench.click_phase
    done = False

    async def wrapped(
        clients: list[Client], cards: list[Card], budget: float, res: LevelResult
    ) -> list[Card]:
        nonlocal done
        if done:
            return await orig(clients, cards, budget, res)
        done = True
        async with rt.py_spy(pid, bench.args.py_spy, max(1.0, budget)):
            return await orig(clients, cards, budget, res)

    bench.click_phase = wrapped  # type: ignore[method-assign]
    try:
        return await bench.level(c, api, emu_http)
    finally:
        bench.click_phase = orig  # type: ignore[method-assign]


async def server_surfaces(api: Client) -> Any:
    r = await api.request("GET", "/readyz")
    got = r.json()
    if "slack" not in (got.get("surfaces") or []):
        raise RuntimeError(f"the server did not start its Slack surface: /readyz says {got}")
    return got.get("surfaces")


def stderr_warnings(server: rt.Server) -> Counter[str]:
    out: Counter[str] = Counter()
    try:
        lines = server.stderr.read_text(errors="replace").splitlines()
    except OSError:
        return out
    for ln in lines:
        if '"level": "WARNING"' in ln or ln.startswith("WARNING"):
            with contextlib.suppress(ValueError, AttributeError):
                entry = json.loads(ln)
                ln = f"{entry.get('logger')}: {entry.get('msg') or entry.get('message')}"
            out[ln] += 1
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.emulator_child:
        return emulator_child(args.team, args.app_id)
    sys.path.insert(0, str(ROOT))
    with rt._event_loop_policy():
        try:
            return asyncio.run(main_async(args))
        except (KeyboardInterrupt, asyncio.CancelledError):
            print("\ninterrupted; the server and the emulator were stopped", file=sys.stderr)
            return 130
        finally:
            rt._stop_all()


if __name__ == "__main__":
    sys.exit(main())

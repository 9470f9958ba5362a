"""What the coding agents' hook costs: stdin to stdout for a call the policy allows at once.

    .venv/bin/python bench/hook.py [--calls 200] [--base TREE]

It starts `cosigner serve` on SQLite pinned to one core (as bench/roundtrip.py does) with
examples/coding_agent_policy.toml, under which Claude Code's `Bash` running
`git status --short` is allowed by a rule, nobody asked. On the other core it measures,
one call at a time, each with its own tool use id:

- **command hook**: `cosigner-hook claude-code` as the agent runs it, a new Python process
  per call (`python -m cosigner.hooks.command`), the hook JSON written to its stdin and
  the time taken until its stdout is closed: Python's start, the imports, the request to
  a warm server and the answer. `python -c pass` is timed beside it (Python's own start),
  `python -c "import cosigner.client"` (loading the SDK's client) and
  `python -c "import cosigner.hooks.command"` (loading the hook). With `--base TREE` (a
  `git archive` of an earlier commit) that tree's hook is timed too, the two in turn.
- **http hook**: `POST /v1/hooks/claude-code` over one kept-alive connection, as Claude
  Code's `http` hook sends it, beside `POST /v1/approvals` of the same call (the plain
  API), with the server's CPU time per call of each read from /proc.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from roundtrip import ROOT, Server, machine, pick_cores, running_server

POLICY = (
    "[defaults]\nmax_gated_calls_per_execution = 1000000\n\n"
    + (ROOT / "examples" / "coding_agent_policy.toml").read_text()
)
SURFACE = "dashboard:u_bench"
EVENT: dict[str, Any] = {
    "session_id": "3f2b8c1e-5d4a-4c7e-9a21-0b6d7e8f9a10",
    "transcript_path": "/home/alice/.claude/projects/shop/3f2b8c1e.jsonl",
    "cwd": "/home/alice/src/shop",
    "permission_mode": "default",
    "hook_event_name": "PreToolUse",
    "tool_name": "Bash",
    "tool_input": {"command": "git status --short", "description": "Show working tree status"},
    "tool_use_id": "toolu_bench",
}


def cpu_ms(pid: int) -> float:
    """User plus system CPU time of `pid`, in milliseconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def line(name: str, values: list[float], extra: str = "") -> None:
    print(
        f"{name:<52} p50 {pct(values, 50):7.1f} ms   p99 {pct(values, 99):7.1f} ms   n={len(values)}{extra}"
    )


def call(n: int, prefix: str) -> dict[str, Any]:
    return {**EVENT, "tool_use_id": f"{prefix}_{n}"}


def timed_process(argv: list[str], env: dict[str, str], stdin: bytes) -> tuple[float, bytes]:
    started = time.perf_counter()
    done = subprocess.run(argv, input=stdin, env=env, capture_output=True, check=False)
    return (time.perf_counter() - started) * 1000, done.stdout


def tree_env(server: Server, tree: Path) -> dict[str, str]:
    """The hook's environment, its packages from `tree`."""
    # As installed: bytecode cached (a pip install compiles it), so PYTHONDONTWRITEBYTECODE is
    # dropped and one untimed run per tree writes the caches of its modules.
    return {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith("COSIGNER_") and k != "PYTHONDONTWRITEBYTECODE"
        },
        "COSIGNER_URL": server.url,
        "COSIGNER_API_KEY": server.key,
        "COSIGNER_SURFACE": SURFACE,
        "PYTHONPATH": os.pathsep.join([str(tree), str(tree / "sdk" / "python")]),
    }


def command_hook(server: Server, calls: int, base: Path | None) -> None:
    py = sys.executable
    hook = [py, "-m", "cosigner.hooks.command", "claude-code"]
    trees = [("", ROOT)] + ([(" [--base]", base)] if base is not None else [])
    envs = {name: tree_env(server, tree) for name, tree in trees}
    for name, _ in trees:
        timed_process(hook, envs[name], json.dumps(call(-1, f"warm{len(name)}")).encode())
    few = max(20, calls // 4)
    bare = [timed_process([py, "-c", "pass"], envs[""], b"")[0] for _ in range(few)]
    line("python -c pass", bare)
    for name, _ in trees:
        for module in ("cosigner.client", "cosigner.hooks.command"):
            times = [timed_process([py, "-c", f"import {module}"], envs[name], b"")[0] for _ in range(few)]
            line(f'python -c "import {module}"{name}', times)
    # One call of each tree in turn, so that both see the same load.
    hooks: dict[str, list[float]] = {name: [] for name, _ in trees}
    errors = dict.fromkeys(hooks, 0)
    for n in range(calls):
        for name, _ in trees:
            ms, out = timed_process(hook, envs[name], json.dumps(call(n, f"cmd{len(name)}")).encode())
            hooks[name].append(ms)
            errors[name] += json.loads(out)["hookSpecificOutput"]["permissionDecision"] != "allow"
    for name, _ in trees:
        line(
            f"cosigner-hook claude-code (allowed call){name}", hooks[name], f"   not allowed: {errors[name]}"
        )


def http_hook(server: Server, calls: int) -> None:
    auth = {"Authorization": f"Bearer {server.key}"}
    with httpx.Client(base_url=server.url, headers=auth) as http:
        for warm in range(20):
            http.post("/v1/hooks/claude-code", json=call(warm, "warm"), headers={"Cosigner-Surface": SURFACE})

        def hook(n: int) -> httpx.Response:
            return http.post(
                "/v1/hooks/claude-code", json=call(n, "http"), headers={"Cosigner-Surface": SURFACE}
            )

        def plain(n: int) -> httpx.Response:
            body = {
                "executionId": EVENT["session_id"],
                "toolCallId": f"api_{n}",
                "toolName": "Bash",
                "parameters": EVENT["tool_input"],
                "surface": {"type": "dashboard", "userId": "u_bench"},
            }
            return http.post("/v1/approvals", json=body)

        paths: list[tuple[str, Callable[[int], httpx.Response]]] = [
            ("POST /v1/hooks/claude-code", hook),
            ("POST /v1/approvals (same call, plain API)", plain),
        ]
        for name, send in paths:
            times, errors = [], 0
            cpu = cpu_ms(server.pid)
            for n in range(calls):
                started = time.perf_counter()
                r = send(n)
                times.append((time.perf_counter() - started) * 1000)
                body = r.json()
                errors += r.status_code != 200 or body.get(
                    "status", body.get("hookSpecificOutput", {}).get("permissionDecision")
                ) not in ("approved", "allow")
            used = (cpu_ms(server.pid) - cpu) / calls
            line(name, times, f"   server CPU {used:.2f} ms/call   errors: {errors}")


async def main_async(calls: int, command_calls: int, base: Path | None) -> None:
    server_core, client_core = pick_cores()
    print(machine().split("; client:")[0], f"; load average {os.getloadavg()[0]:.1f}")
    async with running_server("sqlite", "", server_core, "WARNING", policy_text=POLICY) as server:
        if client_core is not None:
            os.sched_setaffinity(0, {client_core})
        http_hook(server, calls)
        command_hook(server, command_calls, base)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--calls", type=int, default=200)
    p.add_argument(
        "--command-calls",
        type=int,
        default=None,
        help="command hook runs (default --calls; each starts Python)",
    )
    p.add_argument(
        "--base",
        type=Path,
        default=None,
        help="another tree (a `git archive` of an earlier commit) whose command hook is timed too, "
        "one call of each tree in turn",
    )
    args = p.parse_args()
    asyncio.run(main_async(args.calls, args.command_calls or args.calls, args.base))
    return 0


if __name__ == "__main__":
    sys.exit(main())

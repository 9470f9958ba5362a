"""Run `cosigner-hook` as the agents do: a real subprocess, the hook's JSON on stdin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.processes import PROCESS_LIMIT, REPO

EXAMPLE_POLICY = (REPO / "examples" / "coding_agent_policy.toml").read_text()


def hook_env(home: Path, url: str, key: str, surface: str, **extra: str) -> dict[str, str]:
    """This process's environment without Cosigner settings, pointed at `url`, with a `home`
    that holds no config file; this tree's packages first on the path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COSIGNER_")}
    path = [str(REPO), str(REPO / "sdk" / "python"), env.get("PYTHONPATH", "")]
    env.update(
        PYTHONPATH=os.pathsep.join(p for p in path if p),
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        COSIGNER_URL=url,
        COSIGNER_API_KEY=key,
        COSIGNER_SURFACE=surface,
    )
    env.update(extra)
    return env


def command(agent: str, *args: str, via: str = "cosigner-hook") -> list[str]:
    """The command line: `cosigner-hook AGENT …` or `cosigner hook AGENT …`."""
    if via == "cosigner":
        return [sys.executable, "-m", "bot.cli", "hook", agent, *args]
    return [sys.executable, "-m", "cosigner.hooks.command", agent, *args]


def run_hook(
    event: dict[str, Any] | bytes,
    env: dict[str, str],
    agent: str = "claude-code",
    *args: str,
    via: str = "cosigner-hook",
) -> subprocess.CompletedProcess[bytes]:
    """Run the hook to completion on `event`."""
    stdin = event if isinstance(event, bytes) else json.dumps(event).encode()
    return subprocess.run(
        command(agent, *args, via=via),
        input=stdin,
        env=env,
        capture_output=True,
        timeout=PROCESS_LIMIT,
        cwd=REPO,
    )


def start_hook(
    event: dict[str, Any], env: dict[str, str], agent: str = "claude-code", *args: str
) -> subprocess.Popen[bytes]:
    """Start the hook on `event` and leave it waiting for its answer."""
    proc = subprocess.Popen(
        command(agent, *args),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=REPO,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(event).encode())
    proc.stdin.close()
    proc.stdin = None  # written whole: `communicate` has nothing more to send
    return proc


def decision_of(out: bytes) -> tuple[str, str]:
    """The hook output's (permissionDecision, permissionDecisionReason), checking its shape."""
    got = json.loads(out)
    assert set(got) == {"hookSpecificOutput"}, got
    spec = got["hookSpecificOutput"]
    assert set(spec) == {"hookEventName", "permissionDecision", "permissionDecisionReason"}, spec
    assert spec["hookEventName"] == "PreToolUse"
    return spec["permissionDecision"], spec["permissionDecisionReason"]

"""`cosigner-hook claude-code|codex` (and `cosigner hook …`): the PreToolUse command hook.

    echo '{"hook_event_name": "PreToolUse", ...}' | cosigner-hook claude-code --timeout 290

It fails closed: whatever goes wrong (bad input, no configuration, Cosigner unreachable, a
refusal, no answer in time) it prints `deny` with the reason, and where it cannot print
(a closed stdout) it exits 2 with the reason on stderr, which both agents read as a block.
Only an approval prints `allow`. The whole answer is bounded by `--timeout`: the asking runs
in a worker thread, and when the time is up the hook denies whether or not it returned.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Sequence

from cosigner.hooks.event import MAX_INPUT, Agent, BadHookInput, read_tool_use
from cosigner.hooks.settings import HookConfigError, load_settings
from cosigner.hooks.verdict import Verdict, deny

TYPE_CHECKING = False  # typing.TYPE_CHECKING without loading typing
if TYPE_CHECKING:
    from typing import BinaryIO

__all__ = ["add_arguments", "decide", "main"]

BLOCK = 2
"""The exit code both agents read as "block the call, stderr is the reason"."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The hook's options, shared by both command names."""
    p.add_argument("agent", choices=[a.value for a in Agent], help="the agent whose hook JSON comes on stdin")
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds to wait for an answer at most (default COSIGNER_HOOK_TIMEOUT, the config "
        "file's `timeout`, else 290); keep it under the hook's `timeout` in the agent's settings",
    )


def decide(agent: Agent, raw: bytes, timeout: float | None = None) -> Verdict:
    """The verdict for one hook input: read it, load the settings, ask within the time."""
    try:
        use = read_tool_use(raw, agent)
    except BadHookInput as exc:
        return deny(f"Cosigner's hook refused its input: {exc}")
    try:
        settings = load_settings(timeout=timeout)
    except HookConfigError as exc:
        return deny(f"Cosigner's hook is not configured: {exc}")
    from cosigner.hooks.asking import Asking

    asking = Asking(settings)
    deadline = time.monotonic() + settings.timeout
    found: list[Verdict] = []

    def work() -> None:
        try:
            found.append(asking.run(use, deadline))
        except BaseException as exc:  # any failure is a deny, never a silent allow
            found.append(deny(f"Cosigner's hook failed ({type(exc).__name__}); the call was not run"))

    worker = threading.Thread(target=work, name="cosigner-hook", daemon=True)
    worker.start()
    worker.join(max(0.0, deadline - time.monotonic()))
    if found:
        return found[0]
    return asking.withdraw() or asking.too_late()


def emit(verdict: Verdict, out: BinaryIO, err: BinaryIO) -> int:
    """Print the verdict as the hook's JSON; exit code 2 with the reason on stderr if it cannot
    be printed (an allow that cannot be printed is not given)."""
    try:
        out.write(verdict.to_bytes())
        out.flush()
    except (OSError, ValueError):
        reason = (
            verdict.reason if verdict.permission.value == "deny" else "the hook's answer could not be written"
        )
        try:
            err.write(f"Cosigner: {reason}\n".encode())
            err.flush()
        except (OSError, ValueError):
            pass
        return BLOCK
    return 0


def main(argv: Sequence[str] | None = None, prog: str = "cosigner-hook") -> int:
    """Run the hook: stdin in, the hook's JSON out."""
    parser = argparse.ArgumentParser(
        prog=prog, description="Ask Cosigner before a coding agent's tool call (PreToolUse hook)."
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    return run(args)


def run(args: argparse.Namespace) -> int:
    """The hook for parsed arguments (`cosigner hook` shares it)."""
    if args.timeout is not None and not (0 < args.timeout < float("inf")):
        return emit(deny("Cosigner's hook: --timeout must be a positive number of seconds"), *_streams())
    try:
        raw = sys.stdin.buffer.read(MAX_INPUT + 1)
    except (OSError, ValueError) as exc:
        return emit(deny(f"Cosigner's hook could not read its input ({type(exc).__name__})"), *_streams())
    verdict = decide(Agent(args.agent), raw, args.timeout)
    return emit(verdict, *_streams())


def _streams() -> tuple[BinaryIO, BinaryIO]:
    return sys.stdout.buffer, sys.stderr.buffer


if __name__ == "__main__":
    sys.exit(main())

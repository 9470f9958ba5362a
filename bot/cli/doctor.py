"""`cosigner doctor [--json] [--timeout S]`: why Cosigner does not work, one line per check.

Every check in `bot.cli.doctor_checks.CHECKS` (loaded only when doctor runs: the checks
import the services' clients) runs at once, each within its own timeout, so
a service that hangs cannot hang doctor. A check that raises is `fail` with the exception's
class and message. No line ever carries a secret: every value of a secret variable (and the
database password) is masked in what is printed, whatever a library put in its error. Exit
status 0 when no check failed, 1 when one did (2, as every command, for a usage mistake).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.settings import Reading, Settings


class Status(StrEnum):
    """A check's verdict: only `fail` makes doctor exit non-zero."""

    OK = "ok"
    WARN = "warn"  # works, but not as it should in production
    FAIL = "fail"  # Cosigner will not start, or this part will not work
    SKIP = "skip"  # not configured, or not checkable because something it needs is broken


OK, WARN, FAIL, SKIP = Status.OK, Status.WARN, Status.FAIL, Status.SKIP
Result = tuple[Status, str]
"""What a check found: its status and one line."""
Check = Callable[["Context"], Awaitable[Result]]
"""One check (bot.cli.doctor_checks.CHECKS holds them all)."""


class Skipped(Exception):
    """The check cannot run: the message says why (a variable it needs broke its rule)."""


@dataclass
class Context:
    """What every check reads: the settings as far as they parse, the per-check timeout and
    the clock (injected, so a test can skew it)."""

    reading: Reading
    timeout: float = 5.0  # seconds each check may take
    clock: Callable[[], float] = field(default=time.time)

    def need(self, *fields: str) -> Settings:
        """The settings, or `Skipped` when any of `fields` broke its rule (or nothing parsed)."""
        from bot.settings import env_name

        bad = [env_name(f) for f in fields if f in self.reading.refused]
        if bad:
            raise Skipped(f"not checked: {', '.join(bad)} breaks its rule (see settings)")
        if self.reading.settings is None:
            raise Skipped("not checked: the settings do not parse (see settings)")
        return self.reading.settings


TIMEOUT = 5.0  # seconds each check may take
MASK = "[REDACTED]"
MAX_LINE = 400  # characters of a message; an exception's text may be long


@dataclass(frozen=True)
class Finding:
    """What one check found, as printed: its name, its status and one line."""

    check: str
    status: Status
    message: str

    def wire(self) -> dict[str, str]:
        """The `--json` form: {"check", "status", "message"}."""
        return {"check": self.check, "status": self.status.value, "message": self.message}


def one_line(text: str, secrets: list[str]) -> str:
    """`text` on one line, every secret in it masked, cut to `MAX_LINE` characters."""
    for value in sorted(secrets, key=len, reverse=True):  # a longer secret may contain a shorter
        text = text.replace(value, MASK)
    text = re.sub(r"\s+", " ", text).strip()
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 1] + "…"


async def _run_one(name: str, check: Check, ctx: Context, secrets: list[str]) -> Finding:
    try:
        async with asyncio.timeout(ctx.timeout) as deadline:
            status, message = await check(ctx)
    except Skipped as exc:
        status, message = Status.SKIP, str(exc)
    except TimeoutError as exc:
        if deadline.expired():
            status, message = Status.FAIL, f"no answer within {ctx.timeout:g} s"
        else:
            status, message = Status.FAIL, f"TimeoutError: {exc}"
    except Exception as exc:
        status, message = Status.FAIL, f"{type(exc).__name__}: {exc}"
    return Finding(name, status, one_line(message, secrets))


async def diagnose(
    ctx: Context, checks: Mapping[str, Check] | None = None, environ: Mapping[str, str] = os.environ
) -> list[Finding]:
    """Run every check (or those given) at once; their findings in the table's order."""
    from bot.cli.doctor_checks import CHECKS
    from bot.settings import secret_values

    checks = CHECKS if checks is None else checks
    secrets = secret_values(environ)
    return list(await asyncio.gather(*(_run_one(name, fn, ctx, secrets) for name, fn in checks.items())))


def render(findings: list[Finding]) -> str:
    """The findings as text: one line per check, then the tally."""
    width = max(len(f.check) for f in findings)
    lines = [f"{f.status.value:<4}  {f.check:<{width}}  {f.message}" for f in findings]
    tally = {s: sum(f.status is s for f in findings) for s in Status}
    lines.append(", ".join(f"{n} {s.value}" for s, n in tally.items() if n))
    return "\n".join(lines)


def exit_status(findings: list[Finding]) -> int:
    """0 when nothing failed, else 1."""
    return 1 if any(f.status is Status.FAIL for f in findings) else 0


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not seconds > 0 or math.isinf(seconds):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return seconds


def register(sub: Any) -> None:
    """Add the `doctor` command to the CLI's subparsers."""

    def doctor(args: argparse.Namespace) -> int:
        from bot.settings import read_settings

        ctx = Context(read_settings(), timeout=args.timeout)
        findings = asyncio.run(diagnose(ctx))
        if args.json:
            print(json.dumps([f.wire() for f in findings]))
        else:
            print(render(findings))
        sys.stdout.flush()
        return exit_status(findings)

    p = sub.add_parser(
        "doctor", help="check the settings, policy, database and every service; say what to fix"
    )
    p.add_argument("--json", action="store_true", help='print a JSON list of {"check", "status", "message"}')
    p.add_argument(
        "--timeout", type=_seconds, default=TIMEOUT, help=f"seconds each check may take (default {TIMEOUT:g})"
    )
    p.set_defaults(fn=doctor)

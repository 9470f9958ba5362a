"""`cosigner policy suggest`: `when` blocks learned from the decisions on record, printed as
TOML to review (never applied), each proven by replaying it against the same history."""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path
from typing import Any

from bot.cli.policy import read_record, since_of

SINCE = "30d"


def _at_least(minimum: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of at least {minimum}")
        return value

    return parse


def _period(since: str) -> str:
    from bot.policy import parse_duration

    try:
        parse_duration(since)
    except ValueError:
        return f"since {since}"
    return f"in the last {since}"


def suggest_command(args: argparse.Namespace, usage_error: type[Exception]) -> int:
    """Print the `when` blocks the record supports, as TOML to review."""
    from bot.policy import load_policy_file
    from bot.policy.history import READ, collect
    from bot.policy.suggest import suggest
    from bot.policy.suggest_thresholds import Thresholds
    from bot.settings import load_settings
    from storage.audit import stream_events

    path = args.policy or load_settings().policy
    if not path:
        raise usage_error("give the policy in effect: --policy FILE, or set COSIGNER_POLICY")
    policy = load_policy_file(path, check_secrets=False)
    text = Path(path).read_text(encoding="utf-8")
    since = since_of(args.since, time.time(), usage_error)
    calls, unreadable = asyncio.run(
        read_record(lambda tx: collect(stream_events(tx, since, READ)), usage_error)
    )
    thresholds = Thresholds(
        min_approvals=args.min_approvals,
        min_people=args.min_people,
        max_values=args.max_values,
        min_per_value=args.min_per_value,
    )
    found = suggest(calls, policy, text, thresholds=thresholds, tool=args.tool, base=Path(path).parent)
    found.unreadable = unreadable
    print(found.text(_period(args.since)), end="")
    return 0


def register(policy: Any, usage_error: type[Exception]) -> None:
    """Add `suggest` to the CLI's `policy` subcommands."""
    from bot.policy.suggest_thresholds import Thresholds

    t = Thresholds()
    s = policy.add_parser(
        "suggest", help="when blocks learned from the decisions on record, as TOML to review (never applied)"
    )
    s.add_argument("--policy", help="the policy in effect (default: COSIGNER_POLICY)")
    s.add_argument(
        "--since", default=SINCE, help=f"how far back: 30d, 12h, or an ISO 8601 time (default: {SINCE})"
    )
    s.add_argument("--tool", help="only this tool")
    s.add_argument(
        "--min-approvals",
        type=_at_least(1),
        default=t.min_approvals,
        help=f"approved calls a suggestion must cover (default: {t.min_approvals})",
    )
    s.add_argument(
        "--min-people",
        type=_at_least(1),
        default=t.min_people,
        help=f"distinct people among their approvers (default: {t.min_people})",
    )
    s.add_argument(
        "--max-values",
        type=_at_least(1),
        default=t.max_values,
        help=f"distinct values a parameter may hold for an `in` list (default: {t.max_values})",
    )
    s.add_argument(
        "--min-per-value",
        type=_at_least(1),
        default=t.min_per_value,
        help=f"approvals of each value an `in` list names (default: {t.min_per_value})",
    )
    s.set_defaults(fn=lambda args: suggest_command(args, usage_error))

"""`cosigner policy explain | test | replay`: see what a policy decides, check it, and try a
new one on the recorded traffic before it takes effect."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import tomllib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.policy import Policy
    from storage.work import Work


def _policy(path: str) -> Policy:
    from bot.policy import load_policy_file

    # A handoff's or operation's secret is needed to run, not to decide: not checked here.
    return load_policy_file(path, check_secrets=False)


def explain(args: argparse.Namespace, usage_error: type[Exception]) -> int:
    """Print what the policy decides for one call, and why."""
    from bot.policy import ENABLED, assumed_sender, parse_surface, rule_on

    try:
        params = json.loads(args.params)
    except ValueError as exc:
        raise usage_error(f"--params is not JSON ({exc}); write e.g. '{{\"amountCents\": 4000}}'") from exc
    if not isinstance(params, dict):
        raise usage_error("--params must be a JSON object, e.g. '{\"amountCents\": 4000}'")
    try:
        surface = parse_surface(args.surface) if args.surface else None
    except ValueError as exc:
        raise usage_error(f"--{exc}") from exc
    ruling = rule_on(
        _policy(args.policy),
        args.tenant,
        args.tool,
        params,
        surface,
        enabled=ENABLED,
        sms=assumed_sender(),
        agent=args.agent,
        now=time.time(),
    )
    print(json.dumps(ruling.to_json(), indent=2) if args.json else ruling.explain())
    return 0


def test(args: argparse.Namespace, usage_error: type[Exception]) -> int:
    """Run a policy's test file: exit 0 when every case passes, 1 when any fails, 2 when malformed."""
    from bot.policy import CaseFileError, junit, load_cases, run_cases

    policy = _policy(args.policy)
    try:
        cases = load_cases(args.tests)
    except CaseFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    outcomes = run_cases(policy, cases)
    for o in outcomes:
        if o.passed:
            print(f"ok    {o.name}")
            continue
        print(f"FAIL  {o.name}")
        for failure in o.failures:
            print(f"      {failure}")
        if o.ruling is not None:
            print("      decided instead:")
            print("\n".join(f"        {line}" for line in o.ruling.explain().splitlines()))
    failed = sum(not o.passed for o in outcomes)
    if args.junit:
        Path(args.junit).write_bytes(junit(outcomes, f"policy {args.policy}"))
    print(f"{len(outcomes) - failed} passed, {failed} failed")
    return 1 if failed else 0


def since_of(text: str | None, now: float, usage_error: type[Exception]) -> float:
    """`7d` (that long ago) or an ISO 8601 time, as UNIX seconds; None: the beginning."""
    from bot.policy import parse_duration

    if not text:
        return 0.0
    try:
        return now - parse_duration(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise usage_error(
            f"--since {text!r}: give a duration such as 7d or 12h, or an ISO 8601 time"
        ) from exc
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


async def read_record(work: Callable[[Work], Any], usage_error: type[Exception]) -> Any:
    """Run `work` on a snapshot of the server's database (COSIGNER_DATABASE_URL), read only:
    a database at another schema revision is refused, never migrated."""
    from bot.settings import load_settings
    from storage.database import Database, head_revision
    from storage.urls import missing_sqlite_file, safe_url

    settings = load_settings()
    missing = missing_sqlite_file(settings.database_url)
    if missing is not None:
        raise usage_error(f"no database at {missing}; check COSIGNER_DATABASE_URL")
    db = Database(settings.database_url, sqlite_synchronous=settings.sqlite_sync)
    try:
        current, newest = await db.revision(), head_revision()
        if current != newest:
            raise usage_error(
                f"the database at {safe_url(db.url)} is at schema revision {current}, not {newest}; "
                "run `cosigner migrate` first"
            )
        return await db.run_read(work, snapshot=True)
    finally:
        await db.close()


def replay_command(args: argparse.Namespace, usage_error: type[Exception]) -> int:
    """Decide the recorded requests again under a new policy and print what would change."""
    # `replay` is also the name of its module, which shadows a package-level name once loaded.
    from bot.policy.replay import EXAMPLES, replay
    from storage.audit import stream_requests

    policy = _policy(args.policy)
    since = since_of(args.since, time.time(), usage_error)
    examples = EXAMPLES if args.examples is None else args.examples
    found = asyncio.run(
        read_record(lambda tx: replay(stream_requests(tx, since), policy, examples), usage_error)
    )
    print(json.dumps(found.to_json(), indent=2) if args.json else found.table())
    return 0


def to_cedar_command(args: argparse.Namespace, usage_error: type[Exception]) -> int:
    """Print (or write) the Cedar policies and schema that decide as a TOML policy does."""
    from bot.policy.to_cedar import removed, to_cedar

    path = args.file or os.environ.get("COSIGNER_POLICY")
    if not path:
        raise usage_error("name the TOML policy file, or set COSIGNER_POLICY")
    policy = _policy(path)
    if policy.cedar is not None:
        raise usage_error(f"{path} is decided by Cedar already ({policy.cedar.files.policies_path.name})")
    policies, schema = to_cedar(policy)
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    stem = Path(path).stem
    keys = removed(data)
    beside = [
        f'// Beside these files, the TOML keeps the rest with [cedar] policies = "{stem}.cedar";',
        "// remove the keys Cedar now decides: " + (", ".join(keys) if keys else "(none)"),
    ]
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{stem}.cedar").write_text(policies, encoding="utf-8")
        (out / f"{stem}.cedarschema").write_text(schema, encoding="utf-8")
        print(f"wrote {out / (stem + '.cedar')} and {out / (stem + '.cedarschema')}")
        print("\n".join(line.removeprefix("// ") for line in beside))
        return 0
    print(f"// ===== {stem}.cedar =====")
    print(policies)
    print(f"// ===== {stem}.cedarschema =====")
    print(schema)
    print("\n".join(beside))
    return 0


def register(policy: Any, usage_error: type[Exception]) -> None:
    """Add `explain`, `test` and `replay` to the CLI's `policy` subcommands."""

    def bound(fn: Any) -> Any:
        return lambda args: fn(args, usage_error)

    e = policy.add_parser("explain", help="what the policy decides for one call, and why")
    e.add_argument("--policy", required=True, help="the policy file")
    e.add_argument("--tenant", default="", help="the tenant's name (default: none, the tool sections alone)")
    e.add_argument("--tool", required=True)
    e.add_argument("--params", default="{}", help="the parameters as JSON, e.g. '{\"amountCents\": 4000}'")
    e.add_argument("--surface", help="where the run came from, e.g. slack:T0ACME/C0OPS/U0ALICE or sms:+1555…")
    e.add_argument("--agent", default="", help="the agent key's id a Cedar policy sees as principal")
    e.add_argument("--json", action="store_true", help="print JSON")
    e.set_defaults(fn=bound(explain))
    t = policy.add_parser("test", help="run a policy's test file ([[case]] tables)")
    t.add_argument("policy", help="the policy file")
    t.add_argument("tests", help="the test file")
    t.add_argument("--junit", help="also write JUnit XML to this path")
    t.set_defaults(fn=bound(test))
    r = policy.add_parser("replay", help="the recorded requests decided by a new policy: what would change")
    r.add_argument("--policy", required=True, help="the new policy file")
    r.add_argument("--since", help="how far back: 7d, 12h, or an ISO 8601 time (default: everything)")
    # Its default (bot.policy.replay.EXAMPLES) is read when replay runs, not to build the parser.
    r.add_argument("--examples", type=int, help="approval ids shown per change")
    r.add_argument("--json", action="store_true", help="print JSON")
    r.set_defaults(fn=bound(replay_command))
    c = policy.add_parser("to-cedar", help="the Cedar policies and schema that decide as a TOML policy does")
    c.add_argument("file", nargs="?", help="the TOML policy (default: COSIGNER_POLICY)")
    c.add_argument("--out", help="write NAME.cedar and NAME.cedarschema into this folder instead of printing")
    c.set_defaults(fn=bound(to_cedar_command))

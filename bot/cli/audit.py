"""`cosigner audit show ID`, `audit export [--since T] [--format jsonl|cloudevents]`, `audit
verify` and `audit sink-secret`: the operator's view of the audit chains (docs/audit.md)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bot.settings import Settings
    from storage.audit import AuditRow, Finding
    from storage.database import Database
    from storage.work import Work

    WithDb = Callable[[Callable[[Database, Any], Awaitable[Any]]], Coroutine[Any, Any, Any]]


def register(sub: Any, with_db: WithDb, usage_error: type[Exception]) -> None:
    """Add the `audit` command group to the CLI's subparsers."""

    def audit_show(args: argparse.Namespace) -> int:
        """Print an approval's audit events as JSON lines."""
        from contracts.audit_events import Requested
        from storage import ledger

        async def go(db: Database, settings: Settings) -> list[AuditRow]:
            return await db.run_read(lambda tx: ledger.events_of(tx, args.id))

        rows: list[AuditRow] = asyncio.run(with_db(go))
        if not rows:
            raise usage_error(
                f"no audit events for {args.id!r}; give an approval id (apv_…), "
                "e.g. from `cosigner audit export`"
            )
        first = rows[0].typed()
        if isinstance(first, Requested) and first.traceId:
            print(f"trace {first.traceId}")  # the W3C trace id its spans carry
        for row in rows:
            when = datetime.fromtimestamp(row.at, UTC).isoformat(timespec="milliseconds")
            print(f"{row.seq:>3} {when} {row.event:<18} {row.actor} {row.data}")
        return 0

    def _since(text: str | None) -> float:
        if not text:
            return 0.0
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError as exc:
            raise usage_error(f"--since {text!r}: give an ISO 8601 time, e.g. 2026-11-01T00:00:00Z") from exc
        # A time without a zone means UTC, as everywhere else in the audit log.
        return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()

    def audit_export(args: argparse.Namespace) -> int:
        """Write every audit event since a time as JSON lines: Cosigner's own shape, or CloudEvents
        1.0 in the JSON event format (`--format cloudevents`, docs/audit.md)."""
        from storage.audit import event_to_cloudevent, event_to_json, stream_since

        since = _since(args.since)
        cloud = args.format == "cloudevents"

        def export(tx: Work) -> int:
            count = 0
            for row in stream_since(tx, since):
                line = event_to_cloudevent(row).model_dump_json() if cloud else json.dumps(event_to_json(row))
                sys.stdout.write(line + "\n")
                count += 1
            return count

        async def go(db: Database, settings: Settings) -> int:
            return await db.run_read(export, snapshot=True)

        asyncio.run(with_db(go))
        return 0

    def audit_sink_key(args: argparse.Namespace) -> int:
        """Print the audit sink's Standard Webhooks secret (derived from COSIGNER_SECRET)."""
        from bot.settings import load_settings
        from bot.workers import audit_sink_secret

        settings = load_settings()
        if not settings.secret:
            raise usage_error("set COSIGNER_SECRET (the server's value) to derive the audit sink's secret")
        print(audit_sink_secret(settings.secret))
        return 0

    def audit_verify(args: argparse.Namespace) -> int:
        """Check every hash chain; exit 1 and list the breaks if any row was edited or deleted."""
        from storage.audit import verify_chains

        async def go(db: Database, settings: Settings) -> tuple[int, list[Finding]]:
            return await db.run_read(verify_chains, snapshot=True)

        checked, findings = asyncio.run(with_db(go))
        for f in findings:
            print(f"BROKEN {f.approval_id} seq {f.seq}: {f.problem}")
        if findings:
            print(f"{len(findings)} problem(s) in {checked} events", file=sys.stderr)
            return 1
        print(f"audit OK: {checked} events, every chain intact")
        return 0

    a = sub.add_parser("audit", help="read and verify the audit log").add_subparsers(
        dest="action", required=True
    )
    show = a.add_parser("show", help="one approval's events")
    show.add_argument("id")
    show.set_defaults(fn=audit_show)
    export = a.add_parser("export", help="events as JSON lines")
    export.add_argument("--since", help="ISO 8601 time")
    export.add_argument(
        "--format",
        choices=["jsonl", "cloudevents"],
        default="jsonl",
        help="jsonl (Cosigner's shape) or cloudevents (CloudEvents 1.0 JSON, one per line)",
    )
    export.set_defaults(fn=audit_export)
    a.add_parser("verify", help="find edited or deleted events").set_defaults(fn=audit_verify)
    a.add_parser(
        "sink-secret", help="print the secret the audit sink's requests are signed with"
    ).set_defaults(fn=audit_sink_key)

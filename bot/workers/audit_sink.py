"""The audit sink: each audit event POSTed to COSIGNER_AUDIT_SINK_URL as it is written.

Every event goes as one CloudEvent (`contracts.cloudevents`) in the CloudEvents HTTP
binding's structured mode (`Content-Type: application/cloudevents+json`), signed by Standard
Webhooks as callbacks are (`webhook-id` is the event's chain hash, the same on every retry)
with the sink's own secret (`audit_sink_secret`, printed by `cosigner audit sink-secret`).

The queue is the audit chain itself (`storage.audit_sink`): an approval's events go in their
order, each only after the one before it was accepted (2xx); a failure leaves the rest
queued and retries the approval after a backoff (1, 2, 4 … seconds, capped at ten minutes),
so a sink that is down catches up in order once it is up, across any restart. Nothing is
dropped at any backlog: past COSIGNER_AUDIT_SINK_MAX_BACKLOG events `/metrics` sets
`cosigner_audit_sink_over_bound` and `cosigner doctor` fails, while the events stay in the
audit chain (and `cosigner audit export --format cloudevents` gives them all).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
from collections.abc import Callable
from urllib.parse import urlsplit

from bot.approvals import Wakeups
from bot.egress import Egress, EgressFailed, EgressRefused, callback_client, parse_allow_list
from bot.observability import Metrics
from contracts.cloudevents import MEDIA_TYPE
from storage import audit_sink
from storage.audit import event_to_cloudevent
from storage.audit_sink import Backlog, Behind
from storage.database import Database

log = logging.getLogger("cosigner.audit_sink")

LOCK_SECONDS = 60.0  # how long one replica holds an approval while it sends its events
BATCH = 20  # approvals taken at a time
EVENTS = 100  # events of one approval read at a time
PAUSE = 0.05  # seconds between rounds that found nothing to send


def audit_sink_secret(secret: str) -> str:
    """The sink's Standard Webhooks secret, derived from COSIGNER_SECRET as a tenant's callback
    secret is (`whsec_` and 64 hex characters, valid base64)."""
    return "whsec_" + hmac.new(secret.encode(), b"audit-sink", hashlib.sha256).hexdigest()


def backoff(attempt: int) -> float:
    """Seconds before retry `attempt` (1, 2, 4 … capped at ten minutes)."""
    return float(min(2 ** max(attempt - 1, 0), 600))


class AuditSink:
    """Sends each approval's unsent audit events to the sink, in order, until stopped."""

    def __init__(
        self,
        url: str,
        secret: str,
        http: Egress,
        *,
        db: Database,
        clock: Callable[[], float],
        metrics: Metrics,
        wakeups: Wakeups,
    ) -> None:
        """`secret` is COSIGNER_SECRET (the sink's signing secret is derived from it)."""
        self.url = url
        self.secret = audit_sink_secret(secret)
        self.http = http
        self.db = db
        self.clock = clock
        self.metrics = metrics
        self.wakeups = wakeups

    async def run(self, stop: asyncio.Event, poll: float = 0.5) -> None:
        """Work until `stop` is set; between rounds, wait for new work or `poll` seconds."""
        while not stop.is_set():
            try:
                sent = await self.run_once()
            except Exception:
                log.exception("audit sink round failed; retrying")
                sent = 0
            if sent == 0:
                # Woken by queued work (the job worker clears the flag), or every `poll`
                # seconds: never sooner than `PAUSE`, so a flag still set cannot spin this loop.
                await asyncio.sleep(PAUSE)
                try:
                    await asyncio.wait_for(self.wakeups.jobs.wait(), poll)
                except TimeoutError:
                    pass

    async def run_once(self) -> int:
        """Send what is due of the approvals the sink is behind on; return how many events the
        sink accepted."""
        now = self.clock()
        claimed = await self.db.run_write(lambda tx: audit_sink.claim(tx, now, LOCK_SECONDS, BATCH))
        if not claimed:
            return 0
        return sum(await asyncio.gather(*(self._approval(b) for b in claimed)))

    async def _approval(self, behind: Behind) -> int:
        rows = await self.db.run_read(
            lambda tx: audit_sink.unsent(tx, behind.approval_id, behind.sent, EVENTS)
        )
        upto, why = behind.sent, None
        for row in rows:
            why = await self._post(row.hash, event_to_cloudevent(row).model_dump_json().encode())
            if why is not None:
                log.warning(
                    "audit sink did not accept an event; retrying",
                    extra={"approval_id": behind.approval_id, "seq": row.seq, "why": why},
                )
                self.metrics.audit_sink_events.labels("failed").inc()
                break
            upto = row.seq
            self.metrics.audit_sink_events.labels("sent").inc()
        attempts = 0 if why is None else behind.attempts + 1
        retry_at = None if why is None else self.clock() + backoff(attempts)
        await self.db.run_write(
            lambda tx: audit_sink.sent(tx, behind.approval_id, upto, retry_at=retry_at, attempts=attempts)
        )
        return upto - behind.sent

    async def _post(self, delivery: str, body: bytes) -> str | None:
        # None when the sink accepted the event; else what went wrong, for the log.
        try:
            answer = await self.http.post_signed(
                self.url,
                body,
                secret=self.secret,
                delivery=delivery,
                at=self.clock(),
                user_agent="cosigner-audit-sink/1",
                content_type=MEDIA_TYPE,
            )
        except EgressRefused as exc:
            return f"refused: {exc}"
        except EgressFailed as exc:
            return exc.reason
        return None if 200 <= answer.status_code < 300 else f"HTTP {answer.status_code}"


def sink_client(url: str) -> Egress:
    """The client the sink is POSTed with: the egress rules of callbacks, with the sink's own
    host allowed (the operator named it, and it is often on a private network)."""
    host = urlsplit(url).hostname or ""
    return callback_client(parse_allow_list(host))


async def sink_backlog(db: Database) -> Backlog:
    """The events the sink has still to accept (read through storage's index)."""
    return await db.run_read(audit_sink.backlog)

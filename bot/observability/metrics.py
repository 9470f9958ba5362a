"""Prometheus metrics, on a registry of the app's own so several apps can share a process."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest


class Metrics:
    """Requests, approvals by status, time to decision, job outcomes and the job queue."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "cosigner_http_requests",
            "HTTP requests by route and status",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.approvals = Counter(
            "cosigner_approvals",
            "Approvals by final or initial status",
            ["event", "status"],
            registry=self.registry,
        )
        # `surface`: where the request was asked (its route), or "none" when nobody was.
        self.decision_seconds = Histogram(
            "cosigner_time_to_decision_seconds",
            "From request to decision, by outcome and the surface it was asked on",
            ["status", "surface"],
            registry=self.registry,
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 86400),
        )
        self.jobs = Counter(
            "cosigner_jobs",
            "Background jobs by kind and outcome",
            ["kind", "outcome"],
            registry=self.registry,
        )
        self.jobs_due = Gauge(
            "cosigner_jobs_due",
            "Unfinished background jobs that are due, by kind (the queue's depth, read at each scrape)",
            ["kind"],
            registry=self.registry,
        )
        self.waiting = Gauge(
            "cosigner_waiters",
            "Open connections waiting on a decision here (long-polls and event streams)",
            registry=self.registry,
        )
        self.replica_wakeups = Counter(
            "cosigner_replica_wakeups",
            "Waiters here woken by another replica's decision (PostgreSQL NOTIFY)",
            registry=self.registry,
        )
        self.key_removals_heard = Counter(
            "cosigner_key_removals_heard",
            "API key removals heard (PostgreSQL NOTIFY, from any process), each emptying the key cache here",
            registry=self.registry,
        )
        self.shadow_differences = Counter(
            "cosigner_policy_shadow_differences",
            "Requests the shadow policy (COSIGNER_POLICY_SHADOW) decides otherwise, by tool and change",
            ["tool", "from", "to"],
            registry=self.registry,
        )
        # The audit sink (COSIGNER_AUDIT_SINK_URL): events it accepted or not, and its backlog.
        self.audit_sink_events = Counter(
            "cosigner_audit_sink_events",
            "Audit events POSTed to the audit sink, by outcome (sent: accepted; failed: retried later)",
            ["outcome"],
            registry=self.registry,
        )
        self.audit_sink_backlog = Gauge(
            "cosigner_audit_sink_backlog_events",
            "Audit events the sink has still to accept (read at each scrape); none is ever dropped",
            registry=self.registry,
        )
        self.audit_sink_behind = Gauge(
            "cosigner_audit_sink_backlog_approvals",
            "Approvals with audit events the sink has still to accept (read at each scrape)",
            registry=self.registry,
        )
        self.audit_sink_over_bound = Gauge(
            "cosigner_audit_sink_over_bound",
            "1 when the sink's backlog is past COSIGNER_AUDIT_SINK_MAX_BACKLOG (events still kept), else 0",
            registry=self.registry,
        )
        # The labelled children, found once per set of labels: `labels()` validates and
        # locks on every call, and the hot paths count every request and approval.
        self._children: dict[tuple[Any, ...], Any] = {}

    def _child(self, metric: Counter | Histogram, *labels: str) -> Any:
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def request(self, method: str, route: str, status: int) -> None:
        """Count an answered API request."""
        self._child(self.requests, method, route, str(status)).inc()

    def created(self, status: str) -> None:
        """Count a new approval in its initial status."""
        self._child(self.approvals, "created", status).inc()

    def closed(self, status: str, surface: str, created_at: float, decided_at: float) -> None:
        """Count a closed approval and observe its time to decision on the surface it was asked on."""
        self._child(self.approvals, "closed", status).inc()
        self._child(self.decision_seconds, status, surface).observe(max(decided_at - created_at, 0.0))

    def queue(self, due: Mapping[str, int] | None) -> None:
        """Set the queue's depth of each kind given (every kind, 0 when none is due); with None
        (it could not be read) the gauge is left empty rather than stale."""
        if due is None:
            self.jobs_due.clear()
            return
        for kind, count in due.items():
            self.jobs_due.labels(kind).set(count)

    def sink_backlog(self, events: int | None, approvals: int, bound: int) -> None:
        """Set the audit sink's backlog gauges; with None (it could not be read) they are left
        empty rather than stale."""
        if events is None:
            for gauge in (self.audit_sink_backlog, self.audit_sink_behind, self.audit_sink_over_bound):
                gauge.set(float("nan"))
            return
        self.audit_sink_backlog.set(events)
        self.audit_sink_behind.set(approvals)
        self.audit_sink_over_bound.set(1 if events > bound else 0)

    def shadow_difference(self, tool: str, before: str, after: str) -> None:
        """Count one request the shadow policy decides otherwise."""
        self._child(self.shadow_differences, tool, before, after).inc()

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)

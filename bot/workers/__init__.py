"""Background work: the job outbox's worker, the expiry sweep and the audit sink."""

from typing import TYPE_CHECKING

from bot import lazy_exports

if TYPE_CHECKING:
    from bot.workers.audit_sink import AuditSink, audit_sink_secret, sink_backlog, sink_client
    from bot.workers.jobs import ExpirySweeper, JobWorker

__all__ = ["AuditSink", "ExpirySweeper", "JobWorker", "audit_sink_secret", "sink_backlog", "sink_client"]
__getattr__ = lazy_exports(
    __name__,
    __all__,
    {
        "bot.workers.jobs": ["ExpirySweeper", "JobWorker"],
        "bot.workers.audit_sink": ["AuditSink", "audit_sink_secret", "sink_backlog", "sink_client"],
    },
)

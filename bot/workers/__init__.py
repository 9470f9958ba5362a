"""Background work: the job outbox's worker and the expiry sweep."""

from typing import TYPE_CHECKING

from bot import lazy_exports

if TYPE_CHECKING:
    from bot.workers.jobs import ExpirySweeper, JobWorker

__all__ = ["ExpirySweeper", "JobWorker"]
__getattr__ = lazy_exports(
    __name__,
    __all__,
    {
        "bot.workers.jobs": ["ExpirySweeper", "JobWorker"],
    },
)

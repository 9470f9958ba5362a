"""What a PostgreSQL replica knows of the approvals it created and that are still pending.

A round trip reads its approval twice after creating it: the agent's long-poll reads it to
see that it is still pending, and the decision reads it before its one conditional write
(`storage.answers.load` in an optimistic step). On PostgreSQL each read is a round trip to
the database, and the replica that created the approval already holds it. So it keeps the
pending approvals it created (`keep`) and forgets one as soon as it might have changed:
when any replica closes it (the NOTIFY every close sends, which this replica hears too,
`forget`), when this replica writes its row (any link on its audit chain, its receipt:
`changed`, from storage's writes themselves), and all of them while its LISTEN connection
is down (`listening(False)`: a close sent meanwhile would go unheard).

What it knows is never taken as proof:

- the long-poll takes "pending" from it only to start waiting, subscribed before it looks,
  and a close wakes it to read the database (a lost NOTIFY is covered by the waiters'
  recheck, which reads the database);
- the decision's first optimistic try may read from it (`Database.run_write`): its write is
  conditional on the row's audit chain length and its receipt, which change with every
  change of an approval's row, so a stale copy loses the race and the step runs again on
  the database; a try that ends without writing (a refusal, an error) runs again on the
  database too, so nothing is ever refused on the strength of a copy.

SQLite reads in-process and never starts listening, so nothing is kept there.
"""

from __future__ import annotations

from collections import deque
from itertools import islice

from contracts.enums import ApprovalStatus
from storage.records import Record
from storage.work import Work

KEPT = 1024
"""At most this many approvals are kept per replica, the oldest dropped first: the copy
serves the first seconds of an approval (the agent's long-poll, a quick decision)."""
_RECENT = 1024  # forgotten ids remembered, for a `keep` that started before a `forget`


class Known:
    """The pending approvals this replica created, while it hears every close."""

    def __init__(self, size: int = KEPT) -> None:
        self.size = size
        self._records: dict[str, Record] = {}
        self._live = False  # listening: every close is heard
        self._epoch = 0  # forgets so far
        self._recent: deque[str] = deque(maxlen=_RECENT)  # the ids of the latest forgets

    @property
    def live(self) -> bool:
        """Whether this replica hears every close, so what it keeps can be used."""
        return self._live

    def listening(self, live: bool) -> None:
        """The LISTEN connection is up (True), or lost or closed (False: forget everything)."""
        if not live:
            self._records.clear()
            self._epoch += _RECENT + 1  # a `keep` under way would take a close for unheard
        self._live = live

    def epoch(self) -> int:
        """A mark to hand `keep`: it keeps nothing forgotten after the mark was taken."""
        return self._epoch

    def keep(self, rec: Record, since: int) -> None:
        """Keep `rec`, as just written, unless it is no longer pending or was forgotten
        (closed, or the connection lost) after `since` (`epoch()` before the write)."""
        if not self._live or rec.status is not ApprovalStatus.PENDING:
            return
        missed = self._epoch - since
        if missed > len(self._recent) or rec.id in islice(reversed(self._recent), missed):
            return
        records = self._records
        records[rec.id] = rec
        if len(records) > self.size:
            del records[next(iter(records))]

    def get(self, approval_id: str) -> Record | None:
        """The pending approval as this replica last knew it, or None."""
        return self._records.get(approval_id) if self._live else None

    def forget(self, approval_id: str) -> None:
        """The approval closed or changed (here or on another replica)."""
        self._records.pop(approval_id, None)
        self._epoch += 1
        self._recent.append(approval_id)

    def __len__(self) -> int:
        return len(self._records)


# `Connection.info` keys of an optimistic step's first try: the replica's copies it may read
# (`Database.run_write`), and whether it did.
OFFERED = "cosigner_known"
USED = "cosigner_known_used"
# Every PostgreSQL connection's `info` holds its database's copies under this key (set when
# the connection is opened), so that each write of an approval's row forgets its copy.
HELD = "cosigner_known_held"
# `Connection.info` key of an intake step (`Database.create`): the approvals it wrote, kept
# once it has run.
CREATED = "cosigner_known_created"


def changed(work: Work, approval_id: str) -> None:
    """The approval's row is written in this step: this replica's copy of it is out of date."""
    known: Known | None = work.conn.info.get(HELD)
    if known is not None:
        known.forget(approval_id)


def created(work: Work, rec: Record) -> None:
    """The approval was just stored in an intake step: the replica keeps it once the step has run."""
    made: list[Record] | None = work.conn.info.get(CREATED)
    if made is not None:
        made.append(rec)


def offered(work: Work, approval_id: str) -> Record | None:
    """In an optimistic step's first try, the replica's copy of the approval (once per try;
    None when there is none or it is not offered). The step's write then checks it."""
    info = work.conn.info
    known: Known | None = info.pop(OFFERED, None)
    if known is None:
        return None
    rec = known.get(approval_id)
    if rec is not None:
        info[USED] = True
    return rec

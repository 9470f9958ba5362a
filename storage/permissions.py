"""Owner-only permissions for the SQLite database file and its WAL companions.

The file holds API key hashes, the audit trail and (sealed) Slack tokens, so it is created
`0600`; SQLite gives `-wal`, `-shm` and `-journal` files the mode of the database file.
A file found with looser permissions is tightened, with a warning naming the old mode.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

logger = logging.getLogger("cosigner.storage")

PRIVATE = 0o600
COMPANIONS = ("-wal", "-shm", "-journal")


def make_private(database: Path) -> None:
    """Create `database` owner-only if it is missing; tighten it and its companions if not."""
    try:
        fd = os.open(database, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE)
    except FileExistsError:
        pass
    else:
        os.close(fd)
    for path in (database, *(Path(f"{database}{suffix}") for suffix in COMPANIONS)):
        _tighten(path)


def _tighten(path: Path) -> None:
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return
    if mode & ~PRIVATE == 0:
        return
    try:
        path.chmod(mode & PRIVATE)
    except OSError:
        logger.warning(
            "database file %s has mode %o and could not be made owner-only; run chmod 600 on it",
            path,
            mode,
        )
        return
    logger.warning("database file %s had mode %o; tightened to %o", path, mode, mode & PRIVATE)

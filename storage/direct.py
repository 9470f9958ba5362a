"""The hot path's statements, run straight on the driver: SQLite's cursor, asyncpg's
prepared statements.

Creating an approval, reading it, deciding it and appending to its audit chain are small
indexed statements; SQLAlchemy's execution machinery around each (parameter handling,
execution context, result object, the cache key of the statement) costs several times
what the database spends running it, on every agent request. These few statements are
compiled by SQLAlchemy once per dialect and their SQL run on the driver connection of the
same SQLAlchemy connection, in the same transaction, with the column types' own bind and
result processing, and a driver error raised as SQLAlchemy's:

- SQLite: on the DBAPI cursor.
- PostgreSQL (asyncpg): as a prepared statement of the connection (SQLAlchemy's adapter
  keeps them per connection, so a statement is parsed and planned once per connection),
  starting the adapter's transaction first exactly as its own cursor does, so the
  statement is part of the transaction SQLAlchemy commits or rolls back."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.util import await_

from storage.work import Work

Processor = Callable[[Any], Any]


class _Compiled:
    """A statement's SQL for one dialect, its parameters in order, and its processors."""

    def __init__(self, stmt: sa.ClauseElement, dialect: Dialect, column_keys: Sequence[str] | None) -> None:
        compiled = stmt.compile(dialect=dialect, column_keys=list(column_keys) if column_keys else None)
        assert isinstance(compiled, SQLCompiler)
        self.sql = compiled.string
        names = compiled.positiontup or []
        binds = compiled.binds
        # Literal values written into the statement (`status == "pending"`) are bound too.
        self.fixed = {n: binds[n].value for n in names if not binds[n].required}
        self.names = tuple(names)
        self.bind: tuple[Processor | None, ...] = tuple(binds[n].type.bind_processor(dialect) for n in names)
        self.any_bind = any(p is not None for p in self.bind)
        selected = getattr(stmt, "selected_columns", None)
        self.row: Any = None
        self.result: tuple[Processor | None, ...] = ()
        self.any_result = False
        if selected is not None:
            # An unlabelled expression has no key: it is reached by position (`scalar`).
            names = [c.key if isinstance(c.key, str) else "_" for c in selected]
            self.row = namedtuple("Row", names, rename=True)  # type: ignore[misc]
            self.result = tuple(c.type.result_processor(dialect, None) for c in selected)
            self.any_result = any(p is not None for p in self.result)

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        fixed = self.fixed
        values = [params[n] if n not in fixed else fixed[n] for n in self.names]
        if self.any_bind:
            values = [v if p is None else p(v) for v, p in zip(values, self.bind, strict=True)]
        return values

    def make_row(self, values: Sequence[Any]) -> Any:
        if self.any_result:
            values = [v if p is None else p(v) for v, p in zip(values, self.result, strict=True)]
        return self.row(*values)


def _fast(tx: Connection) -> str | None:
    """Which driver path `tx` takes: "sqlite", "asyncpg", or None (through SQLAlchemy)."""
    dialect = tx.dialect
    if dialect.name == "sqlite":
        return "sqlite"
    if dialect.driver == "asyncpg":
        return "asyncpg"
    return None


# --- asyncpg ---------------------------------------------------------------------------------


async def _pg_run(adapted: Any, sql: str, args: Sequence[Any], asof: float, many: bool) -> Any:
    """What SQLAlchemy's asyncpg cursor does for one execution, without the cursor: the
    adapter's lock, its lazily started transaction, its prepared statement for `sql`."""
    async with adapted._execute_mutex:
        if adapted._transaction is None:
            await adapted._start_transaction()  # a no-op in autocommit (a read)
        try:
            if many:
                return await adapted._connection.executemany(sql, args)
            prepared, _attributes = await adapted._prepare(sql, asof)
            rows = await prepared.fetch(*args)
            return rows, prepared.get_statusmsg()
        except Exception as error:
            adapted._handle_exception(error)  # raises it as the adapter's DBAPI error


def _pg(tx: Connection, sql: str, args: Sequence[Any], *, many: bool = False) -> Any:
    """Run `sql` with positional `args` on the asyncpg connection under `tx`, in `tx`'s
    transaction; (rows, status), or None for `many`. Called inside `run_sync`'s greenlet."""
    adapted = tx.connection.dbapi_connection
    assert adapted is not None
    dialect = tx.dialect
    error = dialect.loaded_dbapi.Error
    try:
        return await_(_pg_run(adapted, sql, args, dialect._invalidate_schema_cache_asof, many))  # type: ignore[attr-defined]
    except error as exc:
        if dialect.is_disconnect(exc, adapted, None):
            tx.invalidate(exc)  # the pool must not hand this connection out again
        raise sa.exc.DBAPIError.instance(
            sql, None, exc, error, hide_parameters=True, dialect=dialect
        ) from exc


def _count(status: str | None) -> int:
    """The row count of a command tag (`UPDATE 1`, `INSERT 0 3`, `SELECT 2`)."""
    if not status:
        return -1
    try:
        return int(status.rsplit(" ", 1)[-1])
    except ValueError:
        return -1


# --- statements ------------------------------------------------------------------------------


# `Connection.info` key of a step that runs without a transaction (`Database.run_write` with
# `single_write`): how many writes it has sent, so a second one is refused before it is sent.
SINGLE_WRITE = "cosigner_single_write"


class SecondWrite(RuntimeError):
    """A step run without a transaction tried a second write (a programming error)."""


# `Connection.info` key of a step run optimistically (`Database.run_write` with `optimistic`):
# its reads take no lock and its one write is conditional on what they read.
OPTIMISTIC = "cosigner_optimistic"


class Raced(RuntimeError):
    """An optimistic step's conditional write matched no row: the row changed since the step
    read it. Nothing was written; the step runs again and reads it anew."""


class NeedsLock(RuntimeError):
    """An optimistic step needs more than one write (or a read under the row lock) for what
    it found; raised before anything is written, so the step runs again in a transaction."""


def optimistic(work: Work) -> bool:
    """Whether `work` runs a step optimistically (see `OPTIMISTIC`)."""
    return bool(work.conn.info.get(OPTIMISTIC))


def single_write(work: Work) -> bool:
    """Whether `work` runs a step allowed one write statement (see `SINGLE_WRITE`)."""
    return work.conn.info.get(SINGLE_WRITE) is not None


def _count_write(tx: Connection) -> None:
    info = tx.info
    sent = info.get(SINGLE_WRITE)
    if sent is None:
        return
    if sent:
        raise SecondWrite("a second write in a step run with single_write=True; run it in a transaction")
    info[SINGLE_WRITE] = 1


class Direct:
    """A statement run on the driver (SQLite, asyncpg), through SQLAlchemy elsewhere.

    `column_keys` are an INSERT's columns (each execution must give exactly those);
    `writes` marks a statement that changes rows (inferred for INSERT, UPDATE, DELETE)."""

    def __init__(
        self, stmt: sa.Executable, column_keys: Sequence[str] | None = None, *, writes: bool | None = None
    ) -> None:
        self.stmt = stmt
        self.column_keys = tuple(column_keys) if column_keys is not None else None
        self.writes = isinstance(stmt, sa.sql.dml.UpdateBase) if writes is None else writes
        self._compiled: dict[tuple[Any, ...], _Compiled] = {}

    def _for(self, tx: Connection) -> _Compiled:
        dialect = tx.dialect
        # Keyed by what the SQL text depends on, never by the dialect object's id(): a process
        # with engines on two databases (the tests) may see a freed SQLite dialect's id reused
        # by a PostgreSQL one, and run the other database's SQL.
        key = (dialect.name, dialect.driver, dialect.paramstyle, dialect.server_version_info)
        found = self._compiled.get(key)
        if found is None:
            found = _Compiled(self.stmt, dialect, self.column_keys)  # type: ignore[arg-type]
            self._compiled[key] = found
        return found

    def _cursor(self, tx: Connection, compiled: _Compiled, run: Callable[[Any], Any], shown: Any) -> Any:
        dbapi_connection = tx.connection.dbapi_connection
        assert dbapi_connection is not None
        cursor = dbapi_connection.cursor()
        error = tx.dialect.loaded_dbapi.Error
        try:
            run(cursor)
        except error as exc:
            cursor.close()
            raise sa.exc.DBAPIError.instance(
                compiled.sql, shown, exc, error, hide_parameters=True, dialect=tx.dialect
            ) from exc
        return cursor

    def rowcount(self, work: Work, params: Mapping[str, Any]) -> int:
        """Execute once; the number of rows it changed."""
        tx = work.conn
        if self.writes:
            _count_write(tx)
        fast = _fast(tx)
        if fast is None:
            return int(tx.execute(self.stmt, dict(params)).rowcount)
        compiled = self._for(tx)
        args = compiled.args(params)
        if fast == "asyncpg":
            return _count(_pg(tx, compiled.sql, args)[1])
        cursor = self._cursor(tx, compiled, lambda c: c.execute(compiled.sql, args), args)
        try:
            return int(cursor.rowcount)
        finally:
            cursor.close()

    def many(self, work: Work, rows: Iterable[Mapping[str, Any]]) -> None:
        """Execute once per row of parameters."""
        tx = work.conn
        if self.writes:
            _count_write(tx)
        fast = _fast(tx)
        if fast is None:
            tx.execute(self.stmt, [dict(r) for r in rows])
            return
        compiled = self._for(tx)
        args = [compiled.args(r) for r in rows]
        if fast == "asyncpg":
            if len(args) == 1:
                _pg(tx, compiled.sql, args[0])
            elif args:
                _pg(tx, compiled.sql, args, many=True)
            return
        self._cursor(tx, compiled, lambda c: c.executemany(compiled.sql, args), args).close()

    def all(self, work: Work, params: Mapping[str, Any]) -> list[Any]:
        """Every row a SELECT gives (attributes by column name)."""
        tx = work.conn
        if self.writes:
            _count_write(tx)
        fast = _fast(tx)
        if fast is None:
            return list(tx.execute(self.stmt, dict(params)).all())
        compiled = self._for(tx)
        args = compiled.args(params)
        if fast == "asyncpg":
            return [compiled.make_row(tuple(r)) for r in _pg(tx, compiled.sql, args)[0]]
        cursor = self._cursor(tx, compiled, lambda c: c.execute(compiled.sql, args), args)
        try:
            rows = cursor.fetchall()
        finally:
            cursor.close()
        return [compiled.make_row(r) for r in rows]

    def first(self, work: Work, params: Mapping[str, Any]) -> Any:
        """The first row a SELECT (or a RETURNING) gives (attributes by column name), or None."""
        tx = work.conn
        if self.writes:
            _count_write(tx)
        fast = _fast(tx)
        if fast is None:
            return tx.execute(self.stmt, dict(params)).first()
        compiled = self._for(tx)
        args = compiled.args(params)
        if fast == "asyncpg":
            rows = _pg(tx, compiled.sql, args)[0]
            return compiled.make_row(tuple(rows[0])) if rows else None
        cursor = self._cursor(tx, compiled, lambda c: c.execute(compiled.sql, args), args)
        try:
            row = cursor.fetchone()
        finally:
            cursor.close()
        return None if row is None else compiled.make_row(row)

    def scalar(self, work: Work, params: Mapping[str, Any]) -> Any:
        """The first column of the first row, or None."""
        row = self.first(work, params)
        return None if row is None else row[0]

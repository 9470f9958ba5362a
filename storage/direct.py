"""The hot path's statements on SQLite, run straight on the driver's cursor.

Creating an approval, reading it and appending to its audit chain are small indexed
statements; on SQLite, SQLAlchemy's execution machinery around each (parameter handling,
execution context, result object) costs several times what SQLite spends running it, on
every agent request. These few statements are compiled by SQLAlchemy once per dialect and
their SQL run on the DBAPI cursor of the same connection, in the same transaction, with
the column types' own bind and result processing, and a driver error raised as
SQLAlchemy's. On PostgreSQL they go through SQLAlchemy as every other statement does.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql.compiler import SQLCompiler

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
        if selected is not None:
            self.row = namedtuple("Row", [c.key for c in selected])  # type: ignore[misc]
            self.result = tuple(c.type.result_processor(dialect, None) for c in selected)

    def args(self, params: Mapping[str, Any]) -> list[Any]:
        fixed = self.fixed
        values = [params[n] if n not in fixed else fixed[n] for n in self.names]
        if self.any_bind:
            values = [v if p is None else p(v) for v, p in zip(values, self.bind, strict=True)]
        return values


class Direct:
    """A statement run on the driver's cursor on SQLite, through SQLAlchemy elsewhere.

    `column_keys` are an INSERT's columns (each execution must give exactly those)."""

    def __init__(self, stmt: sa.Executable, column_keys: Sequence[str] | None = None) -> None:
        self.stmt = stmt
        self.column_keys = tuple(column_keys) if column_keys is not None else None
        self._compiled: dict[int, _Compiled] = {}

    def _for(self, tx: Connection) -> _Compiled:
        dialect = tx.dialect
        found = self._compiled.get(id(dialect))
        if found is None:
            found = _Compiled(self.stmt, dialect, self.column_keys)  # type: ignore[arg-type]
            self._compiled[id(dialect)] = found
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

    def rowcount(self, tx: Connection, params: Mapping[str, Any]) -> int:
        """Execute once; the number of rows it changed."""
        if tx.dialect.name != "sqlite":
            return int(tx.execute(self.stmt, dict(params)).rowcount)
        compiled = self._for(tx)
        args = compiled.args(params)
        cursor = self._cursor(tx, compiled, lambda c: c.execute(compiled.sql, args), args)
        try:
            return int(cursor.rowcount)
        finally:
            cursor.close()

    def many(self, tx: Connection, rows: Iterable[Mapping[str, Any]]) -> None:
        """Execute once per row of parameters."""
        if tx.dialect.name != "sqlite":
            tx.execute(self.stmt, [dict(r) for r in rows])
            return
        compiled = self._for(tx)
        args = [compiled.args(r) for r in rows]
        self._cursor(tx, compiled, lambda c: c.executemany(compiled.sql, args), args).close()

    def all(self, tx: Connection, params: Mapping[str, Any]) -> list[Any]:
        """Every row a SELECT returns (attributes by column name)."""
        if tx.dialect.name != "sqlite":
            return list(tx.execute(self.stmt, dict(params)).all())
        compiled = self._for(tx)
        args = compiled.args(params)
        cursor = self._cursor(tx, compiled, lambda c: c.execute(compiled.sql, args), args)
        try:
            rows = cursor.fetchall()
        finally:
            cursor.close()
        if any(p is not None for p in compiled.result):
            rows = [[v if p is None else p(v) for v, p in zip(r, compiled.result, strict=True)] for r in rows]
        return [compiled.row(*r) for r in rows]

    def first(self, tx: Connection, params: Mapping[str, Any], stmt: sa.Executable | None = None) -> Any:
        """The first row a SELECT returns (attributes by column name), or None; `stmt` is the
        statement to run instead on other databases (e.g. with a row lock)."""
        if tx.dialect.name != "sqlite":
            return tx.execute(stmt if stmt is not None else self.stmt, dict(params)).first()
        compiled = self._for(tx)
        args = compiled.args(params)
        cursor = self._cursor(tx, compiled, lambda c: c.execute(compiled.sql, args), args)
        try:
            row = cursor.fetchone()
        finally:
            cursor.close()
        if row is None:
            return None
        if any(p is not None for p in compiled.result):
            row = [v if p is None else p(v) for v, p in zip(row, compiled.result, strict=True)]
        return compiled.row(*row)

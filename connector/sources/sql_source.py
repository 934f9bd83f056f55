"""Tables and queries of any database SQLAlchemy reaches, streamed in chunks.

The URL comes from the mapping (normally ``${PMS_DB_URL}``); it never appears in an error with
its password, and the password is registered as a secret (masked in every sink). An optional cursor column makes a read incremental: the caller passes the last
value it saw as ``since`` and only newer rows are read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import sqlalchemy as sa
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

from connector.errors import SourceError
from connector.secrets import register_secret
from connector.sources.base import Source, append_frames, text_frame


def safe_url(url: str) -> str:
    """The URL with its password hidden, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparseable database URL>"


class SqlSource(Source):
    def __init__(
        self,
        name: str,
        url: str,
        *,
        table: str | None = None,
        query: str | None = None,
        params: dict[str, Any] | None = None,
        cursor: str | None = None,
        null_values: list[str] | tuple[str, ...] = ("",),
        chunk_size: int = 50_000,
        base_dir: Path | None = None,
    ) -> None:
        super().__init__(name)
        if (table is None) == (query is None):
            raise SourceError("an sql input needs exactly one of table or query", source=name)
        self.url = _anchor_sqlite_path(url, base_dir) if base_dir else url
        _register_password(url)
        self.table = table
        self.query = query
        self.params = dict(params or {})
        self.cursor = cursor
        self.null_values = set(null_values)
        self.chunk_size = chunk_size
        self._engine: Engine | None = None

    def describe(self) -> str:
        return self.table or self.name

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            try:
                self._engine = sa.create_engine(self.url)
            except (ArgumentError, NoSuchModuleError) as error:
                raise SourceError(
                    f"cannot use database URL {safe_url(self.url)}: {error}", source=self.name
                ) from None
        return self._engine

    def _base_sql(self) -> str:
        if self.table is not None:
            preparer = self.engine.dialect.identifier_preparer
            return "SELECT * FROM " + ".".join(
                preparer.quote(part) for part in self.table.split(".")
            )
        return self.query.strip().rstrip(";")  # type: ignore[union-attr]

    def _select(self, since: Any) -> tuple[str, dict[str, Any]]:
        sql = f"SELECT * FROM ({self._base_sql()}) AS pms_sync_input"
        params = dict(self.params)
        if since is not None:
            if self.cursor is None:
                raise SourceError("a since value needs a cursor column", source=self.name)
            column = self.engine.dialect.identifier_preparer.quote(self.cursor)
            sql += f" WHERE pms_sync_input.{column} > :pms_sync_since"
            params["pms_sync_since"] = since
        return sql, params

    def columns(self) -> list[str]:
        sql, params = self._select(None)
        try:
            with self.engine.connect() as connection:
                result = connection.execute(sa.text(f"{sql} WHERE 1 = 0"), params)
                names = list(result.keys())
        except SQLAlchemyError as error:
            raise SourceError(
                f"cannot query {safe_url(self.url)}: {_first_line(error)}", source=self.name
            ) from None
        if self.cursor is not None and self.cursor not in names:
            raise SourceError(
                f"cursor column {self.cursor!r} is not among the columns {names}",
                source=self.name,
                field=self.cursor,
            )
        return names

    def _frames(self, columns: list[str], since: Any) -> Iterator[tuple[str, pd.DataFrame]]:
        sql, params = self._select(since)
        label = self.describe()
        try:
            with self.engine.connect() as connection:
                result = connection.execution_options(stream_results=True).execute(
                    sa.text(sql), params
                )
                while rows := result.fetchmany(self.chunk_size):
                    yield label, text_frame(rows, columns, self.null_values)
        except SQLAlchemyError as error:
            raise SourceError(
                f"cannot read from {safe_url(self.url)}: {_first_line(error)}", source=self.name
            ) from None

    def load_into(
        self, connection: duckdb.DuckDBPyConnection, table: str, since: Any = None
    ) -> int:
        columns = self.columns()
        return append_frames(connection, table, columns, self._frames(columns, since))

    def max_cursor(self, since: Any = None) -> Any:
        """The largest cursor value now in the source: what the caller passes as since next time."""
        if self.cursor is None:
            raise SourceError("this input has no cursor column", source=self.name)
        sql, params = self._select(since)
        column = self.engine.dialect.identifier_preparer.quote(self.cursor)
        with self.engine.connect() as connection:
            return connection.execute(
                sa.text(f"SELECT max({column}) FROM ({sql}) AS q"), params
            ).scalar()


def _register_password(url: str) -> None:
    """The URL's password is masked in every sink, wherever a driver might echo it."""
    try:
        password = make_url(url).password
    except ArgumentError:
        return
    if password:
        register_secret(str(password))


def _anchor_sqlite_path(url: str, base_dir: Path) -> str:
    """A relative SQLite file is relative to the mapping file, like every other path."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return url
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return url
    if database.startswith("file:") or Path(database).is_absolute():
        return url
    return parsed.set(database=str((base_dir / database).resolve())).render_as_string(
        hide_password=False
    )


def _first_line(error: SQLAlchemyError) -> str:
    return str(getattr(error, "orig", None) or error).splitlines()[0]

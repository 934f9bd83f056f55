"""Rows upserted into a table of the PMS's own database through SQLAlchemy.

The table is created when missing (the key as its primary key); an existing table must have
every column written (other columns are left alone) and the key as its primary key or a unique
key: a table keyed otherwise is refused with the statement that re-keys it, never altered here
(docs/decisions.md). Rows whose key exists are updated, the others inserted: ``INSERT … ON
CONFLICT DO UPDATE`` on PostgreSQL and SQLite, ``ON DUPLICATE KEY UPDATE`` on MySQL/MariaDB, a
delete and insert of the same keys in one transaction elsewhere. The URL's password is registered as a secret and never shown.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine.interfaces import ReflectedPrimaryKeyConstraint
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

from connector.secrets import mask_text
from connector.sources.sql_source import _anchor_sqlite_path, _register_password, safe_url
from connector.writeback._result import WriteBackError, WriteResult

BATCH_ROWS = 500
"""Rows per statement: far below every driver's parameter limit for the tables written."""

KEY_LENGTH = 255
"""Key columns are VARCHAR(255): MySQL cannot index TEXT, and ids are short."""

_TYPES: dict[str, sa.types.TypeEngine[Any]] = {
    "text": sa.Text(),
    "date": sa.Date(),
    "timestamp": sa.DateTime(),
    "boolean": sa.Boolean(),
    "bigint": sa.BigInteger(),
    "double": sa.Float(),
}


def upsert_table(
    rows: pd.DataFrame,
    url: str,
    table: str,
    *,
    key: Sequence[str],
    schema: str | None = None,
    column_types: Mapping[str, str] | None = None,
    base_dir: Path | None = None,
) -> WriteResult:
    """Upsert ``rows`` into ``table`` by ``key``; ``column_types`` (text, date, timestamp,
    boolean, bigint, double) types the columns of a table created here (default: text)."""
    _register_password(url)
    shown = f"{safe_url(url)} table {schema + '.' if schema else ''}{table}"
    missing_key = [column for column in key if column not in rows.columns]
    if missing_key:
        raise WriteBackError(
            f"{shown}: key column(s) {missing_key} are not among the columns written "
            f"({', '.join(rows.columns)})"
        )
    _refuse_repeated_keys(rows, key, shown)
    try:
        engine = sa.create_engine(_anchor_sqlite_path(url, base_dir) if base_dir else url)
    except (ArgumentError, NoSuchModuleError, ValueError) as error:
        raise WriteBackError(f"{shown}: not a usable SQLAlchemy URL ({error})") from None
    try:
        with engine.begin() as connection:
            target, created = _table(connection, table, schema, rows.columns, key, column_types)
            for batch in _batches(rows):
                _upsert(connection, target, batch, key)
    except SQLAlchemyError as error:
        detail = mask_text(str(error).splitlines()[0])
        raise WriteBackError(f"cannot write {shown}: {detail}") from None
    finally:
        engine.dispose()
    return WriteResult(destination=shown, rows=len(rows), created=created)


def _table(
    connection: sa.Connection,
    name: str,
    schema: str | None,
    columns: Sequence[str],
    key: Sequence[str],
    column_types: Mapping[str, str] | None,
) -> tuple[sa.Table, bool]:
    inspector = sa.inspect(connection)
    if inspector.has_table(name, schema=schema):
        found = sa.Table(name, sa.MetaData(), autoload_with=connection, schema=schema)
        absent = [column for column in columns if column not in found.columns]
        if absent:
            raise WriteBackError(
                f"table {name} exists without the column(s) {absent}: add them, or name a "
                "new table (pms-sync creates a missing table with every column)"
            )
        primary = inspector.get_pk_constraint(name, schema=schema)
        unique = [list(primary["constrained_columns"])] + [
            list(c["column_names"]) for c in inspector.get_unique_constraints(name, schema=schema)
        ]
        unique += [
            [str(c) for c in index["column_names"]]
            for index in inspector.get_indexes(name, schema=schema)
            if index.get("unique")
        ]
        if not any(set(candidate) == set(key) for candidate in unique if candidate):
            raise WriteBackError(_rekey_advice(connection, found, primary, key))
        return found, False
    types = column_types or {}
    created = sa.Table(
        name,
        sa.MetaData(),
        *(
            sa.Column(
                column,
                sa.String(KEY_LENGTH) if column in key else _TYPES[types.get(column, "text")],
                primary_key=column in key,
                nullable=column not in key,
            )
            for column in columns
        ),
        schema=schema,
    )
    created.create(connection)
    return created, True


def _refuse_repeated_keys(rows: pd.DataFrame, key: Sequence[str], shown: str) -> None:
    """Rows sharing a key would overwrite each other in the one write, and the count
    reported would exceed the rows the table holds."""
    repeated = rows.loc[rows.duplicated(list(key), keep=False), list(key)]
    if len(repeated):
        example = ", ".join(f"{c}={v!r}" for c, v in repeated.iloc[0].items())
        raise WriteBackError(
            f"{shown}: {len(repeated)} rows share their key ({', '.join(key)}), e.g. "
            f"{example}: each would overwrite the other; name a key that tells them apart "
            "(the destination's `key:`)"
        )


def _rekey_advice(
    connection: sa.Connection,
    table: sa.Table,
    primary_key: ReflectedPrimaryKeyConstraint,
    key: Sequence[str],
) -> str:
    """Why a table keyed otherwise is refused, and the statement that gives it ``key``."""
    primary = primary_key["constrained_columns"]
    wanted = ", ".join(key)
    extra = [column for column in key if column not in primary]
    if primary and extra:
        why = (
            f"is keyed by ({', '.join(primary)}), but rows are written by ({wanted}): rows "
            f"differing in {', '.join(extra)} alone would overwrite each other"
        )
    else:
        why = f"has no primary or unique key on ({wanted}), the key rows are written by"
    quote = connection.dialect.identifier_preparer.quote
    name = ".".join(quote(part) for part in (table.schema, table.name) if part)
    columns = ", ".join(quote(c) for c in key)
    dialect = connection.dialect.name
    if dialect == "postgresql":
        constraint = primary_key.get("name")
        drop = f"DROP CONSTRAINT {quote(constraint)}, " if primary and constraint else ""
        statement = f"ALTER TABLE {name} {drop}ADD PRIMARY KEY ({columns})"
    elif dialect in ("mysql", "mariadb"):
        # Key columns must be VARCHAR: a TEXT column cannot be indexed without a length.
        modify = "".join(f"MODIFY {quote(c)} VARCHAR({KEY_LENGTH}) NOT NULL, " for c in key)
        drop = "DROP PRIMARY KEY, " if primary else ""
        statement = f"ALTER TABLE {name} {modify}{drop}ADD PRIMARY KEY ({columns})"
    else:
        statement = (
            f"{dialect} cannot change a primary key in place: rename the table, let the next "
            f"run create it with PRIMARY KEY ({columns}), and copy the rows back"
        )
    return (
        f"table {table.name} {why}. Give it that primary key ({statement}), write to a new "
        "table, or name the table's own key in the destination (`key:`) if it tells the rows "
        "apart"
    )


def _upsert(
    connection: sa.Connection, table: sa.Table, rows: list[dict[str, Any]], key: Sequence[str]
) -> None:
    others = [column for column in rows[0] if column not in key]
    dialect = connection.dialect.name
    if dialect in ("postgresql", "sqlite"):
        insert = (postgresql if dialect == "postgresql" else sqlite).insert(table)
        statement = (
            insert.on_conflict_do_update(
                index_elements=list(key), set_={c: insert.excluded[c] for c in others}
            )
            if others
            else insert.on_conflict_do_nothing(index_elements=list(key))
        )
        connection.execute(statement, rows)
    elif dialect in ("mysql", "mariadb"):
        insert = mysql.insert(table)
        assignments = {c: insert.inserted[c] for c in others or key}
        connection.execute(insert.on_duplicate_key_update(assignments), rows)
    else:
        # Any other database: the same keys deleted, then inserted, in the one transaction.
        keys = [tuple(row[c] for c in key) for row in rows]
        connection.execute(table.delete().where(sa.tuple_(*(table.c[c] for c in key)).in_(keys)))
        connection.execute(table.insert(), rows)


def _batches(rows: pd.DataFrame) -> Iterator[list[dict[str, Any]]]:
    records = [{k: _plain(v) for k, v in row.items()} for row in rows.to_dict(orient="records")]
    for start in range(0, len(records), BATCH_ROWS):
        yield records[start : start + BATCH_ROWS]


def _plain(value: Any) -> Any:
    """A value every DBAPI driver takes: missing values as None, pandas types as Python's."""
    if value is None or value is pd.NaT:
        return None
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    if hasattr(value, "item") and not isinstance(value, str | bytes | date | datetime):
        return value.item()  # numpy scalars
    return value

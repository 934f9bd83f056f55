"""Arrow-native reads of PostgreSQL, MySQL/MariaDB and SQLite, straight into DuckDB.

PostgreSQL and SQLite are read through their ADBC drivers (a query without bind parameters
as PostgreSQL's binary ``COPY``), MySQL and MariaDB through connectorx. Rows never become
Python objects: each column of a batch is turned into text with Arrow's compute functions.

The text of every value is exactly what the SQLAlchemy reader gives it (``base.to_text`` of
the DB-API driver's Python value), so both readers send byte-identical payloads. Where the
two drivers do not see a value alike (a column type this module cannot render exactly, a
SQLite column mixing storage classes, a bind parameter), the input is read through
SQLAlchemy instead: ``Unsupported`` says so before any row is kept.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from decimal import Decimal
from typing import Any, TypeAlias
from urllib.parse import quote, urlencode
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy.engine import URL

from connector.sources.base import to_text

__all__ = ["ARROW_BACKENDS", "Unsupported", "arrow_driver", "read_arrow"]

# SQLAlchemy backend name → the package that reads it as Arrow.
ARROW_BACKENDS = {
    "postgresql": "adbc_driver_postgresql",
    "sqlite": "adbc_driver_sqlite",
    "mysql": "connectorx",
    "mariadb": "connectorx",
}

TextArray: TypeAlias = "pa.Array | pa.ChunkedArray"
Render: TypeAlias = Callable[[pa.Array], TextArray]


class Unsupported(Exception):
    """The Arrow reader cannot give this input's values exactly as the SQLAlchemy reader."""


def arrow_driver(url: URL) -> str | None:
    """The package reading ``url``'s database as Arrow, when it is installed; else None."""
    package = ARROW_BACKENDS.get(url.get_backend_name())
    if package is None or importlib.util.find_spec(package) is None:
        return None
    return package


def read_arrow(
    url: URL, sql: str, quote: Callable[[str], str], columns: list[str], chunk_size: int
) -> AbstractContextManager[Iterator[list[TextArray]]]:
    """The rows of ``sql`` (no bind parameters) as lists of text arrays, one per column,
    ``chunk_size`` rows or so at a time; raises Unsupported before the first list when a
    column cannot be rendered exactly."""
    backend = url.get_backend_name()
    if backend == "postgresql":
        return _postgresql(url, sql, chunk_size)
    if backend == "sqlite":
        return _sqlite(url, sql, chunk_size)
    if backend in ("mysql", "mariadb"):
        return _mysql(url, sql, quote, columns, chunk_size)
    raise Unsupported(f"no Arrow reader for {backend}")


# ------------------------------------------------------------------------------ PostgreSQL


@contextmanager
def _postgresql(url: URL, sql: str, chunk_size: int) -> Iterator[Iterator[list[TextArray]]]:
    import adbc_driver_postgresql.dbapi as adbc

    uri = _libpq_uri(url)
    with adbc.connect(uri) as connection, connection.cursor() as cursor:
        # psycopg gives a timestamptz in the session's time zone: the same zone here.
        cursor.execute("SELECT current_setting('TimeZone')")
        row = cursor.fetchone()
        zone = _zone(str(row[0]) if row else "UTC")
        cursor.execute(sql)
        reader = cursor.fetch_record_batch()
        renders = [_postgresql_render(field.type, zone) for field in reader.schema]
        yield _rendered(reader, renders)


def _libpq_uri(url: URL) -> str:
    """libpq's URI of ``url``: its query percent-encoded (libpq reads no ``+`` as a space)."""
    base = url.set(drivername="postgresql", query={}).render_as_string(hide_password=False)
    pairs = [
        (key, item)
        for key, value in url.query.items()
        for item in ((value,) if isinstance(value, str) else value)
    ]
    return f"{base}?{urlencode(pairs, quote_via=quote)}" if pairs else base


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")  # what psycopg falls back to for a zone Python does not know


def _postgresql_render(kind: pa.DataType, zone: ZoneInfo) -> Render:
    if isinstance(kind, pa.OpaqueType):
        if kind.type_name == "numeric":
            return _decimal_texts
        raise Unsupported(f"PostgreSQL type {kind.type_name}")
    if isinstance(kind, pa.JsonType):
        # psycopg loads json and jsonb with json.loads.
        return _python(lambda text: json.loads(text))
    if isinstance(kind, pa.UuidType):
        return _python(lambda value: value)  # uuid.UUID, as psycopg gives it
    if pa.types.is_float32(kind):
        # psycopg parses float4's shortest text; Arrow holds the nearest float32.
        return _python(_float32_value)
    if pa.types.is_timestamp(kind) and kind.tz is not None:
        return _python(lambda moment: moment.astimezone(zone))
    return _common_render(kind)


def _float32_value(value: float) -> float:
    import numpy as np

    return float(str(np.float32(value)))


# ---------------------------------------------------------------------------------- SQLite


@contextmanager
def _sqlite(url: URL, sql: str, chunk_size: int) -> Iterator[Iterator[list[TextArray]]]:
    import adbc_driver_sqlite.dbapi as adbc

    database = url.database or ":memory:"
    try:
        with adbc.connect(database) as connection, connection.cursor() as cursor:
            cursor.adbc_statement.set_options(
                **{"adbc.sqlite.query.batch_rows": str(min(chunk_size, 1_000_000))}
            )
            cursor.execute(sql)
            reader = cursor.fetch_record_batch()
            renders = [_sqlite_render(field.type) for field in reader.schema]
            yield _checked(_rendered(reader, renders))
    except OSError as error:
        raise Unsupported(str(error)) from None


def _sqlite_render(kind: pa.DataType) -> Render:
    # sqlite3 gives each value its own storage class; ADBC types a column by its first rows
    # and reads a later integer into a double column as a float (2 becomes 2.0).
    if pa.types.is_floating(kind):
        raise Unsupported("a SQLite column of real values")
    return _common_render(kind)


def _checked(batches: Iterator[list[TextArray]]) -> Iterator[list[TextArray]]:
    """A later value whose storage class does not fit its column's type is a driver error
    mid-read: the caller reads the input again through SQLAlchemy."""
    try:
        yield from batches
    except OSError as error:
        raise Unsupported(str(error)) from None


# --------------------------------------------------------------------------- MySQL, MariaDB


@contextmanager
def _mysql(
    url: URL, sql: str, quote: Callable[[str], str], columns: list[str], chunk_size: int
) -> Iterator[Iterator[list[TextArray]]]:
    import connectorx as cx
    from pymysql import converters

    uri = url.set(drivername="mysql", query={}).render_as_string(hide_password=False)
    try:
        schema = cx.read_sql(uri, f"SELECT * FROM ({sql}) AS q LIMIT 0", return_type="arrow")
    except BaseException as error:  # a Rust panic derives from BaseException
        if isinstance(error, KeyboardInterrupt | SystemExit):
            raise
        raise Unsupported(str(error).splitlines()[0] if str(error) else repr(error)) from None
    renders = [_mysql_render(field.type, converters) for field in schema.schema]
    # The server's own text of every value, as PyMySQL receives it: connectorx then only
    # moves text, and a zero date stays the text it is.
    texts = ", ".join(f"CAST(q.{quote(name)} AS CHAR) AS {quote(name)}" for name in columns)
    reader = cx.read_sql(
        uri,
        f"SELECT {texts} FROM ({sql}) AS q",
        return_type="arrow_stream",
        batch_size=chunk_size,
    )
    yield _rendered(reader, renders)


def _mysql_render(kind: pa.DataType, converters: Any) -> Render:
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        raise Unsupported("a MySQL binary column")
    if pa.types.is_integer(kind) or pa.types.is_boolean(kind) or pa.types.is_date(kind):
        return _same
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return _same
    if pa.types.is_decimal(kind):
        return _decimal_texts
    if pa.types.is_timestamp(kind) or pa.types.is_date64(kind):
        return _datetime_texts(converters.convert_datetime)
    if pa.types.is_time(kind):
        return _python(converters.convert_timedelta)
    if pa.types.is_floating(kind):
        return _python(float)
    raise Unsupported(f"MySQL column of Arrow type {kind}")


def _datetime_texts(convert: Callable[[str], Any]) -> Render:
    """PyMySQL parses a DATETIME and Python writes it back: the same text but for a fraction
    (``.5`` becomes ``.500000``, ``.000`` goes), so only values with one go through Python."""

    def render(array: pa.Array) -> TextArray:
        fraction = pc.match_substring(array, ".")
        if not pc.any(fraction).as_py():
            return array
        return _python(convert)(array)

    return render


# -------------------------------------------------------------------------------- rendering


def _rendered(reader: Any, renders: list[Render]) -> Iterator[list[TextArray]]:
    for batch in reader:
        if batch.num_rows:
            yield [render(column) for render, column in zip(renders, batch.columns, strict=True)]


def _common_render(kind: pa.DataType) -> Render:
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return _same
    if pa.types.is_integer(kind) or pa.types.is_date32(kind) or pa.types.is_boolean(kind):
        # Arrow writes these as Python's str() and isoformat() do ('true', '0001-01-01').
        return _cast
    if pa.types.is_timestamp(kind) and kind.unit == "us":
        return _timestamp_texts
    if pa.types.is_null(kind):
        return lambda array: pa.nulls(len(array), pa.string())
    if pa.types.is_floating(kind) or pa.types.is_time(kind) or pa.types.is_binary(kind):
        return _python(lambda value: value)
    raise Unsupported(f"Arrow type {kind}")


def _same(array: pa.Array) -> TextArray:
    return array


def _cast(array: pa.Array) -> TextArray:
    return pc.cast(array, pa.string())


def _timestamp_texts(array: pa.Array) -> TextArray:
    # isoformat leaves the fraction out when it is zero; Arrow always writes six digits.
    return pc.replace_substring_regex(pc.cast(array, pa.string()), r"\.000000$", "")


def _decimal_texts(array: pa.Array) -> TextArray:
    """A decimal's text as str(Decimal(text)): the same but for magnitudes below 1e-6, which
    Decimal writes with an exponent (0.0000001 → 1E-7)."""
    if isinstance(array, pa.ExtensionArray):
        array = array.storage
    if not pa.types.is_string(array.type) and not pa.types.is_large_string(array.type):
        raise Unsupported(f"decimal as {array.type}")
    small = pc.match_substring_regex(array, r"^-?0\.000000")
    if not pc.any(small).as_py():
        return array
    return _python(Decimal)(array)


def _python(load: Callable[[Any], Any]) -> Render:
    """Values through the DB-API driver's own conversion and ``to_text``: for the few types
    whose text Arrow cannot give alike."""

    def render(array: pa.Array) -> TextArray:
        if isinstance(array, pa.ExtensionArray) and not isinstance(array.type, pa.UuidType):
            array = array.storage
        return pa.array(
            [None if value is None else to_text(load(value)) for value in array.to_pylist()],
            pa.string(),
        )

    return render

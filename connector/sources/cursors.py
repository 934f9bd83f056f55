"""The largest cursor value among the rows a run loaded into the engine's DuckDB table, whose
values are all the text ``base.to_text`` gives them (``connector.cursors`` keeps it)."""

from __future__ import annotations

import duckdb

from connector.cursors import CursorKind, CursorValue
from connector.sources.base import quote_identifier

__all__ = ["largest_cursor"]


_INTEGER = r"^[+-]?[0-9]+$"
_DECIMAL = r"^[+-]?[0-9]*\.[0-9]+$"
_DATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_OFFSET = r"([+-][0-9]{2}(:?[0-9]{2})?|Z)$"


def largest_cursor(
    connection: duckdb.DuckDBPyConnection, table: str, column: str, *, text: bool = False
) -> CursorValue | None:
    """The largest value of ``column`` in the loaded ``table`` (None: no value), compared as
    the kind every value of the column reads as: integers, decimals, dates, timestamps (with
    offsets or without), else text; as text when the source column is text (``text``), as
    the database compares it."""
    quoted = quote_identifier(column)
    source = f"(SELECT {quoted} AS v FROM {quote_identifier(table)} WHERE {quoted} IS NOT NULL)"
    if text:
        ((largest,),) = connection.execute(f"SELECT max(v) FROM {source}").fetchall()
        return None if largest is None else CursorValue(str(largest), CursorKind.TEXT)
    ((integers, decimals, dates, stamps, offsets, total),) = connection.execute(
        "SELECT count(*) FILTER (regexp_full_match(v, ?)), "
        "count(*) FILTER (regexp_full_match(v, ?) OR regexp_full_match(v, ?)), "
        "count(*) FILTER (regexp_full_match(v, ?)), "
        "count(*) FILTER (TRY_CAST(v AS TIMESTAMPTZ) IS NOT NULL), "
        "count(*) FILTER (regexp_matches(v, ?)), count(*) "
        f"FROM {source}",
        [_INTEGER, _INTEGER, _DECIMAL, _DATE, _OFFSET],
    ).fetchall()
    if not total:
        return None
    if integers == total:
        kind, order = CursorKind.INTEGER, "CAST(v AS HUGEINT)"
    elif decimals == total:
        kind, order = CursorKind.DECIMAL, "CAST(v AS DOUBLE)"
    elif dates == total:
        kind, order = CursorKind.DATE, "CAST(v AS DATE)"
    elif stamps == total and offsets == total:
        kind, order = CursorKind.TIMESTAMPTZ, "CAST(v AS TIMESTAMPTZ)"
    elif stamps == total and not offsets:
        kind, order = CursorKind.TIMESTAMP, "CAST(v AS TIMESTAMP)"
    else:
        kind, order = CursorKind.TEXT, "v"
    # The text of the largest value, as read: it is bound back as it was.
    ((text,),) = connection.execute(f"SELECT arg_max(v, {order}) FROM {source}").fetchall()
    return CursorValue(str(text), kind)

"""The accepted records of an entity query are held compressed while the queries run, and come
back exactly as they went in: same rows, order, types and text."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from connector.mapping.validation import _RESULT_SCHEMA, CompressedTables


def _table(start: int, count: int) -> pa.Table:
    rows = range(start, start + count)
    return pa.table(
        {
            "account_id": [f"acc-{i % 3}" for i in rows],
            "record_id": [f"R{i}" for i in rows],
            # Text such as the documents: repetitive JSON, with non-ASCII and escapes.
            "payload": [
                f'{{"guest":"Zoë \\"{i}\\"","id":"R{i}","notes":"{"ß" * (i % 7)}","units":[]}}'
                for i in rows
            ],
            "content_hash": [f"{i:032x}" for i in rows],
            "checkin": [dt.date(2026, 1, 1) + dt.timedelta(days=i % 90) for i in rows],
            "checkout": [None if i % 5 == 0 else dt.date(2026, 4, 1) for i in rows],
            "source_rows": [f"bookings.csv:{i + 1}" for i in rows],
        },
        schema=_RESULT_SCHEMA,
    )


def test_tables_come_back_identical_and_in_order_and_the_streams_are_released() -> None:
    tables = [_table(0, 5_000), _table(5_000, 0), _table(5_000, 3), _table(5_003, 2_000)]
    held = CompressedTables()
    for table in tables:
        held.append(table)
    assert held.nbytes > 0

    expanded = held.expand()

    assert [table.num_rows for table in expanded] == [5_000, 0, 3, 2_000]
    for before, after in zip(tables, expanded, strict=True):
        assert after.schema == _RESULT_SCHEMA
        assert after.equals(before)
    # Expanding hands the tables over: nothing compressed is kept besides them.
    assert held.nbytes == 0
    assert held.expand() == []


def test_documents_are_held_in_a_fraction_of_their_size() -> None:
    table = _table(0, 20_000)
    held = CompressedTables()
    held.append(table)
    assert held.nbytes < table.nbytes / 3

"""The floor: the same logical work as a pms-sync run, in DuckDB alone, for the hotel export.

``python -m bench.floor full|fingerprint DATA STATE`` times one run on the export in ``DATA``
(the hotel example's ``bookings.csv``) against a state file made by ``prepare``:

- **full**: read the export, build every reservation's JSON document (the same text pms-sync
  sends, byte for byte: ``check`` proves it), hash it without its volatile member, and
  anti-join the hashes against a table of what was sent (one row per reservation);
- **fingerprint**: first hash the raw rows per reservation and anti-join those against the
  stored fingerprints; only the reservations whose rows changed get a document, a hash and the
  anti-join against what was sent.

No validation, no quarantine, no reconciliation, no snapshot bookkeeping, no Python per row:
what no implementation of the task can avoid. Each run prints one JSON line (seconds, the
reservations found changed, peak resident memory); ``bench.harness`` times it interleaved with
pms-sync and reports pms-sync ÷ floor. DuckDB gets the same 1 GB as pms-sync's engine.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

import duckdb

MEMORY_LIMIT = "1GB"
SLICE_ROWS = 1_000_000
"""Rows grouped into documents at once: DuckDB cannot spill the list aggregate a document's
units are built with, so a larger export is grouped a hash partition of its reservations at a
time (as pms-sync's mapping is, ``PMS_SYNC_SLICE_ROWS``)."""

# hotel_code → account, as the example mapping's lookup with its environment defaults.
ACCOUNTS = "CASE hotel_code WHEN 'BER' THEN 'demo' WHEN 'MUC' THEN 'demo-2' END"
STATUS = (
    "CASE status WHEN 'confirmed' THEN 'CONFIRMED' WHEN 'modified' THEN 'MODIFIED' "
    "WHEN 'cancelled' THEN 'CANCELLED' ELSE 'CONFIRMED' END"
)


def _member(name: str, value: str) -> str:
    """One JSON member, NULL (left out by concat_ws) when the value is NULL."""
    return f"""'"{name}":' || {value}"""


def _text(column: str) -> str:
    return f"to_json({column})"


def _number(column: str) -> str:
    return f"CAST(CAST({column} AS DOUBLE) AS VARCHAR)"


def _integer(column: str) -> str:
    return f"CAST(CAST({column} AS BIGINT) AS VARCHAR)"


# The nearest half hour, halves up ("16:45:00" → "17:00"), as the mapping's time conversion.
_HALF_HOUR = (
    "(SELECT lpad(CAST(m // 60 AS VARCHAR), 2, '0') || ':' || lpad(CAST(m % 60 AS VARCHAR), 2, "
    "'0') FROM (SELECT CAST(floor((CAST(split_part(eta, ':', 1) AS INT) * 60 + "
    "CAST(split_part(eta, ':', 2) AS INT)) / 30.0 + 0.5) * 30 AS INT) AS m))"
)


def _object(*members: str) -> str:
    return "'{' || concat_ws(',', " + ", ".join(members) + ") || '}'"


UNIT = _object(
    _member("adults", _integer("adults")),
    _member("checkin", _text("arrival")),
    _member("checkout", _text("departure")),
    _member("children", _integer("children")),
    _member("currency", _text("currency")),
    _member("estimatedCheckInTime", f"to_json({_HALF_HOUR})"),
    _member("id", "to_json(booking_no || '-' || line_no)"),
    _member("paidAmount", _number("paid")),
    _member("price", _number("price")),
    _member("status", f"to_json({STATUS})"),
    _member("unitId", "to_json(hotel_code || '-' || room_no)"),
    _member("unitName", "to_json('Room ' || room_no)"),
    _member("unitRoomTypeCode", _text("room_type")),
)
GUEST = _object(
    _member("country", _text("guest_country")),
    _member("email", _text("guest_email")),
    _member("firstName", _text("guest_first_name")),
    _member("language", _text("guest_language")),
    _member("lastName", _text("guest_last_name")),
    _member("phone", _text("guest_phone")),
)


def _document(with_updated_at: bool) -> str:
    members = [
        _member("channelName", _text("any_value(channel)")),
        _member("createdAt", _text("any_value(created_at)")),
        _member("id", _text("booking_no")),
        _member("primaryGuest", "any_value(guest)"),
        _member("ratePlan", _text("any_value(rate_plan)")),
        _member("status", f"to_json(any_value({STATUS}))"),
        # Units in check-in order, then by id, as pms-sync orders them.
        _member(
            "unitReservations",
            "'[' || array_to_string(list(unit ORDER BY arrival, unit_id), ',') || ']'",
        ),
    ]
    if with_updated_at:
        members.append(_member("updatedAt", _text("any_value(modified_at)")))
    return _object(*members)


def _rows_sql(data: Path) -> str:
    return f"read_csv({str(data / 'bookings.csv')!r}, all_varchar = true, header = true)"


def _documents_sql(rows: str, part: tuple[int, int] = (0, 1)) -> str:
    """account_id, record_id, payload, content_hash of every reservation in ``rows`` (of the
    ``part`` = (index, count) hash partition of the reservations only)."""
    index, count = part
    within = "" if count == 1 else f"WHERE hash(hotel_code, booking_no) % {count} = {index}"
    return f"""
        SELECT {ACCOUNTS} AS account_id, booking_no AS record_id,
               {_document(True)} AS payload, md5({_document(False)}) AS content_hash
        FROM (SELECT *, {UNIT} AS unit, {GUEST} AS guest,
                     booking_no || '-' || line_no AS unit_id FROM {rows} {within})
        GROUP BY hotel_code, booking_no
    """


def _parts(connection: duckdb.DuckDBPyConnection, rows: str) -> tuple[str, list[tuple[int, int]]]:
    """``rows`` loaded once into a table when they are grouped in several partitions, and the
    partitions (:data:`SLICE_ROWS` rows each at most)."""
    (found,) = connection.execute(f"SELECT count(*) FROM {rows}").fetchone()  # type: ignore[misc]
    count = max(1, -(-int(found) // SLICE_ROWS))
    if count == 1:
        return rows, [(0, 1)]
    connection.execute(f"CREATE TEMP TABLE bookings AS SELECT * FROM {rows}")
    return "bookings", [(index, count) for index in range(count)]


_ROW_FINGERPRINTS = """
    SELECT {accounts} AS account_id, booking_no AS record_id,
           CAST(hash(sum(CAST(hash(*COLUMNS(*)) AS HUGEINT)), count(*)) >> 1 AS BIGINT)
               AS fingerprint
    FROM {rows} GROUP BY hotel_code, booking_no
"""


def _connect(database: str) -> duckdb.DuckDBPyConnection:
    connection = duckdb.connect(database, config={"memory_limit": MEMORY_LIMIT})
    connection.execute("SET enable_progress_bar = false")
    # As pms-sync's mapping connection: no order is read, and keeping it costs memory.
    connection.execute("SET preserve_insertion_order = false")
    return connection


def prepare(data: Path, state: Path) -> dict[str, Any]:
    """What a first run leaves: the hashes sent and the source fingerprints (untimed)."""
    state.unlink(missing_ok=True)
    with _connect(str(state)) as connection:
        rows, parts = _parts(connection, _rows_sql(data))
        connection.execute(
            "CREATE TABLE sent (account_id VARCHAR, record_id VARCHAR, content_hash VARCHAR)"
        )
        for part in parts:
            connection.execute(
                f"INSERT INTO sent SELECT account_id, record_id, content_hash "
                f"FROM ({_documents_sql(rows, part)})"
            )
        connection.execute(
            "CREATE TABLE fingerprints AS " + _ROW_FINGERPRINTS.format(accounts=ACCOUNTS, rows=rows)
        )
        (count,) = connection.execute("SELECT count(*) FROM sent").fetchone()  # type: ignore[misc]
    return {"sent": count}


def run(variant: str, data: Path, state: Path) -> dict[str, Any]:
    started = time.perf_counter()
    with _connect(":memory:") as connection:
        connection.execute(f"ATTACH {str(state)!r} AS state (READ_ONLY)")
        rows = _rows_sql(data)
        if variant == "fingerprint":
            connection.execute(f"CREATE TEMP TABLE export AS SELECT * FROM {rows}")
            fingerprints = _ROW_FINGERPRINTS.format(accounts=ACCOUNTS, rows="export")
            connection.execute(
                f"CREATE TEMP TABLE changed_keys AS SELECT account_id, record_id "
                f"FROM ({fingerprints}) ANTI JOIN state.fingerprints "
                f"USING (account_id, record_id, fingerprint)"
            )
            rows = (
                f"(SELECT * FROM export SEMI JOIN changed_keys "
                f"ON changed_keys.account_id = {ACCOUNTS} "
                f"AND changed_keys.record_id = export.booking_no)"
            )
        rows, parts = (rows, [(0, 1)]) if variant == "fingerprint" else _parts(connection, rows)
        changed = 0
        for part in parts:
            # sum(length(payload)): every changed document is written out in full.
            (found, _) = connection.execute(
                f"SELECT count(*), sum(length(payload)) FROM ({_documents_sql(rows, part)}) AS d "
                f"ANTI JOIN state.sent USING (account_id, record_id, content_hash)"
            ).fetchone()  # type: ignore[misc]
            changed += int(found)
    return {
        "seconds": time.perf_counter() - started,
        "changed": changed,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def check(data: Path, mapping: Path) -> dict[str, Any]:
    """Prove the floor builds pms-sync's documents byte for byte on the same export."""
    from connector.contract import Entity
    from connector.pipeline import load_batches

    batches, _ = load_batches(mapping)
    ours = batches[Entity.RESERVATION].records
    keys = zip(ours["account_id"], ours["record_id"], strict=True)
    expected = dict(zip(keys, ours["payload"], strict=True))
    with _connect(":memory:") as connection:
        floor = connection.execute(_documents_sql(_rows_sql(data))).fetchall()
    found = {(account, record): payload for account, record, payload, _ in floor}
    differing = [key for key, payload in expected.items() if found.get(key) != payload]
    return {
        "reservations": len(expected),
        "floor_reservations": len(found),
        "identical": len(expected) - len(differing),
        "differing_sample": [
            {"pms_sync": expected[key], "floor": found.get(key)} for key in differing[:2]
        ],
    }


def main() -> None:
    command, *arguments = sys.argv[1:]
    if command == "prepare":
        result = prepare(Path(arguments[0]), Path(arguments[1]))
    elif command == "check":
        result = check(Path(arguments[0]), Path(arguments[1]))
    else:
        result = run(command, Path(arguments[0]), Path(arguments[1]))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

"""Checking every mapped document against the contract and splitting records from quarantine.

DuckDB writes each record's canonical JSON (``connector.canonical``: sorted keys, unset members
left out) and the text its hash is taken of. Most records then cost no Python of their own:
the contract's checks, compiled to SQL predicates over the typed values
(``connector.mapping.contract_sql``), already tell DuckDB they surely pass, and their payloads
stay Arrow text. Records the predicates do not vouch for are validated a batch per call by a
twin of the contract that builds no objects (``connector.mapping.fast_validation.bulk_validator``).
The rest (a conversion error, a conflicting duplicate, anything the twin refuses or whose text
DuckDB might spell differently from Python) takes the record-by-record path through the
contract model, whose verdict and messages are the contract's own.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, field
from datetime import date
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from connector.canonical import canonical_json, content_hash
from connector.config import InputSection
from connector.contract import RESOURCES, Entity
from connector.mapping.fast_validation import bulk_validator, sure_validator
from connector.records import (
    QUARANTINE_COLUMNS,
    RECORD_COLUMNS,
    MappedRecords,
    empty_quarantine,
    empty_records,
)
from connector.secrets import is_sensitive, mask_text, mask_value

DUPLICATE_REASON = "duplicate key with conflicting content"
MISSING_REASON = "missing required value"
NO_UNITS_REASON = "no unit rows: no row of this reservation passes the unitReservations filter"


SUPPORTED_DATES = ("1677-09-22", "2262-04-11")
"""The dates pandas' datetime64[ns] can hold (the plan's check-in/check-out columns)."""

FAST_PATH_ENV = InputSection.variable("fast_path")
"""Set to 0 to send every record through the contract model (the slower reference path)."""

SQL_CHECKS_ENV = InputSection.variable("sql_checks")
"""Set to 0 to ignore the contract checks compiled to SQL (every fast record meets the twin)."""

VERIFY_ENV = InputSection.variable("verify_fast_path")
"""When set, every record of the fast path is also run through the contract model and the
Python canonical form, and any difference raises (the test suite sets it)."""

MAPPED_COLUMNS: tuple[str, ...] = (
    "account_id",
    "record_id",
    "payload",  # canonical JSON written by DuckDB
    "hash_text",  # the payload without volatile members; NULL when it is the payload itself
    "conflicting",
    "checked",  # the contract's checks compiled to SQL surely pass (contract_sql)
    "errors",
    "sources",
    "row_numbers",
    "checkin",
    "checkout",
    "fast",  # nothing but the contract itself can fail this record
    "validated",  # the payload was validated in an earlier run (the snapshot knows it)
)
"""Columns the entity query returns, one row per candidate record."""

_KEPT_COLUMNS = [
    "account_id",
    "record_id",
    "payload",
    "checkin",
    "checkout",
    "sources",
    "row_numbers",
]
"""Columns of an accepted record the result keeps (or derives its own from)."""
_HASHED = ["payload", "hash_text"]

TWIN_CHUNK = 2_000
"""Documents validated per call of the bulk twin."""

_RESULT_SCHEMA = pa.schema(
    [
        ("account_id", pa.large_string()),
        ("record_id", pa.large_string()),
        ("payload", pa.large_string()),
        ("content_hash", pa.large_string()),
        ("checkin", pa.date32()),
        ("checkout", pa.date32()),
        ("source_rows", pa.large_string()),
    ]
)


class CompressedTables:
    """Accepted records held as LZ4-compressed Arrow IPC, one stream per table, until the
    entity queries are done.

    The documents are most of what a first run's mapping holds and compress about 4 to 1.
    Compressed, they no longer add up with
    the DuckDB memory of the queries still running (the loaded inputs, hash tables); they are
    expanded once the engine's database is closed (``connector.mapping.engine``), each stream
    freed as its table is read. Zstandard compresses 8 to 1 but took ≈ 1.5 s more at 1M for
    the same peak, which comes after the expansion.
    """

    def __init__(self) -> None:
        self._streams: list[pa.Buffer] = []

    @property
    def nbytes(self) -> int:
        """The compressed size held."""
        return sum(stream.size for stream in self._streams)

    def append(self, table: pa.Table) -> None:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema, options=_IPC_OPTIONS) as writer:
            writer.write_table(table)
        self._streams.append(sink.getvalue())

    def expand(self) -> list[pa.Table]:
        """The tables, in the order appended; the compressed streams are released."""
        tables = []
        while self._streams:
            tables.append(pa.ipc.open_stream(self._streams.pop(0)).read_all())
        return tables


_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")


@dataclass
class _Quarantine:
    entity: Entity
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    checkin: str | None = None  # of the row being validated (ISO text), recorded with its problems
    first_row: str = ""  # of the record being validated: the export order of its problems
    order: list[str] = field(default_factory=list)  # ``first_row`` of each of ``rows``

    def add(
        self,
        account_id: str | None,
        record_id: str | None,
        source: str,
        rows: str,
        path: str,
        reason: str,
        value: Any = None,
    ) -> None:
        shown = "" if value is None or isinstance(value, dict | list) else str(value)
        if shown and is_sensitive(path.rsplit(".", 1)[-1]):
            shown = mask_value(shown)
        # A token interpolated into a mapped field (${PMS_SYNC_TOKEN}) would otherwise be kept
        # and printed here. Ids stay as they are: the plan matches quarantined ids to the
        # snapshot, and the sinks that print them mask them on their own.
        shown, reason = mask_text(shown), mask_text(reason)
        self.order.append(self.first_row)
        self.rows.append(
            (
                self.entity.value,
                account_id or "",
                record_id or "",
                source,
                rows,
                path,
                reason,
                shown,
                self.checkin or "",
            )
        )


def _describe(problem: ErrorDetails) -> tuple[str, str, Any]:
    """The field path, the reason and the offending value of one pydantic error."""
    path = ".".join(str(part) for part in problem["loc"])
    value = problem.get("input")
    if value is None or problem["type"] == "missing":
        return path, MISSING_REASON, None
    message = str(problem["msg"]).removeprefix("Value error, ")
    if isinstance(value, str | int | float | bool) and is_sensitive(path.rsplit(".", 1)[-1]):
        message = message.replace(repr(value), mask_value(value))
    return path, message, value


class RecordValidator:
    """Validates the mapped rows of one entity batch by batch and collects the outcome.

    Batches keep memory bounded: only the validated payloads stay (as compressed Arrow,
    ``CompressedTables``), the rest of a batch is dropped once it is done.
    """

    def __init__(
        self, entity: Entity, volatile: list[str] | tuple[str, ...], *, hash_in_python: bool = False
    ) -> None:
        self.entity = entity
        self.validate = RESOURCES[entity].model_validate_json
        # Native checks first; the contract model decides whatever they do not surely accept.
        self.validate_sure = sure_validator(RESOURCES[entity]).validate_json
        self.validate_bulk = bulk_validator(RESOURCES[entity]).validate_json
        self.volatile = tuple(volatile)
        self.hash_in_python = hash_in_python
        inputs = InputSection.read()
        self.verify = inputs.verify_fast_path
        self.fast_path = inputs.fast_path
        self.sql_checks = inputs.sql_checks
        self.checked_count = 0  # accepted on the SQL predicates alone
        self.quarantine = _Quarantine(entity)
        self.accepted = CompressedTables()
        self.known_count = 0  # accepted as validated in an earlier run

    def add(self, batch: pa.RecordBatch) -> None:
        missing = set(MAPPED_COLUMNS) - set(batch.schema.names)
        if missing:
            raise AssertionError(f"the entity query lacks the columns {sorted(missing)}")
        fast = batch.column("fast").fill_null(False).to_numpy(zero_copy_only=False)
        if not self.fast_path:
            fast = np.zeros(len(fast), dtype=bool)
        known = batch.column("validated").fill_null(False).to_numpy(zero_copy_only=False)
        checked = batch.column("checked").fill_null(False).to_numpy(zero_copy_only=False)
        if not self.sql_checks:
            checked = np.zeros(len(fast), dtype=bool)
        payloads = batch.column("payload")
        # A payload validated before under this contract (the snapshot says) is valid as is,
        # and so is one whose every value the SQL predicates vouch for.
        self.known_count += int(np.count_nonzero(fast & known))
        self.checked_count += int(np.count_nonzero(fast & ~known & checked))
        accepted = np.flatnonzero(fast & (known | checked)).tolist()
        fast_positions = np.flatnonzero(fast & ~known & ~checked).tolist()
        slow = np.flatnonzero(~fast).tolist()
        if fast_positions:
            texts = pc.take(payloads, pa.array(fast_positions)).to_pylist()
            refused = self._refused_by_twin(texts)
            for index, position in enumerate(fast_positions):
                (slow if index in refused else accepted).append(position)
        # In batch order: a whole batch accepted is hashed where it is (_accepted).
        accepted.sort()
        if accepted:
            self.accepted.append(self._accepted(batch, accepted))
        if slow:
            self.accepted.append(self._one_by_one(batch, slow))

    def _refused_by_twin(self, texts: list[str]) -> set[int]:
        refused: set[int] = set()
        # Chunks bound the objects the twin builds (and drops) at once.
        for start in range(0, len(texts), TWIN_CHUNK):
            try:
                self.validate_bulk("[" + ",".join(texts[start : start + TWIN_CHUNK]) + "]")
            except ValidationError as error:
                refused.update(
                    start + problem["loc"][0]  # type: ignore[operator]
                    for problem in error.errors(include_url=False)
                )
        return refused

    def _accepted(self, batch: pa.RecordBatch, positions: list[int]) -> pa.Table:
        """Records accepted without the contract model: payload and hashed text from DuckDB."""
        indices = pa.array(positions)
        # A copy of the columns kept: a column imported from DuckDB keeps every buffer of its
        # batch alive (Arrow's C data import shares one release for the whole batch).
        taken = batch.select(_KEPT_COLUMNS).take(indices)
        payloads = taken.column("payload")
        # The hashed text is read where it is when the whole batch is accepted (most often).
        hashing = batch if len(positions) == batch.num_rows else batch.select(_HASHED).take(indices)
        digests: pa.Array
        if self.hash_in_python:
            digests = pa.array(
                [content_hash(orjson.loads(text), self.volatile) for text in payloads.to_pylist()],
                pa.large_string(),
            )
        else:
            hash_text = hashing.column("hash_text")
            # The hashed text is the payload itself unless volatile members were cut out.
            if hash_text.null_count == len(hash_text):
                hashed = hashing.column("payload")
            elif hash_text.null_count == 0:
                hashed = hash_text
            else:
                hashed = pc.coalesce(hash_text, hashing.column("payload"))
            digests = blake2b_hex(hashed)
        if self.verify:
            self._verify(payloads.to_pylist(), digests.to_pylist())
        return pa.table(
            {
                "account_id": taken.column("account_id"),
                "record_id": taken.column("record_id"),
                "payload": payloads,
                "content_hash": digests,
                "checkin": taken.column("checkin"),
                "checkout": taken.column("checkout"),
                "source_rows": pc.binary_join_element_wise(
                    taken.column("sources"), taken.column("row_numbers"), ":"
                ),
            }
        ).cast(_RESULT_SCHEMA)

    def _verify(self, payloads: list[str], digests: list[str]) -> None:
        for payload, digest in zip(payloads, digests, strict=True):
            try:
                data = self.validate(payload).to_json_dict()
            except ValidationError as error:
                raise AssertionError(
                    f"the fast path (SQL checks or twin) accepted a document the contract "
                    f"refuses: {payload!r}: {error}"
                ) from None
            expected = (canonical_json(data), content_hash(data, self.volatile))
            if expected != (payload, digest):
                raise AssertionError(
                    f"fast path differs from the contract model: {payload!r} / {digest} "
                    f"but {expected[0]!r} / {expected[1]}"
                )

    def _one_by_one(self, batch: pa.RecordBatch, positions: list[int]) -> pa.Table:
        """Records that need the contract model's verdict (and quarantine messages)."""
        taken = batch.take(pa.array(positions))
        names = [name for name in taken.schema.names if name not in ("checkin", "checkout")]
        rows = taken.select(names).to_pydict() | {
            # As text: DuckDB dates reach beyond Python's (a typo such as year 20250).
            name: pc.cast(taken.column(name), pa.string()).to_pylist()
            for name in ("checkin", "checkout")
        }
        quarantine = self.quarantine
        kept: dict[str, list[Any]] = {name: [] for name in _RESULT_SCHEMA.names}
        for index in range(len(positions)):
            account_id = rows["account_id"][index]
            record_id = rows["record_id"][index]
            source = rows["sources"][index]
            numbers = rows["row_numbers"][index]
            # The quarantine keeps the check-in too: a run over several months reports each
            # month's own problems (rows whose check-in could not be read belong to every one).
            quarantine.checkin = rows["checkin"][index]
            quarantine.first_row = rows["first_row"][index]
            if account_id is None or account_id == "":
                quarantine.add(
                    None,
                    record_id,
                    source,
                    numbers,
                    "accountId",
                    "no account for this record (the account expression gave no value)",
                )
                continue
            if record_id is None or record_id.strip() == "":
                quarantine.add(account_id, None, source, numbers, "id", MISSING_REASON)
                continue
            if rows["conflicting"][index]:
                quarantine.add(
                    account_id,
                    record_id,
                    source,
                    numbers,
                    "id",
                    # Named with their files: a glob's files may share a record.
                    f"{DUPLICATE_REASON}: rows {source}:{numbers} share id {record_id!r} but "
                    "map to different values",
                    record_id,
                )
                continue
            conversion_errors = rows["errors"][index]
            if conversion_errors:
                for item in conversion_errors:
                    quarantine.add(
                        account_id,
                        record_id,
                        item["src"],
                        str(item["rownum"]),
                        item["path"],
                        item["reason"],
                        item["value"],
                    )
                continue
            document = rows["payload"][index]
            try:
                resource = self.validate_sure(document)
            except ValidationError:
                resource = None
            try:
                resource = resource or self.validate(document)
            except ValidationError as error:
                for problem in error.errors(include_url=False):
                    path, reason, value = _describe(problem)
                    quarantine.add(account_id, record_id, source, numbers, path, reason, value)
                continue
            checkin, checkout = rows["checkin"][index], rows["checkout"][index]
            beyond = _beyond_supported_dates(checkin, checkout)
            if beyond:
                field_path, value = beyond
                quarantine.add(
                    account_id, record_id, source, numbers, field_path, DATE_RANGE_REASON, value
                )
                continue
            data = resource.to_json_dict()
            payload = canonical_json(data)
            if self.volatile:
                digest = content_hash(data, self.volatile)
            else:
                # Without volatile members the hashed form is the payload itself.
                digest = hashlib.blake2b(payload.encode(), digest_size=16).hexdigest()
            for name, value in (
                ("account_id", account_id),
                ("record_id", resource.id),
                ("payload", payload),
                ("content_hash", digest),
                ("checkin", _day(checkin)),
                ("checkout", _day(checkout)),
                ("source_rows", f"{source}:{numbers}"),
            ):
                kept[name].append(value)
        return pa.table(kept, schema=_RESULT_SCHEMA)

    def add_unitless(self, table: pa.Table) -> None:
        """Quarantine reservations none of whose rows is a unit row (``unitless_sql``): a
        record whose rows are in the export is never dropped without a word."""
        for row in table.to_pylist():
            self.quarantine.checkin = None
            self.quarantine.first_row = row["first_row"]
            self.quarantine.add(
                row["account_id"],
                row["record_id"],
                row["sources"],
                row["row_numbers"],
                "unitReservations",
                NO_UNITS_REASON,
            )

    def result(self) -> MappedRecords:
        records = empty_records()
        tables = self.accepted.expand()
        table = pa.concat_tables(tables) if tables else None
        if table is not None and table.num_rows:
            records = _records_frame(table)
        # The entity query does not sort its records (a sort would carry every document's
        # text); the quarantine, which people read, is put in export order here.
        order = self.quarantine.order
        rows = [self.quarantine.rows[i] for i in sorted(range(len(order)), key=order.__getitem__)]
        quarantined = (
            pd.DataFrame(rows, columns=list(QUARANTINE_COLUMNS), dtype=object)
            if rows
            else empty_quarantine()
        )
        return MappedRecords(
            entity=self.entity,
            records=records,
            quarantine=quarantined,
            known_valid=self.known_count,
            checked_in_sql=self.checked_count,
        )


def blake2b_hex(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The content hash of each text (``connector.canonical.content_hash``'s blake2b, 16 bytes,
    hex), read straight from the Arrow buffers: no Python string per text is built."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    texts = texts.cast(pa.large_string())
    if texts.null_count:
        raise ValueError("a text to hash is missing")
    count = len(texts)
    _validity, offsets_buffer, data_buffer = texts.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64)[texts.offset : texts.offset + count + 1]
    data = memoryview(data_buffer) if data_buffer is not None else memoryview(b"")
    blake2b = hashlib.blake2b
    bounds = offsets.tolist()
    digests = b"".join(
        [
            blake2b(data[start:end], digest_size=16).digest()
            for start, end in itertools.pairwise(bounds)
        ]
    )
    hex_text = digests.hex().encode()
    return pa.LargeStringArray.from_buffers(
        count,
        pa.py_buffer(np.arange(0, 32 * (count + 1), 32, dtype=np.int64)),
        pa.py_buffer(hex_text),
    )


def _records_frame(table: pa.Table) -> pd.DataFrame:
    """The records as pandas, text left in Arrow memory (no Python string per payload)."""
    frame = table.select([name for name in RECORD_COLUMNS]).to_pandas(
        types_mapper={pa.large_string(): pd.ArrowDtype(pa.large_string())}.get,
        date_as_object=False,
    )
    for column in ("checkin", "checkout"):
        frame[column] = frame[column].astype("datetime64[ns]")
    return frame


def _day(text: str | None) -> date | None:
    return None if text is None else date.fromisoformat(text)


DATE_RANGE_REASON = (
    f"a stay date outside {SUPPORTED_DATES[0]}..{SUPPORTED_DATES[1]} (most likely a typo in "
    f"the year); the snapshot's date columns cannot hold it"
)


def _beyond_supported_dates(checkin: object, checkout: object) -> tuple[str, str] | None:
    """(field, value) of a stay date pandas' nanosecond timestamps cannot represent.

    Without this check one such date (a typo like 2925-01-01) crashed the whole mapping run.
    """
    for member, value in (
        ("unitReservations.checkin", checkin),
        ("unitReservations.checkout", checkout),
    ):
        if value is None or (isinstance(value, float) and value != value):
            continue
        text = str(value)[:10]
        if not SUPPORTED_DATES[0] <= text <= SUPPORTED_DATES[1]:
            return member, str(value)
    return None

"""The value that travels from the mapping engine to the diff: validated records and quarantine.

Both are pandas frames with fixed columns, so the diff can hand them to DuckDB in one piece
instead of iterating over Python objects.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace
from datetime import date

import pandas as pd

from connector.contract import Entity
from connector.cursors import SourceRead

RECORD_COLUMNS: tuple[str, ...] = (
    "account_id",  # the service account (envelope accountId) the record belongs to
    "record_id",  # resource.id
    "payload",  # canonical JSON of the validated resource (connector.canonical.canonical_json)
    "content_hash",  # connector.canonical.content_hash, volatile members left out
    "checkin",  # reservations: earliest unit check-in (datetime64[ns] date); accommodations: NaT
    "checkout",  # reservations: latest unit check-out; accommodations: NaT
    # where the record came from, e.g. "bookings.csv:12,13"; rows of several files of a glob
    # input name each further file: "all_2022.csv:14; all_2023.csv:51" (split_source_rows)
    "source_rows",
)
"""Columns of :attr:`MappedRecords.records`, one row per validated record."""

QUARANTINE_COLUMNS: tuple[str, ...] = (
    "entity",
    "account_id",  # may be empty when the account itself could not be derived
    "record_id",  # may be empty when the key itself is missing
    "input",  # the input (file, table or query name) the rows came from
    # 1-based data row numbers in that input, comma-separated; rows of further files of a glob
    # follow as "; file:rows" (see source_rows)
    "rows",
    "field",  # the contract field path, e.g. "unitReservations.0.checkin"
    "reason",  # what was expected and what was found
    "value",  # the offending value, masked when sensitive (connector.secrets)
    "checkin",  # reservations: the row's check-in as ISO text, "" when it could not be read
)
"""Columns of :attr:`MappedRecords.quarantine`, one row per problem found."""


CANCELLATION_LIKE_REASON = "looks like a cancellation but is not CANCELLED"
NUMERIC_STATUS_REASON = "is a numeric status code"
"""How the reasons of the quarantine entries of reservation statuses start
(``connector.mapping.status_vocabulary``): cancelled bookings must not be sent as live stays."""


@dataclass(frozen=True)
class StatusFinding:
    """A reservation status value quarantined because it may mean cancelled, and its records."""

    value: str
    kind: str  # "cancellation" (looks like one) or "code" (a bare number)
    records: int

    def to_json_dict(self) -> dict[str, str | int]:
        return {"value": self.value, "kind": self.kind, "records": self.records}


def is_status_finding(quarantine: pd.DataFrame) -> pd.Series:
    """Which quarantine entries are reservation statuses that may mean cancelled."""
    reasons = quarantine["reason"].astype(str)
    return (quarantine["field"] == "status") & (
        reasons.str.startswith(CANCELLATION_LIKE_REASON)
        | reasons.str.startswith(NUMERIC_STATUS_REASON)
    )


def status_findings(quarantine: pd.DataFrame) -> list[StatusFinding]:
    """The status values of ``quarantine`` that may mean cancelled, with their records (a
    booking of three rooms counts once), most frequent first."""
    if not len(quarantine):
        return []
    cancellation = quarantine["reason"].astype(str).str.startswith(CANCELLATION_LIKE_REASON)
    found = quarantine.loc[is_status_finding(quarantine)].assign(
        kind=cancellation.map({True: "cancellation", False: "code"})
    )
    if not len(found):
        return []
    # Rows without a record id (its problem is reported too) count one each.
    keyed = found.assign(key=found["record_id"].where(~_blank(found["record_id"]), found["rows"]))
    counts = (
        keyed.drop_duplicates(["account_id", "key", "input", "value"])
        .groupby(["value", "kind"])
        .size()
        .reset_index(name="n")
        .sort_values(["n", "value"], ascending=[False, True], kind="stable")
    )
    return [
        StatusFinding(str(row.value), str(row.kind), int(row.n))
        for row in counts.itertuples(index=False)
    ]


def status_message(findings: list[StatusFinding], fix: str | None) -> str:
    """The error that names each status value that may mean cancelled, its records, and what to
    write in the mapping (``fix``)."""
    records = sum(item.records for item in findings)
    listed = ", ".join(f"{item.value!r} {item.records}" for item in findings)
    lines = [
        f"{len(findings)} reservation status value(s) may mean cancelled but are not CANCELLED, "
        f"the only status the service reads as a cancellation; their {records} record(s) are "
        "quarantined, not sent as live stays (value, records):",
        f"  {listed}",
    ]
    if fix:
        lines.append(fix)
    return "\n".join(lines)


def empty_records() -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series(dtype="object") for column in RECORD_COLUMNS}).astype(
        {"checkin": "datetime64[ns]", "checkout": "datetime64[ns]"}
    )


def empty_quarantine() -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series(dtype="object") for column in QUARANTINE_COLUMNS})


KEY_COLUMNS: tuple[str, ...] = ("account_id", "record_id")

FINGERPRINT_COLUMNS: tuple[str, ...] = (
    "source_account",  # the account member's value as mapped (an external id, or the id)
    "record_id",
    "fingerprint",  # BIGINT
    "content_hash",  # what the service acknowledged, mapped from these rows
    "checkin",
    "checkout",
)
"""Columns of the source fingerprints a snapshot keeps, as it hands them to the mapping engine
(``connector.mapping.fingerprints``): one row per record whose acknowledged version is the one
its fingerprinted rows mapped to."""


def empty_keys() -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series(dtype="object") for column in KEY_COLUMNS})


def in_export_order(records: pd.DataFrame) -> pd.DataFrame:
    """``records`` ordered by where each came from: its source, then its first row there
    (``source_rows``, e.g. ``bookings.csv:12,13``); records without one (carried over by
    source fingerprint) come last, in the order they had.

    The mapping engine returns records in no particular order: sorting a million documents
    into export order cost about as much as mapping them (BENCHMARKS.md). Pushes follow the
    plan's own order (``connector.plan.delivery_order``); this order is for people reading
    records (``pms-sync preview``).
    """
    if len(records) < 2:
        return records
    source, rows = split_source_rows(records["source_rows"])
    # The row numbers are written in ascending order: the first is the record's first row.
    first_row = pd.to_numeric(rows.str.split(r"[,;]", n=1, regex=True).str[0], errors="coerce")
    keys = pd.DataFrame({"source": source, "row": first_row}, index=records.index)
    order = keys.sort_values(["source", "row"], kind="stable", na_position="last").index
    return records.loc[order].reset_index(drop=True)


def split_source_rows(source_rows: pd.Series) -> tuple[pd.Series, pd.Series]:
    """The first file and the rows of each ``source_rows`` ("all_2022.csv:14; all_2023.csv:51"
    gives "all_2022.csv" and "14; all_2023.csv:51"): the quarantine's ``input`` and ``rows``, which
    read back as ``input:rows``. A text without a colon is all input and no rows."""
    text = source_rows.astype("string")
    # Greedy up to the last colon of the first file's part: a file name may hold ":" itself.
    parts = text.str.extract(r"^(?P<source>[^;]*):(?P<rows>[^:;]*(?:; .*)?)$")
    found = parts["source"].notna()
    source = parts["source"].where(found, text)
    rows = parts["rows"].where(found, "").astype("string")
    return source, rows


def counts_by_text(values: pd.Series) -> pd.Series:
    """Rows per value, indexed by the value as text (missing values as ``str`` writes them).

    Counted before converting: one conversion per distinct value, not per row (a nightly run
    carries a million records of a handful of accounts).
    """
    counts = values.value_counts(dropna=False)
    counts.index = [str(value) for value in counts.index]
    return counts.groupby(level=0).sum()


def _blank(column: pd.Series) -> pd.Series:
    return column.isna() | (column.astype(str).str.strip() == "")


@dataclass
class MappedRecords:
    """Validated records of one entity, and the rows quarantined on the way there."""

    entity: Entity
    records: pd.DataFrame = field(default_factory=empty_records)
    quarantine: pd.DataFrame = field(default_factory=empty_quarantine)
    # Records whose payload the snapshot already knew valid under this contract: not
    # validated again (connector.snapshot.validated_payloads).
    known_valid: int = 0
    # Records accepted on the contract's checks compiled to SQL alone, without meeting a
    # validator in Python (connector.mapping.contract_sql).
    checked_in_sql: int = 0
    # Keys the export holds besides ``records`` and ``quarantine``: records outside the run's
    # check-in window (a blank account or id: rows whose key could not be derived). A record
    # in the export is never "gone from the export", whichever part of it this run maps.
    present_elsewhere: pd.DataFrame = field(default_factory=empty_keys)
    # The mapping's account member gives the account's external id on the service
    # (``external_id: true``): ``account_id`` holds external ids until
    # ``connector.accounts.resolve_batches`` replaces them by account ids.
    account_is_external_id: bool = False
    # Rows whose external id matches no account of the connection (QUARANTINE_COLUMNS, the
    # external id under ``account_id``): quarantined, and kept apart from ``quarantine``
    # because they belong to no account a run could reconcile, guard or count.
    unresolved: pd.DataFrame = field(default_factory=empty_quarantine)
    # Source fingerprints (connector.mapping.fingerprints). ``carried``: records among
    # ``records`` whose source rows are unchanged since the service acknowledged what they
    # map to; they were not mapped again and have no payload (None): every later stage
    # treats them as unchanged. ``fingerprints``: the records this run mapped, with their
    # fingerprints, kept in the snapshot once sent; None when the entity is not fingerprinted
    # (docs/decisions.md says when).
    carried: int = 0
    fingerprints: pd.DataFrame | None = None
    mapping_fingerprint: str | None = None
    # Reservation statuses that may mean cancelled (quarantined, ``status_findings``): where
    # and what to write in the mapping file, for every such value of the export.
    status_fix: str | None = None
    # A run of some accounts: "pushed" when only their rows were mapped, "after_mapping" when
    # the entity's records depend on other rows and the whole export was mapped, then kept to
    # them (connector.mapping.engine.account_filter_allowed); None for a run of every account.
    account_filter: str | None = None
    # The reads of the entity's own input when it has an incremental cursor: in full or since
    # the last successful run's value, the rows read and the largest value among them
    # (connector.pipeline._incremental commits it once the run is acknowledged).
    reads: tuple[SourceRead, ...] = ()

    @property
    def incremental(self) -> bool:
        """Some of the entity's rows were left unread: not a full export in this run."""
        return any(read.incremental for read in self.reads)

    @property
    def mapped(self) -> int:
        """Records this run mapped and validated (not carried over by fingerprint)."""
        return len(self.records) - self.carried

    @property
    def accounts(self) -> list[str]:
        return sorted(self.records["account_id"].unique().tolist())

    def of_accounts(self, accounts: Collection[str]) -> MappedRecords:
        """The records and problems of these accounts only (as ``account_id`` names them):
        a run of some accounts of a connection. Rows of no account belong to none of them."""
        wanted = {str(account) for account in accounts}

        def keep(frame: pd.DataFrame) -> pd.DataFrame:
            if not len(frame) or "account_id" not in frame:
                return frame
            inside = frame["account_id"].astype(str).isin(wanted).to_numpy()
            return frame.loc[inside].reset_index(drop=True)

        records = keep(self.records)
        return replace(
            self,
            records=records,
            quarantine=keep(self.quarantine),
            present_elsewhere=keep(self.present_elsewhere),
            unresolved=keep(self.unresolved),
            # A fingerprint kept for a record of another account would carry that record over
            # unmapped in its own run, although this run never sent it.
            fingerprints=keep(self.fingerprints) if self.fingerprints is not None else None,
            carried=int(records["payload"].isna().sum()) if self.carried else 0,
        )

    def contiguous(self) -> MappedRecords:
        """These records with each Arrow column in one piece: selecting rows from a column in
        many chunks (as the mapping engine's batches leave it) costs several times as much, and
        a run split month by month selects from every column once per month."""
        frame = self.records
        pieces = {
            name: pd.arrays.ArrowExtensionArray(column.array.__arrow_array__().combine_chunks())
            for name, column in frame.items()
            if isinstance(column.array, pd.arrays.ArrowExtensionArray)
            and column.array.__arrow_array__().num_chunks > 1
        }
        if not pieces:
            return self
        return replace(self, records=frame.assign(**pieces))

    def quarantined_keys(self) -> pd.DataFrame:
        """(account_id, record_id) of records present in the export but invalid, once each."""
        quarantine = self.quarantine
        if not len(quarantine):
            return empty_keys()
        known = ~(_blank(quarantine["account_id"]) | _blank(quarantine["record_id"]))
        keys = quarantine.loc[known, list(KEY_COLUMNS)].astype(str).drop_duplicates()
        return keys.reset_index(drop=True)

    def unidentified_accounts(self) -> tuple[frozenset[str], bool]:
        """Accounts with rows in the export whose record id could not be derived, and whether
        some such row has no account either.

        Any acknowledged record of those accounts might be such a row, so none of them may be
        reconciled as gone from the export (``True``: none of any account).
        """
        frames = [
            frame
            for frame in (self.quarantine.loc[:, list(KEY_COLUMNS)], self.present_elsewhere)
            if len(frame)
        ]
        if not frames:
            return frozenset(), False
        keys = pd.concat(frames, ignore_index=True)
        no_account = _blank(keys["account_id"])
        no_id = _blank(keys["record_id"])
        accounts = frozenset(keys.loc[no_id & ~no_account, "account_id"].astype(str))
        return accounts, bool(no_account.any())


@dataclass(frozen=True)
class DateWindow:
    """A half-open range of check-in dates [start, end): one partition of reservations."""

    start: date
    end: date

    def __post_init__(self) -> None:
        if self.end <= self.start:
            raise ValueError(f"window end {self.end} must be after its start {self.start}")

    def contains(self, day: date) -> bool:
        return self.start <= day < self.end

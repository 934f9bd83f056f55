"""The mapping engine's fast path gives exactly what the contract model gives, record for record.

Most records never meet the contract model: DuckDB writes their canonical JSON, a native twin
validates a batch in one call, and payloads the snapshot already knows valid are not validated
again. These tests hold that path to the reference (``PMS_SYNC_FAST_PATH=0``: every record
through the model and Python's canonical JSON) on hostile cell values.

Examples: PMS_SYNC_PROPERTY_EXAMPLES (default 4; ``make soak`` runs more).
"""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector.contract import Entity
from connector.mapping import load_mapping, map_records
from connector.mapping.validation import FAST_PATH_ENV
from connector.records import MappedRecords
from tests.reliability.campaign import budget

EXAMPLES = budget("PMS_SYNC_PROPERTY_EXAMPLES", 4)
HOTEL = Path(__file__).resolve().parents[2] / "mappings" / "hotel"

# Text a PMS export may hold: quotes, backslashes, control characters, any script (no NUL,
# and no line breaks: the CSV reader refuses quoted line breaks, tested in tests/sources).
_TEXT = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\x00\r\n", exclude_categories=["Cs"]),
    max_size=12,
)
_NUMBER = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.floats(min_value=-1e-3, max_value=1e-3).map(repr),
    st.integers(-(10**20), 10**20).map(str),
    _TEXT,
)
_EDITS = {
    "guest_first_name": _TEXT,
    "guest_last_name": _TEXT,
    "guest_email": _TEXT,
    "channel": _TEXT,
    "price": _NUMBER,
    "paid": _NUMBER,
    "adults": _NUMBER,
    "arrival": st.sampled_from(["2025-02-29", "2024-02-29", "2025-13-01", "0000-01-01"]) | _TEXT,
    "eta": st.sampled_from(["16:45:00", "4pm", "25:00"]) | _TEXT,
    "currency": st.sampled_from(["EUR", "eur", "XXX", "€"]) | _TEXT,
    "modified_at": st.sampled_from(["2025-01-06 11:51", "2025-01-06T11:51:00.123456Z"]) | _TEXT,
}


def _export(
    folder: Path, edits: list[tuple[int, str, str]], members: dict[str, str] | None = None
) -> Path:
    """The hotel example with ``edits`` to its bookings' cells and ``members`` of its mapping
    replaced (a line's text → its new text)."""
    shutil.copytree(HOTEL, folder, dirs_exist_ok=True)
    mapping = folder / "mapping.yaml"
    text = mapping.read_text(encoding="utf-8")
    for old, new in (members or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    mapping.write_text(text, encoding="utf-8")
    bookings = folder / "data" / "bookings.csv"
    with bookings.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for row_index, column, value in edits:
        rows[row_index % len(rows)][column] = value
    with bookings.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return folder / "mapping.yaml"


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def _map(mapping: Path, monkeypatch: pytest.MonkeyPatch, *, fast: bool, **options: object):
    with monkeypatch.context() as patch:
        patch.setenv(FAST_PATH_ENV, "1" if fast else "0")
        return map_records(load_mapping(mapping), **options)  # type: ignore[arg-type]


def _same(fast: MappedRecords, reference: MappedRecords) -> None:
    def records(batch: MappedRecords) -> pd.DataFrame:
        frame = batch.records.astype({"account_id": str, "record_id": str})
        frame = frame.astype({"payload": str, "content_hash": str, "source_rows": str})
        return frame.sort_values(["account_id", "record_id"]).reset_index(drop=True)

    def quarantine(batch: MappedRecords) -> pd.DataFrame:
        return batch.quarantine.sort_values(list(batch.quarantine.columns)).reset_index(drop=True)

    pd.testing.assert_frame_equal(records(fast), records(reference))
    pd.testing.assert_frame_equal(quarantine(fast), quarantine(reference))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(
        st.sampled_from(sorted(_EDITS)).flatmap(
            lambda column: st.tuples(st.integers(0, 200), st.just(column), _EDITS[column])
        ),
        min_size=1,
        max_size=10,
    )
)
def test_fast_path_equals_the_contract_model_on_hostile_values(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    edits: list[tuple[int, str, str]],
) -> None:
    mapping = _export(tmp_path_factory.mktemp("hotel"), edits)
    fast = _map(mapping, monkeypatch, fast=True)
    reference = _map(mapping, monkeypatch, fast=False)
    for entity in (Entity.ACCOMMODATION, Entity.RESERVATION):
        _same(fast[entity], reference[entity])


# Prices as channel exports write them, declared so in the mapping: the grouped numbers the
# declaration reads, the same amounts grouped the other way round, and hostile text.
_GROUPED_MEMBERS = {
    "price: price": 'price: {column: price, thousands: ",", currency: strip}',
    "paidAmount: paid": "paidAmount: {column: paid, currency: strip}",
}
_AMOUNT = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False).map(lambda v: f"{v:,.2f}")
_CURRENCY = st.sampled_from(["", "Rp", "$", "USD ", "€ ", "kr ", "XX ", "--", "%"])
_GROUPED = st.one_of(
    st.tuples(_CURRENCY, _AMOUNT, _CURRENCY).map(lambda parts: "".join(parts)),
    st.tuples(_AMOUNT, _CURRENCY).map(
        # 1.234,50 and 1 234,50: the other writings, with the currency after the number.
        lambda parts: parts[0].replace(",", " ").replace(".", ",") + " " + parts[1]
    ),
    _NUMBER,
)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.lists(
        st.tuples(st.integers(0, 200), st.sampled_from(["price", "paid"]), _GROUPED),
        min_size=1,
        max_size=10,
    )
)
def test_fast_path_equals_the_contract_model_on_grouped_numbers_and_currencies(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    edits: list[tuple[int, str, str]],
) -> None:
    mapping = _export(tmp_path_factory.mktemp("hotel"), edits, _GROUPED_MEMBERS)
    fast = _map(mapping, monkeypatch, fast=True)
    reference = _map(mapping, monkeypatch, fast=False)
    _same(fast[Entity.RESERVATION], reference[Entity.RESERVATION])


def test_grouped_numbers_with_currencies_map_alike_on_both_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    edits = [
        (0, "price", "Rp1,445,000.00"),
        (1, "price", "$1,234.50"),
        (2, "price", "12,50"),  # refused: a decimal comma where the column has points
        (3, "paid", "€ 12.50"),
        (4, "paid", "USD 1,234.50"),  # refused: no thousands separator is declared for it
    ]
    mapping = _export(tmp_path / "hotel", edits, _GROUPED_MEMBERS)
    fast = _map(mapping, monkeypatch, fast=True)
    reference = _map(mapping, monkeypatch, fast=False)
    _same(fast[Entity.RESERVATION], reference[Entity.RESERVATION])
    quarantined = fast[Entity.RESERVATION].quarantine
    assert sorted(quarantined["value"]) == ["12,50", "USD 1,234.50"]
    prices = [
        unit["price"]
        for payload in fast[Entity.RESERVATION].records["payload"]
        for unit in json.loads(payload)["unitReservations"]
        if "price" in unit
    ]
    paid = [
        unit["paidAmount"]
        for payload in fast[Entity.RESERVATION].records["payload"]
        for unit in json.loads(payload)["unitReservations"]
        if "paidAmount" in unit
    ]
    assert {1445000.0, 1234.5} <= set(prices)
    assert 12.5 in paid


def test_payloads_known_valid_are_not_validated_again_and_change_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapping = _export(tmp_path / "hotel", [])
    first = _map(mapping, monkeypatch, fast=True)
    payloads = first[Entity.RESERVATION].records["payload"].astype(str)
    known = [_md5(text) for text in payloads[:10]]
    known.append("0" * 32)  # a payload no record has
    validated = pa.table({"payload_md5": pa.array(known, pa.string())})

    again = _map(mapping, monkeypatch, fast=True, validated=validated)

    assert again[Entity.RESERVATION].known_valid == 10
    assert again[Entity.ACCOMMODATION].known_valid == 0
    for entity in (Entity.ACCOMMODATION, Entity.RESERVATION):
        _same(again[entity], first[entity])


def test_a_known_payload_with_a_conversion_error_is_still_quarantined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The cache only ever skips the contract check of an error-free record: a row whose
    # conversion failed is quarantined even if some earlier payload had the same text.
    mapping = _export(tmp_path / "hotel", [(0, "adults", "two")])
    first = _map(mapping, monkeypatch, fast=False)
    quarantined = first[Entity.RESERVATION].quarantine
    assert list(quarantined["field"]) == ["unitReservations.adults"]
    everything = [_md5(text) for text in first[Entity.RESERVATION].records["payload"].astype(str)]
    validated = pa.table({"payload_md5": pa.array(everything, pa.string())})
    again = _map(mapping, monkeypatch, fast=True, validated=validated)
    _same(again[Entity.RESERVATION], first[Entity.RESERVATION])


def test_a_run_after_one_the_service_acknowledged_validates_only_what_changed(
    tmp_path: Path,
) -> None:
    from connector.pipeline import load_batches
    from connector.plan import build_plan
    from connector.snapshot import Snapshot
    from tests.snapshot.snapshot_samples import acknowledge_all

    mapping = _export(tmp_path / "hotel", [])
    snapshot_path = tmp_path / "snapshot.duckdb"
    first, policy = load_batches(mapping, snapshot_path=snapshot_path)
    assert all(batch.known_valid == 0 for batch in first.values())
    with Snapshot.open(snapshot_path) as store:
        acknowledge_all(store, build_plan(store, first, policy=policy))

    _export(tmp_path / "hotel", [(0, "guest_last_name", "Changed")])
    again, _ = load_batches(mapping, snapshot_path=snapshot_path)

    units, reservations = again[Entity.ACCOMMODATION], again[Entity.RESERVATION]
    assert units.known_valid == len(units.records) == len(first[Entity.ACCOMMODATION].records)
    assert reservations.known_valid == len(reservations.records) - 1  # the changed booking


@pytest.mark.parametrize("paid", ["inf", "-Infinity", "nan", "1e999"])
def test_a_number_that_is_no_json_number_is_quarantined_by_both_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, paid: str
) -> None:
    mapping = _export(tmp_path / "hotel", [(0, "paid", paid)])

    fast = _map(mapping, monkeypatch, fast=True)
    reference = _map(mapping, monkeypatch, fast=False)

    quarantined = fast[Entity.RESERVATION].quarantine
    assert list(quarantined["field"]) == ["unitReservations.paidAmount"]
    assert quarantined["reason"].iloc[0] == f"expected a number, got {paid!r}"
    _same(fast[Entity.RESERVATION], reference[Entity.RESERVATION])

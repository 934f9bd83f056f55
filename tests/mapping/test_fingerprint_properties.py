"""Source fingerprints never change what a run plans (connector.mapping.fingerprints).

Random sequences of edits to the hotel example's export, its joined input, its lookups and
its mapping; after each, the plan of a run that carries unchanged records over by fingerprint
must be exactly the plan of a run that maps everything (``--remap``): the same changes with
the same content, the same counts, the same quarantine. Each step then syncs for real against
the sandbox, so the next step starts from what the service acknowledged.

Examples: PMS_SYNC_PROPERTY_EXAMPLES (default 2; ``make soak`` runs more).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from connector.contract import Entity
from connector.pipeline import load_batches, plan_sync, run_sync
from connector.plan import Plan
from connector.sandbox.testing import SandboxHandle
from tests.push.push_samples import settings_for
from tests.reliability.campaign import budget
from tests.samples import pinned_hotel

EXAMPLES = budget("PMS_SYNC_PROPERTY_EXAMPLES", 2)
TOKENS = {"demo": "demo-token", "hotel-a": "hotel-a-token"}

Edit = Callable[[Path, int], str]


def _frame(file: Path) -> pd.DataFrame:
    return pd.read_csv(file, dtype=str, keep_default_na=False)


def _write(frame: pd.DataFrame, file: Path) -> None:
    frame.to_csv(file, index=False)


def _bookings(folder: Path) -> Path:
    return folder / "data" / "bookings.csv"


def change_cell(folder: Path, seed: int) -> str:
    frame = _frame(_bookings(folder))
    row = seed % len(frame)
    column = ["guest_last_name", "price", "adults", "status", "channel"][seed % 5]
    frame.loc[row, column] = {
        "guest_last_name": f"Name{seed}",
        "price": f"{100 + seed % 50}.00",
        "adults": str(1 + seed % 3),
        "status": ["confirmed", "modified", "cancelled"][seed % 3],
        "channel": f"Channel {seed % 4}",
    }[column]
    _write(frame, _bookings(folder))
    return f"{column} of row {row}"


def delete_row(folder: Path, seed: int) -> str:
    frame = _frame(_bookings(folder))
    row = seed % len(frame)
    _write(frame.drop(index=row), _bookings(folder))
    return f"deleted row {row}"


def duplicate_row(folder: Path, seed: int) -> str:
    frame = _frame(_bookings(folder))
    row = seed % len(frame)
    _write(pd.concat([frame, frame.iloc[[row]]], ignore_index=True), _bookings(folder))
    return f"duplicated row {row}"


def add_line(folder: Path, seed: int) -> str:
    """A new unit line of an existing booking (the record spans one more row)."""
    frame = _frame(_bookings(folder))
    row = frame.iloc[[seed % len(frame)]].copy()
    row["line_no"] = str(10 + seed % 80)
    _write(pd.concat([frame, row], ignore_index=True), _bookings(folder))
    return f"new line of {row['booking_no'].iloc[0]}"


def add_booking(folder: Path, seed: int) -> str:
    frame = _frame(_bookings(folder))
    row = frame.iloc[[seed % len(frame)]].copy()
    row["booking_no"] = f"NEW-{seed}"
    _write(pd.concat([frame, row], ignore_index=True), _bookings(folder))
    return f"new booking NEW-{seed}"


def break_row(folder: Path, seed: int) -> str:
    """An invalid value: the record is quarantined (and kept as acknowledged)."""
    frame = _frame(_bookings(folder))
    row = seed % len(frame)
    frame.loc[row, "arrival" if seed % 2 else "currency"] = "2026-02-31" if seed % 2 else "EURO"
    _write(frame, _bookings(folder))
    return f"broke row {row}"


def shuffle_rows(folder: Path, seed: int) -> str:
    frame = _frame(_bookings(folder))
    _write(frame.sample(frac=1, random_state=seed), _bookings(folder))
    return "shuffled"


def change_room_type(folder: Path, seed: int) -> str:
    """The joined input changes: every unit it shapes may change."""
    file = folder / "data" / "room_types.csv"
    frame = _frame(file)
    frame.loc[seed % len(frame), "max_guests"] = str(2 + seed % 3)
    _write(frame, file)
    return "room type"


def change_lookup(folder: Path, seed: int) -> str:
    """The mapping changes (a lookup's value): every record may change."""
    mapping = folder / "mapping.yaml"
    text = mapping.read_text()
    choices = ["CONFIRMED", "MODIFIED"]
    for old in choices:
        text = text.replace(f"modified: {old}", f"modified: {choices[seed % 2]}")
    mapping.write_text(text)
    return "lookup"


EDITS: tuple[Edit, ...] = (
    change_cell,
    delete_row,
    duplicate_row,
    add_line,
    add_booking,
    break_row,
    shuffle_rows,
    change_room_type,
    change_lookup,
)


def _changes(plan: Plan) -> list[tuple[str, ...]]:
    columns = ["entity", "account_id", "record_id", "action", "reason", "content_hash", "payload"]
    frame = plan.changes.loc[:, columns].astype(str)
    return sorted(map(tuple, frame.to_numpy().tolist()))


def _tally(plan: Plan) -> list[tuple[str, ...]]:
    return sorted(map(tuple, plan.tally.astype(str).to_numpy().tolist()))


def _quarantine(plan: Plan) -> tuple[dict[str, int], list[str], list[tuple[str, ...]]]:
    extracted = sorted(map(tuple, plan.extracted.astype(str).to_numpy().tolist()))
    return plan.quarantine, sorted(map(str, plan.quarantine_sample)), extracted


@pytest.fixture
def hotel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOTEL_BER_ACCOUNT", "demo")
    monkeypatch.setenv("HOTEL_MUC_ACCOUNT", "hotel-a")


@pytest.mark.slow
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    # Shrinking would replay whole syncs; the failing sequence is printed as drawn.
    phases=[Phase.generate],
    derandomize=True,  # a fixed sequence of examples: the same on every run of the suite
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(EDITS), st.integers(min_value=0, max_value=10_000)),
        min_size=2,
        max_size=4,
    )
)
def test_a_fingerprinted_run_plans_exactly_what_a_full_remap_plans(
    clean_sandbox: SandboxHandle,
    tmp_path_factory: pytest.TempPathFactory,
    hotel_env: None,
    steps: list[tuple[Edit, int]],
) -> None:
    clean_sandbox.reset()
    folder = tmp_path_factory.mktemp("fingerprints")
    shutil.rmtree(folder)
    mapping = pinned_hotel(folder)
    settings_ = settings_for(
        clean_sandbox.base_url, folder / "state" / "snapshot.duckdb", token=None, tokens=TOKENS
    )
    first = run_sync(mapping, settings_)
    assert first.push.outcomes["failed"] == 0

    applied = []
    for edit, seed in steps:
        applied.append(edit(folder, seed))
        carried = plan_sync(mapping, settings_)
        remapped = plan_sync(mapping, settings_, remap=True)
        assert _changes(carried) == _changes(remapped), applied
        assert _tally(carried) == _tally(remapped), applied
        assert _quarantine(carried) == _quarantine(remapped), applied
        report = run_sync(mapping, settings_)
        assert report.push.outcomes["failed"] == 0, applied

    # After the last sync nothing is left to send, and the fingerprints carry every record
    # the service holds as mapped: none of them is mapped again.
    batches, _ = load_batches(mapping, snapshot_path=settings_.snapshot_path)
    reservations = batches[Entity.RESERVATION]
    assert reservations.carried > 0, applied
    assert reservations.mapped == len(reservations.records) - reservations.carried
    assert not len(plan_sync(mapping, settings_).changes), applied


def test_an_entity_compiles_to_the_same_sql_alone_or_after_another(hotel_env: None) -> None:
    """A Dagster step maps one entity, the CLI both: the same SQL, so the same mapping
    fingerprint, or one would remap everything the other fingerprinted."""
    from connector.mapping import load_mapping, prepare
    from tests.samples import HOTEL

    mapping = load_mapping(HOTEL / "mapping.yaml")
    alone = prepare(mapping, [Entity.RESERVATION]).queries[Entity.RESERVATION]
    after_units = prepare(mapping).queries[Entity.RESERVATION]
    assert alone.sql == after_units.sql
    assert alone.key_rows_sql == after_units.key_rows_sql

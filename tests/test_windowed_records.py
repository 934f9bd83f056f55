"""A run's mapped reservations split by check-in month: once for every month, as one month at
a time would split them."""

from __future__ import annotations

from datetime import date

import pandas as pd

from connector.contract import Entity
from connector.pipeline import records_by_window, records_within
from connector.records import DateWindow, MappedRecords, empty_quarantine, empty_records


def _batch() -> MappedRecords:
    records = empty_records()
    rows = [
        ("acc-1", "B1", "2025-03-01", '{"id": "B1"}'),
        ("acc-1", "B2", "2025-03-31", None),  # carried over by fingerprint
        ("acc-2", "B3", "2025-04-01", '{"id": "B3"}'),
        ("acc-2", "B4", "2025-06-15", '{"id": "B4"}'),
    ]
    records = pd.DataFrame(
        {column: [None] * len(rows) for column in records.columns}
        | {
            "account_id": [r[0] for r in rows],
            "record_id": [r[1] for r in rows],
            "checkin": [r[2] for r in rows],
            "payload": [r[3] for r in rows],
        }
    )
    quarantine = empty_quarantine()
    quarantine = pd.DataFrame(
        {column: [None, None, None] for column in quarantine.columns}
        | {"account_id": ["acc-1", "acc-2", "acc-3"], "checkin": ["2025-04-10", None, "31.04.25"]}
    )
    return MappedRecords(
        Entity.RESERVATION, records=records, quarantine=quarantine, account_is_external_id=True
    )


def test_each_window_gets_what_records_within_gives_it() -> None:
    batch = _batch()
    windows = [DateWindow(date(2025, month, 1), date(2025, month + 1, 1)) for month in (3, 4, 5, 6)]

    parts = records_by_window(batch, windows)

    for window in windows:
        alone = records_within(batch, window)
        assert parts[window].records.equals(alone.records)
        assert parts[window].quarantine.equals(alone.quarantine)
        assert parts[window].carried == alone.carried
        # A month names accounts as the run does (external ids here).
        assert parts[window].account_is_external_id
    march, april, may, _ = windows
    assert parts[march].records["record_id"].tolist() == ["B1", "B2"]
    assert parts[march].carried == 1
    assert parts[may].records.empty
    # The rows whose check-in could not be read (blank, malformed) are problems of every month.
    assert parts[may].quarantine["account_id"].tolist() == ["acc-2", "acc-3"]
    assert parts[april].quarantine["account_id"].tolist() == ["acc-1", "acc-2", "acc-3"]


def test_contiguous_records_hold_each_arrow_column_in_one_chunk_and_the_same_values() -> None:
    import pyarrow as pa

    ids = pa.chunked_array([["B1", "B2"], ["B3"], ["B4"]])
    batch = _batch()
    batch.records["record_id"] = pd.arrays.ArrowExtensionArray(ids)

    whole = batch.contiguous()

    assert whole.records["record_id"].array.__arrow_array__().num_chunks == 1
    assert whole.records.equals(batch.records)
    assert whole.contiguous() is whole  # nothing left to combine


def test_a_window_keeps_the_batch_order_of_records_whose_check_ins_are_not_sorted() -> None:
    batch = _batch()
    batch.records = batch.records.iloc[[3, 0, 2, 1]].reset_index(drop=True)
    march = DateWindow(date(2025, 3, 1), date(2025, 4, 1))
    beyond = DateWindow(date(2025, 6, 15), date(2025, 6, 16))  # the last check-in's own day

    parts = records_by_window(batch, [march, beyond])

    assert parts[march].records["record_id"].tolist() == ["B1", "B2"]
    assert parts[beyond].records["record_id"].tolist() == ["B4"]


def test_the_handed_over_batch_splits_once_per_set_of_windows_and_pickles_without_it() -> None:
    import pickle

    from connector.plan import ReconcilePolicy
    from pms_sync.handoff import MappedBatch

    mapped = MappedBatch(Entity.RESERVATION, _batch(), ReconcilePolicy())
    windows = [DateWindow(date(2025, month, 1), date(2025, month + 1, 1)) for month in (3, 4)]

    first = mapped.by_window(windows)

    assert mapped.by_window(reversed(windows)) is first
    assert first[windows[0]].records["record_id"].tolist() == ["B1", "B2"]
    loaded = pickle.loads(pickle.dumps(mapped))
    assert loaded.records.records.equals(mapped.records.records)
    assert loaded.by_window(windows) is not first
    assert loaded.by_window(windows)[windows[1]].records["record_id"].tolist() == ["B3"]

"""The diff carries row numbers and attaches the documents once the rows are decided: each
change gets exactly its own record's document, a first run's are the records' own Arrow buffers
(no copy), and a record retired from the export gets its last payload with the new status."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
from snapshot_samples import TODAY, acknowledge_all, batches, reservation, unit

from connector.contract import Entity
from connector.plan import ReconcilePolicy, build_plan
from connector.records import MappedRecords
from connector.snapshot import DiffRequest, OnMissing, SnapshotStore


def _in_chunks(batch: MappedRecords, size: int) -> MappedRecords:
    """The records as the mapping engine gives them: documents in Arrow, one chunk a batch."""
    texts = batch.records["payload"].astype(str).tolist()
    chunks = [
        pa.array(texts[start : start + size], pa.large_string())
        for start in range(0, len(texts), size)
    ]
    payload = pd.arrays.ArrowExtensionArray(pa.chunked_array(chunks, type=pa.large_string()))
    records = batch.records.assign(payload=pd.Series(payload, index=batch.records.index))
    return MappedRecords(entity=batch.entity, records=records, quarantine=batch.quarantine)


def _reservations(count: int, **changes: object) -> list[dict[str, object]]:
    return [reservation(f"R{n:03}", n % 40 - 10, **changes) for n in range(count)]


def _diff(snapshot: SnapshotStore, batch: MappedRecords, **request: object) -> pd.DataFrame:
    return snapshot.diff(
        DiffRequest(
            entity=batch.entity,
            records=batch.records,
            scope_accounts=frozenset({"acc-1"}),
            today=TODAY,
            **request,  # type: ignore[arg-type]
        )
    ).changes


def _documents_by_key(frame: pd.DataFrame) -> dict[str, str]:
    return dict(zip(frame["record_id"], frame["payload"].astype(str), strict=True))


def test_a_first_run_diff_attaches_every_document_without_copying_it(
    snapshot: SnapshotStore,
) -> None:
    batch = _in_chunks(batches([], _reservations(25))[Entity.RESERVATION], size=7)

    changes = _diff(snapshot, batch)

    assert _documents_by_key(changes) == _documents_by_key(batch.records)
    assert changes["record_id"].tolist() == batch.records["record_id"].tolist()  # export order
    sent = changes["payload"].array._documents.chunks  # what the plan's positions point into
    own = pa.array(batch.records["payload"]).chunks
    assert [c.buffers()[2].address for c in sent] == [c.buffers()[2].address for c in own]


def test_a_partial_diff_gives_each_change_its_own_records_document(
    snapshot: SnapshotStore,
) -> None:
    first = batches([], _reservations(30))
    acknowledge_all(snapshot, build_plan(snapshot, first, today=TODAY))
    edited = _reservations(30)
    for index in (3, 4, 17, 29):  # spread over the chunks
        edited[index] = {**edited[index], "channelName": f"Channel {index}"}
    edited += [reservation("R900", 5), reservation("R901", 6)]  # new
    batch = _in_chunks(batches([], edited)[Entity.RESERVATION], size=8)

    changes = _diff(snapshot, batch)

    assert dict(zip(changes["record_id"], changes["action"], strict=True)) == {
        "R003": "update",
        "R004": "update",
        "R017": "update",
        "R029": "update",
        "R900": "create",
        "R901": "create",
    }
    expected = _documents_by_key(batch.records)
    assert _documents_by_key(changes) == {key: expected[key] for key in changes["record_id"]}
    assert json.loads(expected["R017"])["channelName"] == "Channel 17"


def test_records_gone_from_the_export_are_retired_with_their_last_document(
    snapshot: SnapshotStore,
) -> None:
    policy = ReconcilePolicy(on_missing={Entity.ACCOMMODATION: OnMissing.DEACTIVATE})
    acknowledge_all(
        snapshot, build_plan(snapshot, batches([unit("U1"), unit("U2"), unit("U3")]), today=TODAY)
    )
    batch = _in_chunks(batches([unit("U1", name="Renamed")])[Entity.ACCOMMODATION], size=1)

    plan = build_plan(
        snapshot, {Entity.ACCOMMODATION: batch}, today=TODAY, policy=policy
    ).changes.set_index("record_id")

    assert plan["action"].to_dict() == {"U1": "update", "U2": "deactivate", "U3": "deactivate"}
    assert json.loads(plan.loc["U1", "payload"])["name"] == "Renamed"
    for gone in ("U2", "U3"):
        document = json.loads(plan.loc[gone, "payload"])
        assert (document["id"], document["status"], document["name"]) == (
            gone,
            "INACTIVE",
            f"Room {gone}",
        )
    assert np.all(plan["payload"].notna())

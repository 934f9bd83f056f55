"""The snapshot's source fingerprints (migration 11), on each backend: kept only while the
service holds, active, exactly what the fingerprinted rows mapped to."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pandas as pd
import pytest

from connector.contract import Entity
from connector.snapshot import Acknowledgement, RecordStatus, SnapshotStore, acknowledgement_table

CONNECTION = "hotel"
MAPPING = "mapping-1"


def _ack(
    record_id: str, content_hash: str, status: RecordStatus = RecordStatus.ACTIVE
) -> Acknowledgement:
    return Acknowledgement(
        account_id="acc-1",
        entity=Entity.RESERVATION,
        record_id=record_id,
        content_hash=content_hash,
        payload=f'{{"id":"{record_id}"}}',
        checkin=date(2026, 12, 1),
        checkout=date(2026, 12, 3),
        status=status,
        acknowledged_at=datetime(2026, 11, 22, tzinfo=UTC).replace(tzinfo=None),
        request_id=None,
        connection=CONNECTION,
    )


def _mapped(*rows: tuple[str, int, str | None]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "source_account": "BER",
                "account_id": "acc-1",
                "record_id": record_id,
                "fingerprint": fingerprint,
                "content_hash": content_hash,
            }
            for record_id, fingerprint, content_hash in rows
        ]
    )


def _stored(snapshot: SnapshotStore, mapping: str = MAPPING) -> dict[str, int]:
    table = snapshot.stored_fingerprints(CONNECTION, Entity.RESERVATION, mapping).to_pandas()
    return dict(zip(table["record_id"], table["fingerprint"].astype(int), strict=True))


def test_a_fingerprint_is_kept_only_for_what_the_service_holds_as_mapped(
    snapshot: SnapshotStore,
) -> None:
    snapshot.record_acknowledgements(
        acknowledgement_table([_ack("R1", "h1"), _ack("R2", "old"), _ack("R4", "h4")])
    )
    kept = snapshot.record_fingerprints(
        CONNECTION,
        Entity.RESERVATION,
        MAPPING,
        # R2 was mapped to h2 but the service holds "old" (refused, unsent), R3 was never
        # acknowledged, R5 was quarantined (no content hash).
        _mapped(
            ("R1", 11, "h1"), ("R2", 22, "h2"), ("R3", 33, "h3"), ("R4", 44, "h4"), ("R5", 55, None)
        ),
    )
    assert kept == 2
    assert _stored(snapshot) == {"R1": 11, "R4": 44}
    # Another mapping fingerprint reads nothing.
    assert _stored(snapshot, "mapping-2") == {}

    # R4 is cancelled since (gone from the export): its fingerprint no longer reads back.
    snapshot.record_acknowledgements(
        acknowledgement_table([_ack("R4", "h4-cancelled", RecordStatus.CANCELLED)])
    )
    assert _stored(snapshot) == {"R1": 11}

    # A later run maps R1 again and it is quarantined: its fingerprint is forgotten.
    snapshot.record_fingerprints(CONNECTION, Entity.RESERVATION, MAPPING, _mapped(("R1", 12, None)))
    assert _stored(snapshot) == {}


def test_a_new_mapping_fingerprint_forgets_every_older_one(snapshot: SnapshotStore) -> None:
    snapshot.record_acknowledgements(acknowledgement_table([_ack("R1", "h1"), _ack("R2", "h2")]))
    snapshot.record_fingerprints(
        CONNECTION, Entity.RESERVATION, MAPPING, _mapped(("R1", 1, "h1"), ("R2", 2, "h2"))
    )
    snapshot.record_fingerprints(
        CONNECTION, Entity.RESERVATION, "mapping-2", _mapped(("R1", 1, "h1"))
    )
    assert _stored(snapshot, "mapping-2") == {"R1": 1}
    assert _stored(snapshot) == {}


def test_a_large_export_keeps_its_fingerprints_in_parts_as_one_statement_would(
    snapshot: SnapshotStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("connector.snapshot._operations.FINGERPRINTS_AT_ONCE", 2)
    held = [f"R{index}" for index in range(9)]
    snapshot.record_acknowledgements(acknowledgement_table([_ack(r, f"h-{r}") for r in held]))
    snapshot.record_fingerprints(CONNECTION, Entity.RESERVATION, MAPPING, _mapped(("R0", 1, "x")))

    # R0 mapped twice (its first row wins, as DISTINCT ON keeps one), R9 never acknowledged.
    rows = [(r, index, f"h-{r}") for index, r in enumerate(held)]
    kept = snapshot.record_fingerprints(
        CONNECTION, Entity.RESERVATION, MAPPING, _mapped(*rows, ("R0", 100, "h-R0"), ("R9", 9, "h"))
    )

    assert kept == 9
    stored = _stored(snapshot)
    assert set(stored) == set(held)
    assert {r: stored[r] for r in held[1:]} == {r: index for index, r in enumerate(held) if index}

"""The snapshot remembers which payloads the current contract validated (migration 6)."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from connector.plan import build_plan
from connector.snapshot import Snapshot, validated_payloads
from tests.snapshot.snapshot_samples import TODAY, acknowledge_all, batches, unit


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def _acknowledged_once(path: Path) -> list[str]:
    mapped = batches([unit("U1"), unit("U2")])
    with Snapshot.open(path) as store:
        acknowledge_all(store, build_plan(store, mapped, today=TODAY))
    return sorted(mapped[next(iter(mapped))].records["payload"].astype(str))


def test_acknowledged_payloads_are_known_valid_under_the_contract_that_checked_them(
    snapshot_path: Path,
) -> None:
    payloads = _acknowledged_once(snapshot_path)

    known = validated_payloads(snapshot_path)

    assert known is not None
    assert sorted(known.column("payload_md5").to_pylist()) == sorted(map(_md5, payloads))


def test_no_snapshot_yet_or_one_being_written_means_nothing_is_known(
    snapshot_path: Path,
) -> None:
    assert validated_payloads(snapshot_path) is None
    _acknowledged_once(snapshot_path)
    assert validated_payloads(snapshot_path) is not None
    with Snapshot.open(snapshot_path):
        # The run's own connection is open with another configuration: the read is refused,
        # which only costs validation time.
        assert validated_payloads(snapshot_path) is None


def test_a_new_contract_knows_nothing_until_the_diff_sees_the_payloads_validated_again(
    snapshot_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payloads = _acknowledged_once(snapshot_path)
    for module in list(sys.modules.values()):  # wherever the snapshot reads the contract
        if module.__name__.startswith("connector.snapshot") and hasattr(
            module, "CONTRACT_FINGERPRINT"
        ):
            monkeypatch.setattr(module, "CONTRACT_FINGERPRINT", "a-newer-contract")

    assert validated_payloads(snapshot_path).num_rows == 0  # type: ignore[union-attr]

    # This run's records passed the new contract (the mapping validated them all): the diff
    # marks the identical acknowledged payloads, and only those.
    with Snapshot.open(snapshot_path) as store:
        build_plan(store, batches([unit("U1"), unit("U2", name="Renamed")]), today=TODAY)
    known = validated_payloads(snapshot_path)
    assert known is not None
    assert known.column("payload_md5").to_pylist() == [
        _md5(payload) for payload in payloads if '"id":"U1"' in payload
    ]


def test_migration_6_fills_the_md5_of_payloads_acknowledged_before_it(
    snapshot_path: Path,
) -> None:
    payloads = _acknowledged_once(snapshot_path)
    with duckdb.connect(str(snapshot_path)) as connection:
        connection.execute("UPDATE acknowledged SET payload_md5 = NULL, validated_with = NULL")
        connection.execute("ALTER TABLE acknowledged DROP COLUMN payload_md5")
        connection.execute("ALTER TABLE acknowledged DROP COLUMN validated_with")
        # Back to a file of schema 5: the steps after it are undone too.
        connection.execute("DROP TABLE possibly_stored")
        connection.execute("DROP TABLE drift")  # migration 9
        connection.execute("DROP TABLE reconciliation_passes")
        connection.execute("DELETE FROM schema_migrations WHERE version >= 6")

    with Snapshot.open(snapshot_path) as store:
        rows = store.acknowledged()
    assert sorted(rows["payload_md5"]) == sorted(map(_md5, payloads))
    assert rows["validated_with"].isna().all()  # no contract is assumed for them


def test_the_records_a_run_maps_read_their_own_payloads_only(
    snapshot_location: str | Path,
) -> None:
    # On either backend: a run that maps U2 reads U2's MD5, not the whole table's.
    payloads = _acknowledged_once(snapshot_location)  # type: ignore[arg-type]
    u2 = [_md5(payload) for payload in payloads if '"id":"U2"' in payload]

    only_u2 = validated_payloads(snapshot_location, pa.array(["U2", "U9"]))
    every = validated_payloads(snapshot_location)

    assert only_u2 is not None and every is not None
    assert only_u2.column("payload_md5").to_pylist() == u2
    assert sorted(every.column("payload_md5").to_pylist()) == sorted(map(_md5, payloads))
    nothing = validated_payloads(snapshot_location, pa.array([], pa.string()))
    assert nothing is not None and nothing.num_rows == 0

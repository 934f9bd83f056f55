"""The Dagster assets read SQL inputs incrementally as the CLI does: since the cursor the
snapshot keeps, which a run advances once its changes are acknowledged (slow)."""

from datetime import timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import sqlalchemy as sa

from connector.sandbox.testing import SandboxHandle
from connector.snapshot import Snapshot
from pms_sync.partitions import range_tags
from pms_sync.resources import SnapshotResource
from tests.dagster.code_location import code_location
from tests.sources.incremental_pms import START, load, write_mapping

pytestmark = pytest.mark.slow


def _run(defs: dg.Definitions) -> dg.ExecuteInProcessResult:
    job = defs.resolve_job_def("hotel_sync")
    window = dg.PartitionKeyRange("2026-01", "2026-03")
    return job.execute_in_process(tags=range_tags(window), raise_on_error=False)


def _metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    (materialization, *_) = result.asset_materializations_for_node(f"hotel__{asset}")
    return {key: value.value for key, value in materialization.metadata.items()}


def _units_cursor(snapshot: Path) -> str | None:
    with Snapshot.open(snapshot, read_only=True) as store:
        cursors = store.source_cursors("hotel")
    (value,) = [c.value for (name, _), c in cursors.items() if name == "units"]
    return value.text if value else None


def test_the_assets_read_since_the_cursor_and_advance_it(
    resources: dict[str, object], clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    engine = load(f"sqlite:///{tmp_path / 'pms.sqlite'}")
    folder = tmp_path / "mappings" / "hotel"
    folder.mkdir(parents=True)
    url = engine.url.render_as_string(hide_password=False)
    dagster = {"partitions_start": "2026-01", "timezone": "UTC", "schedule": "30 3 * * *"}
    write_mapping(folder, url, name="hotel", dagster=dagster)
    defs = code_location(folder.parent, resources)
    store = resources["snapshot"]
    assert isinstance(store, SnapshotResource)
    snapshot = Path(store.path)

    first = _run(defs)
    assert first.success
    mapped = _metadata(first, "mapped_accommodations")
    assert (mapped["rows_read"], mapped["read_incrementally"]) == (6, False)
    assert _units_cursor(snapshot) == str(START + timedelta(minutes=6))

    later = START + timedelta(days=1)
    with engine.begin() as connection:
        connection.execute(
            sa.text("UPDATE units SET name = 'Flat 2 renamed', updated_at = :at WHERE id = 2"),
            {"at": later},
        )
        connection.execute(sa.text("INSERT INTO units VALUES (7, 'Flat 7', :at)"), {"at": later})
        connection.execute(sa.text("DELETE FROM units WHERE id = 6"))

    second = _run(defs)
    assert second.success
    mapped = _metadata(second, "mapped_accommodations")
    assert (mapped["rows_read"], mapped["read_incrementally"]) == (2, True)
    synced = _metadata(second, "synced_accommodations")
    assert (synced["create"], synced["update"], synced["deactivate"]) == (1, 1, 0)
    assert synced["cursors_committed"] is True
    assert "incremental" in synced["source_reads"]
    assert _units_cursor(snapshot) == str(later)
    stored = {r["id"]: r["resource"] for r in clean_sandbox.records("demo", "accommodation")}
    assert stored["2"]["name"] == "Flat 2 renamed" and stored["6"]["status"] == "ACTIVE"
    engine.dispose()

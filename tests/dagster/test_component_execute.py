"""``PmsSyncComponent.execute``: a subclass wraps each sync step, as with Dagster's own
integration components, and the runs stay what they were (real sandbox, real snapshot)."""

from collections.abc import Iterator
from datetime import date
from pathlib import Path

import dagster as dg
import pytest

from connector.contract import Entity
from connector.sandbox.testing import SandboxHandle
from pms_sync.assets import SyncStepEvent
from pms_sync.component import PmsSyncComponent
from pms_sync.partitions import range_tags
from tests.dagster.exports import Export, booking, unit

pytestmark = pytest.mark.slow


class AuditedSync(PmsSyncComponent):
    """Notes what each step acknowledged, and whether its push had run before the loop."""

    def execute(
        self,
        context: dg.AssetExecutionContext,
        entity: Entity,
        events: Iterator[SyncStepEvent],
    ) -> Iterator[SyncStepEvent]:
        AUDIT.append((str(entity), "before", None))
        for event in super().execute(context, entity, events):
            if isinstance(event, dg.MaterializeResult) and event.metadata is not None:
                AUDIT.append((str(entity), "materialized", event.metadata.get("acknowledged")))
            yield event
        AUDIT.append((str(entity), "after", None))


AUDIT: list[tuple[str, str, object]] = []


def test_a_subclass_wraps_each_sync_step_and_sees_its_events(
    tmp_path: Path, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    hotel = Export(tmp_path / "mappings" / "hotel", "hotel")
    hotel.write([unit(1), unit(2)], [booking(i, date(2025, 3, 1 + i)) for i in range(4)])
    AUDIT.clear()
    defs = AuditedSync(mapping=str(hotel.mapping)).definitions(hotel.mapping, tmp_path, resources)

    job = defs.resolve_job_def("hotel_sync")
    result = job.execute_in_process(
        tags=range_tags(dg.PartitionKeyRange("2025-03", "2025-03")), raise_on_error=False
    )

    assert result.success
    assert len(clean_sandbox.records("demo", "reservation")) == 4
    entries = [(entity, step) for entity, step, _ in AUDIT]
    assert entries == [
        ("accommodation", "before"),
        ("accommodation", "materialized"),
        ("accommodation", "after"),
        ("reservation", "before"),
        ("reservation", "materialized"),
        ("reservation", "after"),
    ]
    # The units' materialization carries the step's counts; the reservations' run-level one
    # (each month's counts are on its own partition's materialization).
    assert AUDIT[1][2] is not None

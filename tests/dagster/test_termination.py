"""A Dagster run terminated mid-push: the sync step's process gets SIGTERM, stops its push
gracefully, fails naming what it committed and left, and a later run converges (slow)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from datetime import date
from pathlib import Path

import dagster as dg
import pytest

from connector.sandbox.testing import SandboxHandle
from pms_sync.partitions import range_tags
from pms_sync.resources import (
    IO_MANAGER_KEY,
    ServiceResource,
    SnapshotResource,
    SourcesResource,
    SyncChecksResource,
)
from pms_sync.storage import MappedRecordsIOManager
from tests.dagster.code_location import code_location
from tests.dagster.exports import Export, booking, unit

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]

# The run in a process of its own, as Dagster's run worker: the job executed in process, the
# failure messages of its steps printed as one JSON list.
_CHILD = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import dagster as dg
    from pms_sync.partitions import range_tags
    from pms_sync.resources import (
        IO_MANAGER_KEY, ServiceResource, SnapshotResource, SourcesResource, SyncChecksResource,
    )
    from pms_sync.storage import MappedRecordsIOManager
    from tests.dagster.code_location import code_location

    folder, base_url, snapshot, io = sys.argv[1:5]
    resources = {
        "service": ServiceResource(base_url=base_url, token="demo-token", concurrency=2, timeout=5),
        "snapshot": SnapshotResource(path=snapshot, lock_timeout=10),
        "sources": SourcesResource(),
        "sync_checks": SyncChecksResource(),
        IO_MANAGER_KEY: MappedRecordsIOManager(base_dir=io),
    }
    job = code_location(Path(folder), resources).resolve_job_def("hotel_sync")
    window = dg.PartitionKeyRange("2025-01", "2025-12")
    result = job.execute_in_process(tags=range_tags(window), raise_on_error=False)
    failures = [
        event.event_specific_data.error.message
        for event in result.all_events
        if event.event_type_value == "STEP_FAILURE"
    ]
    print(json.dumps({"success": result.success, "failures": failures}))
    """
)


def test_a_terminated_sync_step_commits_what_was_answered_and_a_later_run_converges(
    tmp_path: Path, clean_sandbox: SandboxHandle
) -> None:
    hotel = Export(tmp_path / "mappings" / "hotel", "hotel")
    units = [unit(n) for n in range(1, 41)]
    hotel.write(units, [booking(0, date(2025, 3, 1), unit_number=1)])
    snapshot, io = tmp_path / "snapshot.duckdb", tmp_path / "io"
    clean_sandbox.set_faults(latency_ms=300)  # 40 units at concurrency 2: ≈ 6 s of pushing
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _CHILD,
            str(hotel.folder.parent),
            clean_sandbox.base_url,
            str(snapshot),
            str(io),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 120
    while clean_sandbox.count() < 6 and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    assert child.poll() is None, child.stderr.read().decode()[-2000:] if child.stderr else ""
    os.kill(child.pid, signal.SIGTERM)
    out, err = child.communicate(timeout=60)

    assert child.returncode == 0, err.decode()[-2000:]
    outcome = json.loads(out.decode().strip().splitlines()[-1])
    assert not outcome["success"]
    (message,) = [m for m in outcome["failures"] if "push stopped" in m]
    assert "push stopped (SIGTERM)" in message
    found = re.search(r"push stopped \(SIGTERM\): (\d+) acknowledged and committed", message)
    assert found is not None, message
    acknowledged = int(found.group(1))
    assert 6 <= acknowledged < 40
    assert f"{40 - acknowledged} pending" in message
    assert clean_sandbox.count("demo", "accommodation") == acknowledged

    clean_sandbox.set_faults()
    resources = {
        "service": ServiceResource(base_url=clean_sandbox.base_url, token="demo-token"),
        "snapshot": SnapshotResource(path=str(snapshot), lock_timeout=10),
        "sources": SourcesResource(),
        "sync_checks": SyncChecksResource(),
        IO_MANAGER_KEY: MappedRecordsIOManager(base_dir=str(io)),
    }
    job = code_location(hotel.folder.parent, resources).resolve_job_def("hotel_sync")
    later = job.execute_in_process(
        tags=range_tags(dg.PartitionKeyRange("2025-01", "2025-12")), raise_on_error=False
    )

    assert later.success
    records = clean_sandbox.records("demo", "accommodation")
    assert len(records) == 40
    assert {r["writes"] for r in records} == {1}

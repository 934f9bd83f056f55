"""`pms-sync sync` killed with SIGKILL mid-push, then run again: the service ends with exactly
the source, each record written once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from push_samples import sandbox_state
from stop_samples import PMS_SYNC, prepare

from connector.pipeline import load_batches, sync_batches
from connector.sandbox.testing import SandboxHandle
from connector.settings import load_settings


@pytest.mark.slow
def test_a_sync_killed_mid_push_and_run_again_leaves_exactly_the_source_state(
    service: SandboxHandle, snapshot_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapping, env = prepare(service, snapshot_file, tmp_path, monkeypatch)
    batches, policy = load_batches(mapping)
    source = {
        (row.account_id, str(entity), row.record_id): json.loads(row.payload)
        for entity, batch in batches.items()
        for row in batch.records.itertuples(index=False)
    }
    service.set_faults(latency_ms=60)  # ≈ 1.5 s of pushing at concurrency 4: room to land a kill

    victim = subprocess.Popen(
        [str(PMS_SYNC), "sync", str(mapping)],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while service.count() < 30 and time.monotonic() < deadline and victim.poll() is None:
        time.sleep(0.02)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)
    delivered_before_kill = service.count()
    settings = load_settings()
    service.set_faults()
    # The same mapped records as the killed process read: map once, sync twice.
    rerun = sync_batches(batches, settings, policy=policy)
    final = sync_batches(batches, settings, policy=policy)

    assert victim.returncode == -signal.SIGKILL, "the sync must still have been running"
    acknowledged_before_kill = len(source) - rerun.counts["create"]
    assert 0 < acknowledged_before_kill <= delivered_before_kill < len(source)
    assert rerun.push.complete
    # Only what the snapshot had not committed is sent again, each record at most once.
    assert rerun.requests == len(source) - acknowledged_before_kill
    records = service.records()
    assert sandbox_state(records) == source
    assert {r["writes"] for r in records} == {1}
    assert final.requests == 0

"""A sync process killed with SIGKILL mid-push, then run again: the service ends with exactly
the source, each record written once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from push_samples import batches_of, expected_state, hotel, sandbox_state

from connector.pipeline import sync_batches
from connector.sandbox.testing import SandboxHandle
from connector.settings import load_settings
from connector.snapshot import Snapshot

REPOSITORY = Path(__file__).resolve().parents[2]
RUNNER = Path(__file__).with_name("sync_source_file.py")


def start_sync(source_file: Path, snapshot: Path, base_url: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPOSITORY), os.environ.get("PYTHONPATH", "")]),
        "PMS_SYNC_BASE_URL": base_url,
        "PMS_SYNC_TOKEN": "demo-token",
        "PMS_SYNC_SNAPSHOT": str(snapshot),
        "PMS_SYNC_CONCURRENCY": "4",
    }
    return subprocess.Popen(
        [sys.executable, str(RUNNER), str(source_file)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_a_sync_killed_mid_push_and_run_again_leaves_exactly_the_source_state(
    service: SandboxHandle, snapshot_file: Path, tmp_path: Path
) -> None:
    source = hotel(units=10, reservations=150)
    source_file = tmp_path / "source.json"
    source_file.write_text(json.dumps({str(e): items for e, items in source.items()}))
    total = len(expected_state(source))
    service.set_faults(latency_ms=30)  # ≈ 1.2 s of pushing at concurrency 4: room to land a kill

    victim = start_sync(source_file, snapshot_file, service.base_url)
    deadline = time.monotonic() + 30
    while len(service.records()) < 40 and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(timeout=10)
    delivered_before_kill = len(service.records())
    with Snapshot.open(snapshot_file) as snapshot:
        acknowledged_before_kill = len(snapshot.acknowledged())

    service.set_faults()
    settings = load_settings(base_url=service.base_url, snapshot=snapshot_file, token="demo-token")
    rerun = sync_batches(batches_of(source), settings)
    final = sync_batches(batches_of(source), settings)

    assert victim.returncode == -signal.SIGKILL
    assert 0 < acknowledged_before_kill <= delivered_before_kill < total, "kill landed mid-push"
    assert rerun.push.complete
    # Only what the snapshot had not committed is sent again, each record at most once.
    assert rerun.counts["create"] == total - acknowledged_before_kill
    assert rerun.requests == total - acknowledged_before_kill
    records = service.records()
    assert sandbox_state(records) == expected_state(source)
    assert {r["writes"] for r in records} == {1}
    assert final.requests == 0

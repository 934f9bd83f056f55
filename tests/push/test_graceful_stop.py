"""`pms-sync sync` stopped by SIGTERM or SIGINT (its deadline and an enormous Retry-After:
test_graceful_stop_deadline.py): a real subprocess against the sandbox over loopback, real
signals, a real DuckDB or PostgreSQL snapshot. The run ends with exit 7 (`stopped`), one JSON document, everything answered
committed; a rerun sends the rest, each record written once, without a disagreement."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from push_samples import sandbox_state
from stop_samples import (
    GRACE,
    READ_TIMEOUT,
    converges,
    document_of,
    prepare,
    source_of,
    start_sync,
    wait_for_stored,
)

from connector.pipeline import load_batches, sync_batches
from connector.sandbox.testing import SandboxHandle
from connector.settings import load_settings


@pytest.mark.slow
@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_mid_push_stops_with_exit_7_and_everything_answered_committed(
    signal_number: signal.Signals,
    service: SandboxHandle,
    snapshot_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mapping, env = prepare(service, snapshot_file, tmp_path, monkeypatch)
    source = source_of(mapping)
    service.set_faults(latency_ms=200)  # ≈ 5 s of pushing at concurrency 4
    run = start_sync(mapping, env)
    wait_for_stored(service, 20, run)
    os.kill(run.pid, signal_number)
    signalled = time.monotonic()
    out, err = run.communicate(timeout=READ_TIMEOUT + GRACE + 20)
    took = time.monotonic() - signalled

    assert run.returncode == 7, err.decode()[-2000:]
    assert took < READ_TIMEOUT + GRACE
    document = document_of(out)
    assert document["status"] == "stopped"
    assert document["exit_code"] == 7
    assert document["stopped"] == signal_number.name
    acknowledged = document["outcomes"]["acknowledged"]
    assert 20 <= acknowledged < len(source)
    # The rest is pending, or held back when the stop came before its unit was sent.
    left = document["outcomes"]["pending"] + document["held_back_total"]
    assert left == len(source) - acknowledged
    # Every request in flight was answered within the grace, so each stored record is known.
    assert service.count() == acknowledged
    converges(service, mapping, acknowledged, source)


@pytest.mark.slow
def test_a_second_sigterm_stops_at_once_and_the_answers_so_far_are_committed(
    service: SandboxHandle, snapshot_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapping, env = prepare(service, snapshot_file, tmp_path, monkeypatch, PMS_SYNC_TIMEOUT="60")
    source = source_of(mapping)
    service.set_faults(latency_ms=6000)  # answers in flight take 6 s; the grace would be 60 s
    run = start_sync(mapping, env)
    wait_for_stored(service, 1, run)  # the first answer came: four requests in flight now
    time.sleep(0.5)
    os.kill(run.pid, signal.SIGTERM)
    time.sleep(0.3)
    os.kill(run.pid, signal.SIGTERM)
    signalled = time.monotonic()
    out, err = run.communicate(timeout=60)
    took = time.monotonic() - signalled

    assert run.returncode == 7, err.decode()[-2000:]
    assert took < 4.0, "the second signal must not wait for the answers in flight"
    document = document_of(out)
    assert document["status"] == "stopped"
    acknowledged = document["outcomes"]["acknowledged"]
    assert acknowledged >= 1
    # What the stop left is pending, or held back behind its unit still pending.
    left = document["outcomes"]["pending"] + document["held_back_total"]
    assert left == len(source) - acknowledged
    time.sleep(6.5)  # the cancelled requests are stored by now, their answers lost
    service.set_faults()
    batches, policy = load_batches(mapping)
    rerun = sync_batches(batches, load_settings(), policy=policy)
    # The acknowledged were committed (not sent again); the cancelled ones were remembered
    # as possibly stored, so their "already known" answers are no disagreement.
    assert rerun.requests == len(source) - acknowledged
    assert rerun.push.disagreements == []
    assert rerun.status == "succeeded"
    assert sandbox_state(service.records()) == source

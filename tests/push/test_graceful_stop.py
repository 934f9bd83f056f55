"""`pms-sync sync` stopped by SIGTERM or SIGINT, by its deadline, or postponed by an enormous
Retry-After: a real subprocess against the sandbox over loopback, real signals, a real DuckDB
snapshot. The run ends with exit 7 (`stopped`), one JSON document, everything answered
committed; a rerun sends the rest, each record written once, without a disagreement."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from push_samples import sandbox_state

from connector.pipeline import load_batches, sync_batches
from connector.sandbox.testing import SandboxHandle
from connector.settings import load_settings

EXAMPLE = Path(__file__).resolve().parents[2] / "mappings" / "hotel"
PMS_SYNC = Path(sys.executable).with_name("pms-sync")  # the installed console script
READ_TIMEOUT = 5.0
GRACE = 10.0  # the stop's bound beyond the read timeout


def _setup(
    service: SandboxHandle,
    snapshot_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    **extra: str,
) -> tuple[Path, dict[str, str]]:
    mapping = shutil.copytree(EXAMPLE, tmp_path / "hotel") / "mapping.yaml"
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"demo": "demo-token", "hotel-a": "hotel-a-token"}))
    env = {
        "PMS_SYNC_BASE_URL": service.base_url,
        "PMS_SYNC_SNAPSHOT": str(snapshot_file),
        "PMS_SYNC_TOKENS_FILE": str(tokens),
        "PMS_SYNC_CONCURRENCY": "4",
        "PMS_SYNC_TIMEOUT": str(READ_TIMEOUT),
        "HOTEL_BER_ACCOUNT": "demo",
        "HOTEL_MUC_ACCOUNT": "hotel-a",
        **extra,
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return mapping, env


def _source(mapping: Path) -> dict[tuple[str, str, str], Any]:
    batches, _ = load_batches(mapping)
    return {
        (row.account_id, str(entity), row.record_id): json.loads(row.payload)
        for entity, batch in batches.items()
        for row in batch.records.itertuples(index=False)
    }


def _start(mapping: Path, env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(PMS_SYNC), "sync", str(mapping), "--json", *args],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _wait_for(service: SandboxHandle, stored: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while service.count() < stored and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.02)
    assert process.poll() is None, "the sync must still be pushing"


def _document(out: bytes) -> dict[str, Any]:
    """stdout holds exactly one JSON document."""
    return json.loads(out.decode())


def _converges(
    service: SandboxHandle, mapping: Path, acknowledged: int, source: dict[Any, Any]
) -> None:
    """A rerun sends exactly what the stopped run did not acknowledge, once each."""
    service.set_faults()
    batches, policy = load_batches(mapping)
    rerun = sync_batches(batches, load_settings(), policy=policy)
    assert rerun.status == "succeeded", rerun.to_json_dict()["problems"]
    assert rerun.push.disagreements == []
    assert rerun.requests == len(source) - acknowledged
    records = service.records()
    assert sandbox_state(records) == source
    assert {r["writes"] for r in records} == {1}


@pytest.mark.slow
@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_mid_push_stops_with_exit_7_and_everything_answered_committed(
    signal_number: signal.Signals,
    service: SandboxHandle,
    snapshot_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mapping, env = _setup(service, snapshot_file, tmp_path, monkeypatch)
    source = _source(mapping)
    service.set_faults(latency_ms=200)  # ≈ 5 s of pushing at concurrency 4
    run = _start(mapping, env)
    _wait_for(service, 20, run)
    os.kill(run.pid, signal_number)
    signalled = time.monotonic()
    out, err = run.communicate(timeout=READ_TIMEOUT + GRACE + 20)
    took = time.monotonic() - signalled

    assert run.returncode == 7, err.decode()[-2000:]
    assert took < READ_TIMEOUT + GRACE
    document = _document(out)
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
    _converges(service, mapping, acknowledged, source)


@pytest.mark.slow
def test_a_second_sigterm_stops_at_once_and_the_answers_so_far_are_committed(
    service: SandboxHandle, snapshot_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapping, env = _setup(service, snapshot_file, tmp_path, monkeypatch, PMS_SYNC_TIMEOUT="60")
    source = _source(mapping)
    service.set_faults(latency_ms=6000)  # answers in flight take 6 s; the grace would be 60 s
    run = _start(mapping, env)
    _wait_for(service, 1, run)  # the first answer came: four requests in flight now
    time.sleep(0.5)
    os.kill(run.pid, signal.SIGTERM)
    time.sleep(0.3)
    os.kill(run.pid, signal.SIGTERM)
    signalled = time.monotonic()
    out, err = run.communicate(timeout=60)
    took = time.monotonic() - signalled

    assert run.returncode == 7, err.decode()[-2000:]
    assert took < 4.0, "the second signal must not wait for the answers in flight"
    document = _document(out)
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


def test_a_retry_after_past_the_deadline_postpones_the_accounts_at_once(
    service: SandboxHandle, snapshot_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapping, env = _setup(service, snapshot_file, tmp_path, monkeypatch)
    source = _source(mapping)
    service.set_faults(rate_limit_rate=1.0, retry_after_s=999999999)
    started = time.monotonic()
    run = _start(mapping, env)
    out, err = run.communicate(timeout=60)

    assert run.returncode == 7, err.decode()[-2000:]
    assert time.monotonic() - started < 30
    document = _document(out)
    assert document["status"] == "stopped"
    assert set(document["postponed_accounts"]) == {"demo", "hotel-a"}
    assert "Retry-After" in document["postponed_accounts"]["demo"]
    assert document["outcomes"]["acknowledged"] == 0
    # Reservations whose units were postponed are held back, the rest pending.
    assert document["outcomes"]["pending"] + document["held_back_total"] == len(source)
    assert document["requests"] == 2  # one per account, none after
    _converges(service, mapping, 0, source)


@pytest.mark.slow
def test_max_duration_is_the_runs_deadline_the_push_stops_cleanly_at_it(
    service: SandboxHandle, snapshot_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapping, env = _setup(service, snapshot_file, tmp_path, monkeypatch)
    source = _source(mapping)
    # About 25 s of push at 4 requests in flight: a 10 s deadline counted from the start leaves
    # the process's start-up (slow on a loaded machine) and some of the push, never all of it.
    service.set_faults(latency_ms=1000)
    run = _start(mapping, env, "--max-duration", "10")
    out, err = run.communicate(timeout=60)

    assert run.returncode == 7, err.decode()[-2000:]
    document = _document(out)
    assert document["status"] == "stopped"
    assert document["stopped"] == "deadline"
    acknowledged = document["outcomes"]["acknowledged"]
    assert 0 < acknowledged < len(source)
    assert service.count() == acknowledged
    _converges(service, mapping, acknowledged, source)


@pytest.mark.slow
def test_at_the_deadline_a_reconciliations_resends_left_are_dropped_not_pending(
    service: SandboxHandle, snapshot_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapping, env = _setup(service, snapshot_file, tmp_path, monkeypatch)
    first = _start(mapping, env)
    first.communicate(timeout=60)
    assert first.returncode == 0
    service.set_faults(latency_ms=400)  # the pass re-sends every record: ≈ 10 s
    run = _start(mapping, env, "--reconcile", "--max-duration", "5")
    out, err = run.communicate(timeout=60)

    # Re-sends are not owed: what the deadline left, the next reconciliation resumes.
    assert run.returncode == 0, err.decode()[-2000:]
    document = _document(out)
    assert document["status"] == "succeeded"
    assert document["outcomes"]["pending"] == 0
    assert sum(document["resend"]["dropped_by_budget"].values()) > 0
    assert document["resend"]["acknowledged"]["reconcile"] > 0

"""`pms-sync sync` stopped by its deadline (`--max-duration`) or postponed by an enormous
Retry-After: a real subprocess against the sandbox over loopback, a real DuckDB or PostgreSQL
snapshot. The signals are test_graceful_stop.py's (apart, so two workers share the minutes)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from stop_samples import (
    converges,
    document_of,
    prepare,
    source_of,
    start_sync,
)

from connector.sandbox.testing import SandboxHandle


def test_a_retry_after_past_the_deadline_postpones_the_accounts_at_once(
    service: SandboxHandle, snapshot_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapping, env = prepare(service, snapshot_file, tmp_path, monkeypatch)
    source = source_of(mapping)
    service.set_faults(rate_limit_rate=1.0, retry_after_s=999999999)
    started = time.monotonic()
    run = start_sync(mapping, env)
    out, err = run.communicate(timeout=60)

    assert run.returncode == 7, err.decode()[-2000:]
    assert time.monotonic() - started < 50  # at once: far from the Retry-After, load allowed
    document = document_of(out)
    assert document["status"] == "stopped"
    assert set(document["postponed_accounts"]) == {"demo", "hotel-a"}
    assert "Retry-After" in document["postponed_accounts"]["demo"]
    assert document["outcomes"]["acknowledged"] == 0
    # Reservations whose units were postponed are held back, the rest pending.
    assert document["outcomes"]["pending"] + document["held_back_total"] == len(source)
    assert document["requests"] == 2  # one per account, none after
    converges(service, mapping, 0, source)


@pytest.mark.slow
def test_max_duration_is_the_runs_deadline_the_push_stops_cleanly_at_it(
    service: SandboxHandle, snapshot_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapping, env = prepare(service, snapshot_file, tmp_path, monkeypatch)
    source = source_of(mapping)
    # About 25 s of push at 4 requests in flight: a 15 s deadline counted from the start leaves
    # the process's start-up (past 9 s on a loaded machine) and some of the push, never all.
    service.set_faults(latency_ms=1000)
    run = start_sync(mapping, env, "--max-duration", "15")
    out, err = run.communicate(timeout=60)

    assert run.returncode == 7, err.decode()[-2000:]
    document = document_of(out)
    assert document["status"] == "stopped"
    assert document["stopped"] == "deadline"
    acknowledged = document["outcomes"]["acknowledged"]
    assert 0 < acknowledged < len(source)
    assert service.count() == acknowledged
    converges(service, mapping, acknowledged, source)


def reconcile_with_deadline(
    service: SandboxHandle,
    snapshot_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    max_duration: str,
) -> tuple[Path, dict[str, str], dict[str, Any]]:
    """A first sync, then a reconciliation at 1 s a request under ``max_duration``: its
    document, once it exited 0 (re-sends are not owed: what the deadline left is dropped)."""
    mapping, env = prepare(service, snapshot_file, tmp_path, monkeypatch)
    first = start_sync(mapping, env)
    first.communicate(timeout=60)
    assert first.returncode == 0
    service.set_faults(latency_ms=1000)
    run = start_sync(mapping, env, "--reconcile", "--max-duration", max_duration)
    out, err = run.communicate(timeout=60)
    service.set_faults()
    assert run.returncode == 0, (out.decode()[-3000:], err.decode()[-2000:])
    document = document_of(out)
    assert document["status"] == "succeeded"
    assert document["outcomes"]["pending"] == 0
    assert sum(document["resend"]["dropped_by_budget"].values()) > 0
    return mapping, env, document


# What a deadline leaves of a pass's re-sends is the plan's and the push's accounting, above the
# snapshot: these run on DuckDB only. Stops on both backends: test_graceful_stop.py, the two
# tests above and tests/snapshot/test_backend_contract.py.
duckdb_only = pytest.mark.parametrize("snapshot_location", ["duckdb"], indirect=True)


@pytest.mark.slow
@duckdb_only
def test_at_the_deadline_a_reconciliations_resends_left_are_dropped_not_pending(
    service: SandboxHandle, snapshot_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The pass re-sends every record (≈ 25 s, each answer within the read timeout: the units
    # in its first 10 s); the deadline leaves the process's start-up, slow on a loaded
    # machine (past 7 s seen), the units' re-sends, and part of the stays'.
    _, _, document = reconcile_with_deadline(service, snapshot_file, tmp_path, monkeypatch, "20")

    assert document["resend"]["acknowledged"]["reconcile"] > 0


@pytest.mark.slow
@duckdb_only
def test_a_deadline_within_the_units_resends_drops_them_and_their_stays_resends(
    service: SandboxHandle, snapshot_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The units' re-sends take the pass's first 10 s: a 1 s deadline falls among them, with
    # requests in flight the client then gives up. Nothing of it is owed.
    mapping, env, document = reconcile_with_deadline(
        service, snapshot_file, tmp_path, monkeypatch, "1"
    )

    assert document["held_back_total"] == 0
    assert sum(document["unsent_by_urgency"].values()) == 0
    # The next reconciliation, without a deadline, re-sends everything again and succeeds.
    again = start_sync(mapping, env, "--reconcile")
    _, err = again.communicate(timeout=120)
    assert again.returncode == 0, err.decode()[-2000:]

"""A full reconciliation re-sends every record once, resumable across runs its budget cuts
short, against the sandbox over real sockets (docs/drift.md)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

from push_samples import batches_of, expected_state, hotel, sandbox_state, settings_for

from connector.pipeline import sync_batches
from connector.plan import Budget, ReconcilePolicy
from connector.sandbox.testing import SandboxHandle
from connector.snapshot import Snapshot


def test_a_reconciliation_pass_resumes_where_its_budget_stopped_and_sends_each_record_once(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    source = hotel(units=2, reservations=10)  # half of the stays are past: re-sent too
    settings = settings_for(service.base_url, snapshot_file)
    policy = ReconcilePolicy(connection="hotel")
    sync_batches(batches_of(source), settings, policy=policy)
    service.delete_records("demo", "reservation", ["R1", "R8"])
    budgeted = replace(settings, push=replace(settings.push, budget=Budget(max_requests=5)))

    runs = [
        sync_batches(batches_of(source), budgeted, policy=policy, reconcile=True) for _ in range(3)
    ]

    sent = Counter(
        record_id
        for run in runs
        for record_id, reason in zip(
            run.plan.changes["record_id"][: run.requests],
            run.plan.changes["reason"][: run.requests],
            strict=True,
        )
        if reason == "reconcile"
    )
    assert [run.requests for run in runs] == [5, 5, 2]
    assert set(sent) == {f"U{n}" for n in range(2)} | {f"R{n}" for n in range(10)}
    assert set(sent.values()) == {1}  # nothing re-sent twice within the pass
    assert [run.status for run in runs] == ["succeeded"] * 3  # a budget drops re-sends, no debt
    assert sandbox_state(service.records()) == expected_state(source)
    assert {d.record_id for run in runs for d in run.push.drift} >= {"R1", "R8"}
    with Snapshot.open(snapshot_file, read_only=True) as snapshot:
        passes = [snapshot.reconciliation_pass("hotel", entity) for entity in source]
    assert all(found is not None and found.finished_at is not None for found in passes)


def test_the_next_reconciliation_after_a_finished_pass_starts_a_new_one(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    source = hotel(units=1, reservations=2)
    settings = settings_for(service.base_url, snapshot_file)
    sync_batches(batches_of(source), settings)

    first = sync_batches(batches_of(source), settings, reconcile=True)
    nightly = sync_batches(batches_of(source), settings)
    second = sync_batches(batches_of(source), settings, reconcile=True)

    assert (first.requests, nightly.requests, second.requests) == (3, 0, 3)
    assert first.plan.resends["reconcile"] == second.plan.resends["reconcile"] == 3

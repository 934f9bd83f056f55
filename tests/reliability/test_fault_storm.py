"""Fault storms and a hostile environment: 500s, 429s with Retry-After, timeouts, dropped
connections and latency until convergence; the service down at the start; the snapshot locked
by another process, on a read-only file system, on a full disk."""

from __future__ import annotations

import hashlib
import random
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from connector.cli import main as pms_sync
from connector.pipeline import SyncReport, load_batches, sync_batches
from connector.sandbox.testing import SandboxHandle
from connector.settings import SyncSettings, load_settings
from tests.reliability.campaign import (
    TOKEN,
    Source,
    budget,
    differences,
    fast_retry_settings,
    report_summary,
    sync_requests,
)

SEED = 11_2026
STORM_ROUNDS = budget("PMS_SYNC_STORM_ROUNDS", 3)
MAX_RUNS_PER_ROUND = 8
STORM = {
    "error_rate": 0.15,
    "rate_limit_rate": 0.10,
    "retry_after_s": 1,  # the client honours it up to its max_retry_after (shortened below)
    "timeout_rate": 0.05,
    "timeout_s": 5.0,  # hangs until the client's 0.3 s read timeout gives up
    "drop_rate": 0.10,
    "latency_ms": 5,
    "seed": SEED,
}


@pytest.mark.slow
def test_a_fault_storm_converges_to_the_source_and_costs_a_bounded_number_of_requests(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    source = Source.generate(rng, units=10, stays=40)
    folder = tmp_path / "export"
    settings = fast_retry_settings(
        clean_sandbox.base_url, tmp_path / "snapshot.duckdb", max_attempts=4, timeout=0.3
    )
    clean_sandbox.set_faults(**STORM)
    started = time.monotonic()
    runs = changed = requests = acknowledged = resent = explained = 0
    runs_to_converge: list[int] = []
    found: dict = {}
    unexplained: list[str] = []
    pending_before: set[tuple[str, str, str]] = set()

    for round_number in range(STORM_ROUNDS):
        if round_number:
            source.edit(rng, changes=rng.randrange(10, 30))
        batches, policy = load_batches(source.write(folder))
        for attempt in range(1, MAX_RUNS_PER_ROUND + 1):
            report = sync_batches(
                batches,
                settings,
                policy=policy,
                allow_mass_change=True,
                release_units_with_stays=True,
            )
            runs += 1
            if attempt == 1:
                changed += sum(n for action, n in report.counts.items() if action != "skip")
            requests += report.requests
            acknowledged += report.outcomes["acknowledged"]
            # A lost answer then a "skipped" retry in the same run is explained, not a
            # disagreement. A record a previous run left pending after a lost answer comes
            # back "skipped": a disagreement, and the only kind this storm may produce.
            explained += report.push.resent_after_lost_answer
            resent += len(report.push.disagreements)
            unexplained += [
                f"{d.entity} {d.record_id}: {d.detail}"
                for d in report.push.disagreements
                if (d.entity, d.account_id, d.record_id) not in pending_before
                or "skipped" not in d.detail
            ]
            pending_before = {(p.entity, p.account_id, p.record_id) for p in report.push.problems}
            if report.push.complete:
                break
        runs_to_converge.append(attempt)
        found = differences(clean_sandbox, batches)
        if any(found.values()):
            break
    clean_sandbox.set_faults()
    final = sync_batches(
        batches, settings, policy=policy, allow_mass_change=True, release_units_with_stays=True
    )

    per_record = requests / changed
    report_summary(
        "storm",
        {
            "seed": SEED,
            "faults": STORM,
            "rounds": STORM_ROUNDS,
            "runs": runs,
            "runs_to_converge": runs_to_converge,
            "changed_records": changed,
            "requests": requests,
            "faults_injected": requests - acknowledged,
            "requests_per_changed_record": round(per_record, 2),
            "resent_already_stored": resent + explained,
            "lost_answers_explained_in_run": explained,
            "disagreements": resent,
            "records_lost": len(found.get("lost", [])),
            "duplicates": found.get("duplicated"),
            "seconds": round(time.monotonic() - started, 1),
        },
    )
    assert not any(found.values()), found
    assert unexplained == []
    assert final.requests == 0
    assert requests - acknowledged > changed * 0.3, "the storm hit a good share of requests"
    # One fault in ≈ 2.5 requests: the retries cost about that much again, not more.
    assert per_record < 2.5


def test_a_service_down_at_the_start_fails_clearly_and_leaves_the_snapshot_untouched(
    tmp_path: Path, clean_sandbox: SandboxHandle
) -> None:
    source = Source.generate(random.Random(1), units=3, stays=5)
    mapping = source.write(tmp_path / "export")
    snapshot = tmp_path / "snapshot.duckdb"
    settings = load_settings(base_url=clean_sandbox.base_url, snapshot=snapshot, token=TOKEN)
    assert _sync(mapping, settings).push.complete
    source.edit(random.Random(2), changes=5)
    source.write(tmp_path / "export")
    before = _digest(snapshot)
    with _closed_port() as dead_url:
        started = time.monotonic()
        result = CliRunner().invoke(
            pms_sync,
            ["sync", str(mapping), "--base-url", dead_url, "--snapshot", str(snapshot)],
            env={"PMS_SYNC_TOKEN": TOKEN},
        )
        elapsed = time.monotonic() - started

    assert result.exit_code == 1
    assert f"cannot reach the service at {dead_url}" in result.output
    assert "nothing was sent" in result.output
    assert _digest(snapshot) == before
    assert elapsed < 10  # not every record's retry budget


def test_a_snapshot_locked_by_another_process_is_named_and_nothing_is_sent(
    tmp_path: Path, clean_sandbox: SandboxHandle
) -> None:
    mapping = Source.generate(random.Random(3), units=3, stays=5).write(tmp_path / "export")
    snapshot = tmp_path / "snapshot.duckdb"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, sys; c = duckdb.connect({str(snapshot)!r});"
            " print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        before = sync_requests(clean_sandbox)
        result = CliRunner().invoke(
            pms_sync,
            [
                "sync",
                str(mapping),
                "--base-url",
                clean_sandbox.base_url,
                "--snapshot",
                str(snapshot),
            ],
            env={"PMS_SYNC_TOKEN": TOKEN},
        )
    finally:
        holder.communicate("", timeout=10)

    assert result.exit_code == 1
    assert f"the snapshot {snapshot} is in use by another pms-sync process" in result.output
    assert sync_requests(clean_sandbox) == before


@contextmanager
def _tmpfs(folder: Path, size: str, *, read_only: bool = False) -> Iterator[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()!r}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_read_only_snapshot_path_fails_clearly_before_anything_is_sent(
    tmp_path: Path, clean_sandbox: SandboxHandle
) -> None:
    # Root ignores file modes: a read-only file system is the only honest read-only path.
    mapping = Source.generate(random.Random(4), units=3, stays=5).write(tmp_path / "export")
    with _tmpfs(tmp_path / "ro", "1M", read_only=True) as folder:
        snapshot = folder / "snapshot.duckdb"
        before = sync_requests(clean_sandbox)
        result = CliRunner().invoke(
            pms_sync,
            [
                "sync",
                str(mapping),
                "--base-url",
                clean_sandbox.base_url,
                "--snapshot",
                str(snapshot),
            ],
            env={"PMS_SYNC_TOKEN": TOKEN},
        )
        left = list(folder.iterdir())

    assert result.exit_code == 1
    assert str(snapshot) in result.output and "Read-only" in result.output, result.output
    assert sync_requests(clean_sandbox) == before
    assert left == []


@pytest.mark.slow
def test_a_full_disk_under_the_snapshot_never_loses_what_the_service_acknowledged(
    tmp_path: Path, clean_sandbox: SandboxHandle
) -> None:
    source = Source.generate(random.Random(5), units=10, stays=60)
    mapping = source.write(tmp_path / "export")
    with _tmpfs(tmp_path / "full", "32k") as folder:
        snapshot = folder / "snapshot.duckdb"
        settings = load_settings(base_url=clean_sandbox.base_url, snapshot=snapshot, token=TOKEN)
        result = CliRunner().invoke(
            pms_sync,
            [
                "sync",
                str(mapping),
                "--base-url",
                clean_sandbox.base_url,
                "--snapshot",
                str(snapshot),
            ],
            env={"PMS_SYNC_TOKEN": TOKEN},
        )
        # Space comes back (the operator cleans up): the next run completes what is missing.
        subprocess.run(["mount", "-o", "remount,size=8M", str(folder)], check=True)
        rerun = _sync(mapping, settings)
        again = _sync(mapping, settings)

    assert result.exit_code in (0, 1), result.output
    if result.exit_code == 1:
        assert "No space left on device" in result.output and str(snapshot) in result.output
    assert rerun.push.complete
    assert differences(clean_sandbox, _mapped(mapping)[0]) == {
        "lost": [],
        "not_retired": [],
        "duplicated": 0,
    }
    assert again.requests == 0


def _mapped(mapping: Path):
    return load_batches(mapping)


def _sync(mapping: Path, settings: SyncSettings) -> SyncReport:
    batches, policy = load_batches(mapping)
    return sync_batches(batches, settings, policy=policy)


def _digest(path: Path) -> str:
    files = sorted(path.parent.glob(path.name + "*"))
    return hashlib.sha256(b"".join(f.name.encode() + f.read_bytes() for f in files)).hexdigest()


@contextmanager
def _closed_port() -> Iterator[str]:
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    yield f"http://127.0.0.1:{port}"

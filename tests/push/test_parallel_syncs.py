"""`pms-sync sync` processes on one PostgreSQL snapshot: different connections at once, the
same connection one at a time (refused naming the holder, or waiting with --wait)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from connector.sandbox.testing import SandboxHandle
from connector.snapshot import LockScope, Snapshot
from tests.samples import pinned_hotel

PMS_SYNC = Path(sys.executable).with_name("pms-sync")  # the installed console script
RENTAL = Path(__file__).resolve().parents[2] / "mappings" / "vacation_rental"


@pytest.fixture
def mappings(tmp_path: Path) -> dict[str, Path]:
    """Two connections on disjoint accounts: ``hotel`` (hotel-a, hotel-b) and
    ``vacation_rental`` (demo)."""
    return {
        "hotel": pinned_hotel(tmp_path / "hotel"),
        "vacation_rental": shutil.copytree(RENTAL, tmp_path / "rental") / "mapping.yaml",
    }


def _env(service: SandboxHandle, snapshot: str, tmp_path: Path) -> dict[str, str]:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"demo": "demo-token", "hotel-a": "hotel-a-token"}))
    return {
        **os.environ,
        "PMS_SYNC_BASE_URL": service.base_url,
        "PMS_SYNC_SNAPSHOT": snapshot,
        "PMS_SYNC_TOKENS_FILE": str(tokens),
        "PMS_SYNC_TOKEN": "group-token",  # hotel-b
        "PMS_SYNC_MAX_ATTEMPTS": "2",
        "HOTEL_BER_ACCOUNT": "hotel-a",
        "HOTEL_MUC_ACCOUNT": "hotel-b",
    }


def _sync(mapping: Path, env: dict[str, str], *options: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(PMS_SYNC), "sync", str(mapping), "--json", *options],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _owners(snapshot: str) -> dict[str, set[str]]:
    with Snapshot.open(snapshot, read_only=True) as store:
        acknowledged = store.acknowledged()
    return {
        str(connection): set(rows["account_id"])
        for connection, rows in acknowledged.groupby("connection")
    }


@pytest.mark.slow
def test_syncs_of_two_connections_run_at_once_on_one_postgresql_snapshot(
    service: SandboxHandle, postgres_snapshot_url: str, tmp_path: Path, mappings: dict[str, Path]
) -> None:
    env = _env(service, postgres_snapshot_url, tmp_path)

    runs = [_sync(mapping, env) for mapping in mappings.values()]
    finished = [run.communicate(timeout=600) for run in runs]
    # While one connection is being written (held here), the other one syncs all the same.
    with Snapshot.open(postgres_snapshot_url, scope=LockScope("hotel", whole_connection=True)):
        beside = _sync(mappings["vacation_rental"], env)
        beside_output = beside.communicate(timeout=600)

    assert [run.returncode for run in runs] == [0, 0], [err for _, err in finished]
    reports = [json.loads(out) for out, _ in finished]
    assert all(r["requests"] == r["outcomes"]["acknowledged"] > 0 for r in reports)
    assert beside.returncode == 0, beside_output[1]
    assert json.loads(beside_output[0])["requests"] == 0  # nothing changed meanwhile
    assert _owners(postgres_snapshot_url) == {
        "hotel": {"hotel-a", "hotel-b"},
        "vacation_rental": {"demo"},
    }
    assert len(service.records()) == sum(r["outcomes"]["acknowledged"] for r in reports)
    assert {record["writes"] for record in service.records()} == {1}


@pytest.mark.slow
def test_a_sync_of_a_connection_being_synced_names_the_holder_or_waits_for_it(
    service: SandboxHandle, postgres_snapshot_url: str, tmp_path: Path, mappings: dict[str, Path]
) -> None:
    env = _env(service, postgres_snapshot_url, tmp_path)
    held = LockScope("hotel", frozenset({"hotel-a"}))

    with Snapshot.open(postgres_snapshot_url, scope=held):
        refused = _sync(mappings["hotel"], env)
        refused_output = refused.communicate(timeout=600)
        waiting = _sync(mappings["hotel"], env, "--wait", "600")
        _until_waiting_for_the_lock(postgres_snapshot_url, waiting)
        sent_while_held = service.count()
    waited_output = waiting.communicate(timeout=600)

    assert refused.returncode == 1
    error = json.loads(refused_output[0])["error"]
    assert error.startswith("connection 'hotel', account 'hotel-a' of the snapshot postgresql://")
    assert f"being written by pid {os.getpid()} on " in error
    assert "command: " in error and "--wait SECONDS" in error
    assert sent_while_held == 0
    assert waiting.returncode == 0, waited_output[1]
    assert json.loads(waited_output[0])["outcomes"]["acknowledged"] == len(service.records()) > 0


def _until_waiting_for_the_lock(snapshot: str, process: subprocess.Popen[str]) -> None:
    """Until ``process`` has its lock session open (it maps the export first)."""
    engine = sa.create_engine(snapshot.replace("postgresql://", "postgresql+psycopg://", 1))
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline and process.poll() is None:
            with engine.connect() as connection:
                sessions = connection.execute(
                    sa.text(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                        "'pms-sync' AND pid <> pg_backend_pid()"
                    )
                ).scalar_one()
            if sessions >= 4:  # this test's two, and the waiting run's two
                return
            time.sleep(0.1)
    finally:
        engine.dispose()
    raise AssertionError(f"the second sync never reached the lock: {process.poll()=}")

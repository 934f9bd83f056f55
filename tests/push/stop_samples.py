"""The stopped `pms-sync sync` processes of test_graceful_stop*.py: their setup, start and the
rerun that must converge (two modules, so that both pytest-xdist workers share their minutes)."""

from __future__ import annotations

import json
import os
import shutil
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


def prepare(
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


def source_of(mapping: Path) -> dict[tuple[str, str, str], Any]:
    batches, _ = load_batches(mapping)
    return {
        (row.account_id, str(entity), row.record_id): json.loads(row.payload)
        for entity, batch in batches.items()
        for row in batch.records.itertuples(index=False)
    }


def start_sync(mapping: Path, env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(PMS_SYNC), "sync", str(mapping), "--json", *args],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def wait_for_stored(service: SandboxHandle, stored: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while service.count() < stored and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.02)
    assert process.poll() is None, "the sync must still be pushing"


def document_of(out: bytes) -> dict[str, Any]:
    """stdout holds exactly one JSON document."""
    return json.loads(out.decode())


def converges(
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

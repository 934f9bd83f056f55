"""DuckDB running out of memory while a push records its answers is named as such: the limit
in force, the variable that sets it and the step, never left as DuckDB's bare message."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from connector.errors import OutOfMemoryError
from connector.pipeline import run_sync
from connector.sandbox.testing import SandboxHandle
from connector.snapshot._duckdb import DuckDBSnapshot
from tests.push.push_samples import settings_for
from tests.samples import pinned_hotel

TOKENS = {"demo": "demo-token", "hotel-a": "hotel-a-token"}


def _out_of_memory(*_: object, **__: object) -> None:
    raise duckdb.OutOfMemoryException("failed to pin block of size 256.0 KiB")


def test_running_out_of_memory_while_recording_names_the_limit_and_the_push(
    clean_sandbox: SandboxHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOTEL_BER_ACCOUNT", "demo")
    monkeypatch.setenv("HOTEL_MUC_ACCOUNT", "hotel-a")
    mapping = pinned_hotel(tmp_path / "hotel")
    settings = settings_for(
        clean_sandbox.base_url, tmp_path / "snapshot.duckdb", token=None, tokens=TOKENS
    )
    monkeypatch.setattr(DuckDBSnapshot, "record_acknowledgements", _out_of_memory)

    with pytest.raises(OutOfMemoryError, match="PMS_SYNC_MEMORY_LIMIT") as raised:
        run_sync(mapping, settings)

    assert "out of memory while sending the plan and recording the answers" in str(raised.value)

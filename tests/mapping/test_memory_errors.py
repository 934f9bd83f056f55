"""DuckDB running out of memory is named as such: the limit in force, the variable that sets
it and the step (reading an input with its column count, mapping an entity), never a hint
about the mapping's SQL. Real DuckDB under a tiny PMS_SYNC_MEMORY_LIMIT, real processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mapping_helpers import accommodation_mapping, reservation_mapping, write_csv, write_mapping

from connector.errors import OutOfMemoryError
from connector.mapping import load_mapping, map_records

REPOSITORY = Path(__file__).resolve().parents[2]


def _validate(mapping: Path, limit: str) -> subprocess.CompletedProcess[str]:
    """``pms-sync validate MAPPING`` in a process of its own under ``limit``."""
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY), "PMS_SYNC_MEMORY_LIMIT": limit}
    env.pop("PMS_SYNC_DEBUG", None)
    command = [sys.executable, "-c", "from connector.cli import main; main()"]
    return subprocess.run(
        [*command, "validate", str(mapping)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _bookings(folder: Path, count: int) -> Path:
    write_csv(folder / "bookings.csv", [{"booking": f"B{i}"} for i in range(count)])
    return write_mapping(folder, reservation_mapping({}))


def test_running_out_of_memory_while_mapping_names_the_limit_and_the_entity(
    tmp_path: Path,
) -> None:
    done = _validate(_bookings(tmp_path, 2000), "3MB")

    assert done.returncode != 0
    assert "out of memory while mapping the reservation entity" in done.stderr, done.stderr
    assert "PMS_SYNC_MEMORY_LIMIT" in done.stderr
    assert "3MB" in done.stderr
    assert "TRY_CAST" not in done.stderr
    assert "Traceback" not in done.stderr


def test_the_library_raises_an_out_of_memory_error_not_a_mapping_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapping = load_mapping(_bookings(tmp_path, 2000))
    monkeypatch.setenv("PMS_SYNC_MEMORY_LIMIT", "3MB")

    with pytest.raises(OutOfMemoryError, match=r"PMS_SYNC_MEMORY_LIMIT") as raised:
        map_records(mapping)

    assert "TRY_CAST" not in str(raised.value)


def test_a_csv_too_wide_for_the_memory_limit_names_its_column_count(tmp_path: Path) -> None:
    # The width that exhausts DuckDB's default 1 GB (10,000 columns) takes minutes to plan on
    # two cores; 1,000 columns under 30 MB fail the same way in seconds.
    columns = [f"c{index}" for index in range(1_000)]
    (tmp_path / "units.csv").write_text(
        ",".join(columns) + "\n" + ",".join("x" for _ in columns) + "\n", encoding="utf-8"
    )
    mapping = write_mapping(tmp_path, accommodation_mapping({"id": "c0"}))

    done = _validate(mapping, "30MB")

    assert done.returncode != 0
    assert "out of memory while reading units.csv (1,000 columns)" in done.stderr, done.stderr
    assert "PMS_SYNC_MEMORY_LIMIT" in done.stderr
    assert "30MB" in done.stderr

"""The export-stability rail: a file still being written is refused before anything is read."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from connector.errors import ConfigError, ExportIncompleteError
from connector.safety.stability import ExportFile, ensure_exports_complete, settle_seconds


def csv_file(path: Path, text: str, age_s: float = 0.0) -> ExportFile:
    path.write_text(text, encoding="utf-8")
    if age_s:
        stamp = time.time() - age_s
        os.utime(path, (stamp, stamp))
    return ExportFile(input="units", path=path, is_csv=True)


def test_a_file_that_grows_during_the_settle_interval_is_refused(tmp_path: Path) -> None:
    export = csv_file(tmp_path / "units.csv", "id,name\n1,a\n")

    def keep_writing() -> None:
        time.sleep(0.1)
        with export.path.open("a", encoding="utf-8") as handle:
            handle.write("2,b\n")

    writer = threading.Thread(target=keep_writing)
    writer.start()
    try:
        with pytest.raises(ExportIncompleteError, match="still being written") as error:
            ensure_exports_complete([export], settle=0.4)
    finally:
        writer.join()
    assert "units.csv" in str(error.value) and "nothing was read or sent" in str(error.value)


def test_a_file_left_alone_longer_than_the_interval_is_read_without_waiting(
    tmp_path: Path,
) -> None:
    export = csv_file(tmp_path / "units.csv", "id,name\n1,a\n", age_s=60)

    started = time.monotonic()
    ensure_exports_complete([export], settle=30)

    assert time.monotonic() - started < 1


def test_a_fresh_file_that_stays_unchanged_passes_after_the_interval(tmp_path: Path) -> None:
    export = csv_file(tmp_path / "units.csv", "id,name\n1,a\n")

    started = time.monotonic()
    ensure_exports_complete([export], settle=0.2)

    assert 0.05 < time.monotonic() - started < 2


def test_a_csv_whose_last_row_has_no_newline_is_refused_as_partly_written(
    tmp_path: Path,
) -> None:
    export = csv_file(tmp_path / "units.csv", "id,name\n1,a\n2,b", age_s=60)

    with pytest.raises(ExportIncompleteError, match="does not end with a newline"):
        ensure_exports_complete([export], settle=0)
    ensure_exports_complete([export], settle=0, require_final_newline=False)


def test_crlf_and_empty_exports_are_complete(tmp_path: Path) -> None:
    ensure_exports_complete(
        [
            csv_file(tmp_path / "a.csv", "id,name\r\n1,a\r\n", age_s=60),
            csv_file(tmp_path / "b.csv", "", age_s=60),
        ],
        settle=0,
    )


def test_the_environment_overrides_the_mappings_settle_interval() -> None:
    assert settle_seconds(2.0, env={}) == 2.0
    assert settle_seconds(2.0, env={"PMS_SYNC_EXPORT_SETTLE_SECONDS": "0.5"}) == 0.5
    with pytest.raises(ConfigError, match="PMS_SYNC_EXPORT_SETTLE_SECONDS"):
        settle_seconds(2.0, env={"PMS_SYNC_EXPORT_SETTLE_SECONDS": "soon"})

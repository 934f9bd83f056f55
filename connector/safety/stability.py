"""Refusing an export that is still being written, before a single row is read.

A PMS that writes its nightly export while the sync starts would hand the mapping a truncated
file, and a truncated file reads as thousands of deletions. Two signs give a writer away: the
file's size or modification time still changes, or a CSV's last line has no newline yet (the
writer is in the middle of a row). Files left alone for the settle interval cost no waiting:
only a file modified within it is watched, for the rest of the interval.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from connector.config import InputSection
from connector.errors import ExportIncompleteError
from connector.sources.files import FileState, resolve_files

SETTLE_VARIABLE = InputSection.variable("export_settle_seconds")
"""Overrides every mapping's ``safety.export_settle_seconds`` (deployments, tests)."""


@dataclass(frozen=True)
class ExportFile:
    input: str  # the mapping's input name
    path: Path
    is_csv: bool


def settle_seconds(configured: float, env: Mapping[str, str] | None = None) -> float:
    """The mapping's interval unless the environment overrides it."""
    value = InputSection.read(env).export_settle_seconds
    return configured if value is None else value


def export_files(mapping: object) -> list[ExportFile]:
    """The files a mapping reads (CSV and XLSX inputs; SQL inputs have no file)."""
    found: list[ExportFile] = []
    base_dir: Path = mapping.base_dir  # type: ignore[attr-defined]
    for name, spec in mapping.inputs.items():  # type: ignore[attr-defined]
        kind = getattr(spec, "type", "sql")
        if kind not in ("csv", "xlsx"):
            continue
        for path in resolve_files(spec.path, base_dir, name):
            found.append(ExportFile(input=name, path=path, is_csv=kind == "csv"))
    return found


def ensure_exports_complete(
    files: Iterable[ExportFile],
    *,
    settle: float,
    require_final_newline: bool = True,
    clock: float | None = None,
) -> None:
    """Raise :class:`ExportIncompleteError` when any file is still being written."""
    files = list(files)
    now = time.time() if clock is None else clock
    states = {file.path: _stat(file) for file in files}
    # Only files touched within the interval need watching, and only for what is left of it.
    youngest = max((state.mtime_ns / 1e9 for state in states.values()), default=0.0)
    wait = settle - (now - youngest)
    if settle > 0 and wait > 0:
        time.sleep(min(wait, settle))
        for file in files:
            before, after = states[file.path], _stat(file)
            if after != before:
                raise ExportIncompleteError(
                    f"{file.path} is still being written: its size went from {before.size} to "
                    f"{after.size} bytes (or its modification time changed) within "
                    f"{settle:g} s; nothing was read or sent. Run again once the export is "
                    f"complete (safety.export_settle_seconds sets the interval)",
                    source=file.input,
                )
    if require_final_newline:
        for file in files:
            if file.is_csv and not _ends_with_newline(file.path):
                raise ExportIncompleteError(
                    f"{file.path} does not end with a newline: its last row looks partly "
                    f"written; nothing was read or sent. Run again once the export is complete, "
                    f"or set safety.require_final_newline: false if this PMS writes files "
                    f"without a final newline",
                    source=file.input,
                )


def check_mapping_exports(mapping: object) -> None:
    """The stability rail for a loaded mapping, with its ``safety:`` settings."""
    safety = getattr(mapping, "safety", None)
    configured = safety.export_settle_seconds if safety is not None else 2.0
    ensure_exports_complete(
        export_files(mapping),
        settle=settle_seconds(configured),
        require_final_newline=safety.require_final_newline if safety is not None else True,
    )


def _stat(file: ExportFile) -> FileState:
    try:
        return FileState.of(file.path)
    except OSError as error:
        raise ExportIncompleteError(
            f"cannot read {file.path}: {error.strerror} (it may have been replaced mid-write)",
            source=file.input,
        ) from error


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() == 0:
            return True  # an empty file has no partial row
        # UTF-16 writes "\n\x00"; look at the last two bytes.
        handle.seek(max(handle.tell() - 2, 0))
        tail = handle.read()
    return tail.endswith(b"\n") or tail.endswith(b"\n\x00") or tail.endswith(b"\r")

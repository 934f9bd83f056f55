"""The memory DuckDB may hold in a run: one limit, for every DuckDB connection a run opens.

A run's DuckDB connections follow one another: the mapping engine's (with the short read-only
connections that read the snapshot's fingerprints and validated payloads) is closed before
the snapshot's connection computes the diff, so at no moment do two of them hold their share
of memory. Beyond the limit DuckDB spills to temporary files, and fails where an operator
cannot spill. ``PMS_SYNC_MEMORY_LIMIT`` sets it (DuckDB's own syntax: ``1GB``, ``800MB``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import duckdb

from connector.config import RunSection

if TYPE_CHECKING:
    from connector.errors import PmsSyncError

MEMORY_LIMIT_VARIABLE = RunSection.variable("memory_limit")


def memory_limit() -> str:
    """The limit every DuckDB connection of a run gets (``PMS_SYNC_MEMORY_LIMIT``, else 1GB)."""
    return RunSection.read().memory_limit


def slice_rows() -> int:
    """Rows of an entity the mapping engine maps at once, as the environment sets them
    (``PMS_SYNC_SLICE_ROWS``): what a run's settings pass down when nobody gave them."""
    return RunSection.read().slice_rows


def open_duckdb(
    database: str, *, read_only: bool = False, **settings: str
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection of the run: its one memory limit, ``settings`` (e.g.
    ``temp_directory``), and no progress bar.

    DuckDB's Python client draws a progress bar on standard output for any query that runs
    longer than two seconds, even when standard output is a pipe, where it lands in front of
    a command's ``--json`` document. The setting is the connection's own (DuckDB refuses it
    as a global option); its cursors inherit it.
    """
    config: dict[str, str | bool | int | float | list[str]] = {
        "memory_limit": memory_limit(),
        **settings,
    }
    connection = duckdb.connect(database, read_only=read_only, config=config)
    connection.execute("SET enable_progress_bar = false")
    return connection


def out_of_memory(doing: str) -> PmsSyncError:
    """The error of a step (``doing``: "reading units.csv (10,000 columns)") that ran out of
    the run's memory: it names the limit in force and the variable that sets it, never a hint
    about the mapping's SQL, which is not the cause."""
    from connector.errors import OutOfMemoryError

    return OutOfMemoryError(
        f"out of memory while {doing}: DuckDB may use {memory_limit()} "
        f"({MEMORY_LIMIT_VARIABLE}); set {MEMORY_LIMIT_VARIABLE} higher (e.g. "
        f"{MEMORY_LIMIT_VARIABLE}=4GB) where the machine has the memory, and run again"
    )


@contextmanager
def memory_named(doing: str) -> Iterator[None]:
    """Within the block, DuckDB running out of memory is :func:`out_of_memory` of ``doing``."""
    try:
        yield
    except duckdb.OutOfMemoryException:
        raise out_of_memory(doing) from None

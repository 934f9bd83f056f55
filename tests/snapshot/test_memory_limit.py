"""One DuckDB memory limit for a run: ``PMS_SYNC_MEMORY_LIMIT``, 1GB by default."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from connector.duckdb_memory import MEMORY_LIMIT_VARIABLE, memory_limit, open_duckdb
from connector.errors import ConfigError
from connector.snapshot import Snapshot


def _shown(limit: str) -> str:
    """How DuckDB shows a limit (``286.1 MiB`` for 300MB)."""
    with duckdb.connect(":memory:", config={"memory_limit": limit}) as probe:
        ((shown,),) = probe.execute("SELECT current_setting('memory_limit')").fetchall()
    return str(shown)


def test_the_default_limit_is_one_gigabyte(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MEMORY_LIMIT_VARIABLE, raising=False)
    assert memory_limit() == "1GB"


def test_the_snapshot_connection_takes_the_configured_limit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(MEMORY_LIMIT_VARIABLE, "300MB")
    with Snapshot.open(tmp_path / "snapshot.duckdb") as snapshot:
        ((shown,),) = snapshot._query("SELECT current_setting('memory_limit') AS m").itertuples(
            index=False
        )
    assert str(shown) == _shown("300MB") != _shown("1GB")


def test_a_limit_that_is_no_size_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MEMORY_LIMIT_VARIABLE, "a lot")
    with pytest.raises(ConfigError, match=MEMORY_LIMIT_VARIABLE):
        memory_limit()


def test_the_runs_connections_draw_no_progress_bar(tmp_path: Path) -> None:
    # DuckDB's Python client draws one on stdout (even into a pipe) for a query that runs
    # longer than two seconds: it would land in front of `pms-sync plan --json`.
    # (DuckDB's default depends on how the process was started: on when standard output is a pipe, as in `python -c … | cat`.)
    shown = "SELECT current_setting('enable_progress_bar')"
    with open_duckdb(":memory:") as connection:
        assert connection.execute(shown).fetchall() == [(False,)]
    with Snapshot.open(tmp_path / "snapshot.duckdb") as snapshot:
        # The snapshot's queries run on cursors of its connection.
        assert snapshot._query(shown).iloc[0, 0] == False  # noqa: E712 (numpy's bool)

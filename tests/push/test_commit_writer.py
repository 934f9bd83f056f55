"""The push commits answers from one writer thread: durable at the end, one user at a time."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from push_samples import FAST_RETRY, batches_of, hotel

from connector.client import AccountTokens, ClientConfig, ServiceClient
from connector.contract import Entity
from connector.errors import SnapshotError
from connector.plan import build_plan
from connector.push import PushOptions, push_plan
from connector.push._recorder import acknowledged_rows, plan_days, recorded_columns
from connector.sandbox.testing import SandboxHandle
from connector.snapshot import (
    ACKNOWLEDGEMENT_SCHEMA,
    Acknowledgement,
    RecordStatus,
    Snapshot,
    SnapshotStore,
    acknowledgement_table,
)


class WatchedSnapshot:
    """A real snapshot whose every call notes its thread and whether another call overlapped
    it (DuckDB connections must not be used by two threads at once)."""

    def __init__(self, inner: SnapshotStore, fail_commits: bool = False) -> None:
        self._inner = inner
        self._busy = threading.Lock()
        self.fail_commits = fail_commits
        self.overlaps = 0
        self.commit_threads: set[int] = set()
        self.location = inner.location

    def __getattr__(self, name: str) -> Any:
        member = getattr(self._inner, name)
        if not callable(member):
            return member

        def watched(*args: Any, **kwargs: Any) -> Any:
            if not self._busy.acquire(blocking=False):
                self.overlaps += 1
                self._busy.acquire()
            try:
                if name in ("record_acknowledgements", "record_refusals"):
                    self.commit_threads.add(threading.get_ident())
                    if self.fail_commits and args and args[0]:
                        raise SnapshotError("cannot write the snapshot: No space left on device")
                return member(*args, **kwargs)
            finally:
                self._busy.release()

        return watched


def push_hotel(
    service: SandboxHandle, snapshot_file: Path, wrap: Callable[[SnapshotStore], WatchedSnapshot]
) -> tuple[WatchedSnapshot, Any]:
    with Snapshot.open(snapshot_file) as store:
        watched = wrap(store)
        plan = build_plan(store, batches_of(hotel(units=6, reservations=60)))
        client = ServiceClient(
            ClientConfig(base_url=service.base_url, concurrency=8, retry=FAST_RETRY),
            AccountTokens(default="demo-token"),
        )
        options = PushOptions(concurrency=8, commit_every=7, commit_interval=0.01)
        try:
            result = push_plan(plan, client, watched, options=options)  # type: ignore[arg-type]
        except SnapshotError as error:
            result = error
        return watched, (result, len(store.acknowledged()))


def test_answers_are_committed_by_one_writer_thread_and_all_durable_at_the_end(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    watched, (result, acknowledged) = push_hotel(service, snapshot_file, WatchedSnapshot)

    assert result.outcomes["acknowledged"] == 66
    assert acknowledged == 66  # close() waited for the last commit
    assert watched.overlaps == 0
    assert watched.commit_threads and threading.get_ident() not in watched.commit_threads


def test_a_failed_commit_fails_the_push(service: SandboxHandle, snapshot_file: Path) -> None:
    _, (result, acknowledged) = push_hotel(
        service, snapshot_file, lambda store: WatchedSnapshot(store, fail_commits=True)
    )

    assert isinstance(result, SnapshotError)
    assert "No space left" in str(result)
    assert acknowledged == 0


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([pd.Timestamp("2026-03-01"), pd.NaT], [date(2026, 3, 1), None]),
        (["2026-03-01", None, "2026-03-02T00:00:00"], [date(2026, 3, 1), None, date(2026, 3, 2)]),
        (
            [date(2026, 3, 1), pd.Timestamp("2026-03-02 10:30")],
            [date(2026, 3, 1), date(2026, 3, 2)],
        ),
        ([None, None], [None, None]),
        ([], []),
        # An offset written with the date: the day written, not the day in UTC.
        (["2026-03-01T23:30:00+02:00", None], [date(2026, 3, 1), None]),
    ],
)
def test_plan_dates_become_days_once_per_plan(values: list[Any], expected: list[Any]) -> None:
    assert plan_days(pd.Series(values, dtype=object)).to_pylist() == expected


def test_acknowledgements_are_taken_from_the_plans_own_columns() -> None:
    documents = pa.chunked_array(
        [['{"id":"R1"}', '{"id":"R2"}'], ['{"id":"R3"}']], pa.large_string()
    )
    changes = pd.DataFrame(
        {
            "account_id": pd.Series(["demo", "demo", "other"], dtype="str"),
            "entity": pd.Series(["reservation"] * 3, dtype="str"),
            "record_id": pd.Series(["R1", "R2", "R3"], dtype="str"),
            "content_hash": pd.Series(["h1", "h2", "h3"], dtype="str"),
            "payload": pd.Series(pd.array(documents, dtype="str")),
            "status_after": pd.Series(["active", "cancelled", "active"], dtype="str"),
            "checkin": pd.to_datetime(["2026-03-01", None, "2026-03-05"]),
            "checkout": pd.to_datetime(["2026-03-03", None, "2026-03-06"]),
        }
    )
    recorded = recorded_columns(changes)
    # The documents are the plan's own buffers, chunk for chunk: no copy of a first run's 1M.
    plan_chunks = pa.Table.from_pandas(changes[["payload"]]).column("payload").chunks
    kept = recorded.payloads._documents.chunks
    assert [c.buffers()[2].address for c in kept] == [c.buffers()[2].address for c in plan_chunks]

    at = [datetime(2026, 3, 1, 2, 0), datetime(2026, 3, 1, 2, 1)]
    rows = acknowledged_rows(recorded, [2, 1], at, ["req-3", None], "hotel")

    assert rows.schema == ACKNOWLEDGEMENT_SCHEMA
    assert (
        rows.to_pylist()
        == acknowledgement_table(
            [
                Acknowledgement(
                    "other",
                    Entity.RESERVATION,
                    "R3",
                    "h3",
                    '{"id":"R3"}',
                    date(2026, 3, 5),
                    date(2026, 3, 6),
                    RecordStatus.ACTIVE,
                    at[0],
                    "req-3",
                    "hotel",
                ),
                Acknowledgement(
                    "demo",
                    Entity.RESERVATION,
                    "R2",
                    "h2",
                    '{"id":"R2"}',
                    None,
                    None,
                    RecordStatus.CANCELLED,
                    at[1],
                    None,
                    "hotel",
                ),
            ]
        ).to_pylist()
    )
    assert acknowledged_rows(recorded, [0], at[:1], [None], None)["connection"].to_pylist() == [
        None
    ]

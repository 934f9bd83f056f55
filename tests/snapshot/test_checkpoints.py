"""The DuckDB snapshot checkpoints every 256 MB of write-ahead log, not DuckDB's 16 MB: the
acknowledgements committed between two checkpoints live in the log, and a process killed
before it closes the snapshot loses none of them (docs/decisions.md, "The snapshot's
checkpoints")."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from connector.contract import Entity
from connector.snapshot import Snapshot

COMMITS, PER_COMMIT = 24, 1_000  # ≈ 24 MB of documents: past DuckDB's default threshold
DEFAULT_THRESHOLD = 16 * 2**20

# Commits as a push's writer does, then dies without closing the snapshot (no checkpoint at
# close) after printing the size of the write-ahead log the commits left.
_KILLED_WRITER = textwrap.dedent(
    f"""
    import os, sys
    from datetime import datetime
    from pathlib import Path

    from connector.snapshot import Acknowledgement, RecordStatus, Snapshot, acknowledgement_table

    file = Path(sys.argv[1])
    opened = Snapshot.open(file)  # never left: the process dies with the snapshot open
    snapshot = opened.__enter__()
    for commit in range({COMMITS}):
        snapshot.record_acknowledgements(
            acknowledgement_table(
                [
                    Acknowledgement(
                        account_id="acc-1",
                        entity="reservation",
                        record_id=f"R{{commit}}-{{n}}",
                        content_hash=f"h{{commit}}-{{n}}",
                        payload='{{"id":"R%d-%d","note":"%s"}}' % (commit, n, "x" * 1000),
                        checkin=None,
                        checkout=None,
                        status=RecordStatus.ACTIVE,
                        acknowledged_at=datetime(2026, 11, 27),
                        request_id=None,
                    )
                    for n in range({PER_COMMIT})
                ]
            )
        )
    print(Path(str(file) + ".wal").stat().st_size, flush=True)
    os._exit(0)
    """
)


def test_acknowledgements_past_duckdbs_default_threshold_survive_a_killed_process(
    tmp_path: Path,
) -> None:
    file = tmp_path / "snapshot.duckdb"
    child = subprocess.run(
        [sys.executable, "-c", _KILLED_WRITER, str(file)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    # No checkpoint ran between the commits: everything committed is still in the log.
    assert int(child.stdout.strip()) > DEFAULT_THRESHOLD
    with Snapshot.open(file) as snapshot:  # replays the log
        acknowledged = snapshot.acknowledged(Entity.RESERVATION)
        assert len(acknowledged) == COMMITS * PER_COMMIT
        last = acknowledged.set_index("record_id").loc[f"R{COMMITS - 1}-{PER_COMMIT - 1}"]
        assert last["payload"].startswith(f'{{"id":"R{COMMITS - 1}-{PER_COMMIT - 1}"')
    # Closed, the snapshot folds the log into its file.
    wal = Path(f"{file}.wal")
    assert not wal.exists() or wal.stat().st_size < DEFAULT_THRESHOLD
    with Snapshot.open(file, read_only=True) as snapshot:
        assert len(snapshot.acknowledged(Entity.RESERVATION)) == COMMITS * PER_COMMIT

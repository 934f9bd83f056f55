"""One timed stage in this process: ``python -m bench.stage NAME JSON_ARGS``.

Prints one JSON line: the stage's own figures plus ``peak_rss_mb``, this process's peak
resident memory (``resource.getrusage``), which is why each stage gets a fresh process.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

CONCURRENCY = 16  # pms-sync's default (connector.settings); the raw generator uses the same


def _settings(base_url: str, snapshot: str, full_read: bool = False) -> Any:
    from connector.settings import load_settings

    return load_settings(
        base_url=base_url, snapshot=snapshot, token="demo-token", full_read=full_read, env={}
    )


def stage_map(mapping: str) -> dict[str, Any]:
    """Extract + map + validate: the mapping engine's records, ready for the diff."""
    from connector.pipeline import load_batches

    started = time.perf_counter()
    batches, _ = load_batches(mapping)
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "records": sum(len(batch.records) for batch in batches.values()),
        "quarantined": sum(len(batch.quarantine) for batch in batches.values()),
    }


def stage_diff(
    mapping: str, snapshot: str, accounts: list[str] | None = None, full_read: bool = False
) -> dict[str, Any]:
    """Extract + map + validate + diff against a full snapshot (nothing sent); ``accounts``:
    a run of these accounts only (``--account``); ``full_read``: ``--full-read``."""
    from connector.pipeline import plan_sync

    started = time.perf_counter()
    cpu = time.process_time()
    settings = _settings("http://127.0.0.1:9", snapshot, full_read)
    plan = plan_sync(mapping, settings, accounts=accounts)
    return {
        "seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - cpu,
        "counts": plan.counts,
        "reads": [read.to_json_dict() for read in plan.reads],
        "rows_read": sum(read.rows for read in plan.reads),
    }


def stage_cursor(mapping: str, snapshot: str, value: str) -> dict[str, Any]:
    """Keep ``value`` as the cursor of the mapping's inputs with one, as a settled full read
    of the export would have: the snapshot a nightly incremental run starts from."""
    from datetime import UTC, datetime

    from connector.contract import Entity
    from connector.cursors import CursorKind, CursorValue
    from connector.mapping import load_mapping
    from connector.mapping.model import SqlInput
    from connector.pipeline._incremental import read_scope
    from connector.snapshot import Snapshot, StoredCursor

    loaded = load_mapping(mapping)
    now = datetime.now(UTC).replace(tzinfo=None)
    kept = []
    for name, spec in loaded.inputs.items():
        if isinstance(spec, SqlInput) and spec.cursor_column is not None:
            readers = [e for e, entity in loaded.entities.items() if entity.input == name]
            scope = read_scope([Entity(e) for e in readers], None, None)
            kept.append(StoredCursor(name, scope, CursorValue(value, CursorKind.TEXT), now, now))
    with Snapshot.open(snapshot) as store:
        store.save_source_cursors(loaded.name, kept)
    return {"cursors": len(kept)}


def stage_sync(mapping: str, snapshot: str, base_url: str) -> dict[str, Any]:
    """A whole run, end to end: map, diff, push, record."""
    from connector.pipeline import run_sync

    started = time.perf_counter()
    report = run_sync(mapping, _settings(base_url, snapshot))
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "requests": report.requests,
        "push_seconds": report.push.duration_s,
        "counts": report.counts,
        "status": report.status,
    }


def stage_seed(mapping: str, snapshot: str) -> dict[str, Any]:
    """A first run without HTTP: map, diff and record every change as if acknowledged.

    Used above the size whose first run is pushed for real, to get the full snapshot the later
    scenarios start from; its time is everything of a first run except the requests.
    """
    from datetime import UTC, datetime

    from connector.pipeline import keep_fingerprints, load_batches
    from connector.plan import build_plan
    from connector.push._push import _CHANGES_AT_ONCE
    from connector.push._recorder import acknowledged_rows, recorded_columns
    from connector.snapshot import Snapshot

    started = time.perf_counter()
    batches, policy = load_batches(mapping, snapshot_path=snapshot)
    with Snapshot.open(snapshot) as store:
        plan = build_plan(store, batches, policy=policy)
        now = datetime.now(UTC).replace(tzinfo=None)
        # As a pushed first run records them (with the connection: later runs adopt nothing),
        # a slice of the plan at a time as the push's writer does.
        recorded = recorded_columns(plan.changes)
        for start in range(0, len(plan.changes), _CHANGES_AT_ONCE):
            rows = range(start, min(start + _CHANGES_AT_ONCE, len(plan.changes)))
            store.record_acknowledgements(
                acknowledged_rows(
                    recorded, rows, [now] * len(rows), [None] * len(rows), plan.connection
                )
            )
        keep_fingerprints(store, batches, plan.connection)
    return {"seconds": time.perf_counter() - started, "records": len(plan.changes)}


def stage_raw(mapping: str, base_url: str, limit: int | None = None) -> dict[str, Any]:
    """The ceiling: the same payloads posted by a raw aiohttp load generator (post time only)."""
    from bench.peers import raw_post
    from connector.client._client import _envelope
    from connector.client._config import TokenPlacement
    from connector.contract import SYNC_PATHS, SyncEvent
    from connector.pipeline import load_batches

    batches, _ = load_batches(mapping)
    bodies = [
        (
            SYNC_PATHS[entity],
            _envelope(
                entity,
                account,
                SyncEvent.CREATE,
                payload,
                "demo-token",
                frozenset({TokenPlacement.WISHBOX_HEADER}),
            ),
        )
        for entity, batch in batches.items()
        for account, payload in zip(
            batch.records["account_id"], batch.records["payload"], strict=True
        )
    ]
    return raw_post(base_url, bodies[:limit], CONCURRENCY)


def stage_naive(data: str, base_url: str, limit: int | None = None) -> dict[str, Any]:
    from bench.peers import naive_sync

    return naive_sync(Path(data), base_url, limit)


def stage_dlt(
    data: str, base_url: str, pipelines_dir: str, limit: int | None = None
) -> dict[str, Any]:
    from bench.peers import dlt_sync

    return dlt_sync(Path(data), base_url, Path(pipelines_dir), limit)


STAGES = {
    "map": stage_map,
    "diff": stage_diff,
    "sync": stage_sync,
    "seed": stage_seed,
    "cursor": stage_cursor,
    "raw": stage_raw,
    "naive": stage_naive,
    "dlt": stage_dlt,
}


def main() -> None:
    name, arguments = sys.argv[1], json.loads(sys.argv[2])
    result = STAGES[name](**arguments)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

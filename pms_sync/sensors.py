"""Drop-folder sensors: a sync starts when a new or changed export file lands.

The cursor remembers each file's name, size and modification time, so an unchanged file never
starts a run twice, and a file rewritten in place (same name) starts one.
"""

import hashlib
import json
from pathlib import Path

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

from pms_sync.connections import Connection
from pms_sync.partitions import nightly_tags

Signature = tuple[int, int]  # size in bytes, modification time in nanoseconds
_IGNORED_SUFFIXES = (".tmp", ".part", ".partial", ".crdownload")


def scan(folder: Path) -> dict[str, Signature]:
    """Export files directly in the folder; hidden files and partial uploads are not exports."""
    if not folder.is_dir():
        return {}
    files: dict[str, Signature] = {}
    for path in sorted(folder.iterdir()):
        if not path.is_file() or path.name.startswith(".") or path.suffix in _IGNORED_SUFFIXES:
            continue
        stat = path.stat()
        files[path.name] = (stat.st_size, stat.st_mtime_ns)
    return files


def read_cursor(cursor: str | None) -> dict[str, Signature]:
    if not cursor:
        return {}
    return {name: (int(size), int(mtime)) for name, (size, mtime) in json.loads(cursor).items()}


def changed_files(seen: dict[str, Signature], now: dict[str, Signature]) -> dict[str, Signature]:
    return {name: signature for name, signature in now.items() if seen.get(name) != signature}


def build_sensor(
    connection: Connection,
    job: UnresolvedAssetJobDefinition,
    partitions: dg.MonthlyPartitionsDefinition | None,
) -> dg.SensorDefinition | None:
    folder = connection.drop_folder()
    if folder is None:
        return None

    @dg.sensor(
        name=f"{connection.name}_drop_folder",
        job=job,
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Starts a sync of {connection.mapping.name} when an export lands in {folder}.",
    )
    def drop_folder(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        now = scan(folder)
        changed = changed_files(read_cursor(context.cursor), now)
        if not changed:
            return dg.SkipReason(f"no new or changed file in {folder}")
        names = ", ".join(sorted(changed))
        context.log.info(f"new or changed exports: {names}")
        # The run key is the set of changes, so a re-evaluated tick never launches it twice.
        digest = hashlib.sha256(json.dumps(changed, sort_keys=True).encode()).hexdigest()[:16]
        return dg.SensorResult(
            run_requests=[
                dg.RunRequest(
                    run_key=f"{connection.name}:{digest}",
                    tags={
                        **nightly_tags(partitions),
                        "pms_sync/trigger": "drop_folder",
                        "pms_sync/files": names[:200],
                    },
                )
            ],
            cursor=json.dumps(now, sort_keys=True),
        )

    return drop_folder

"""Drop-folder sensors: a sync starts when a new or changed export file lands, and reads it.

The cursor remembers each file's name, size and modification time, so an unchanged file never
starts a run twice, and a file rewritten in place (same name) starts one. A landed file is the
run's input: it feeds the mapping input whose file name pattern it matches (``bookings*.csv``
for an input ``path: data/bookings*.csv``), through the run config of the mapped assets
(``ops.<name>__mapped_<entity>.config.files``). After the run succeeded, a second sensor moves
its files to ``<drop folder>/archive/<run id>/``; a failed run's files stay where they landed,
so the run can be re-executed from the UI with the same config.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

from connector.contract import Entity
from pms_sync.account_partitions import no_accounts_yet, rectangle_tags, registered_accounts
from pms_sync.assets import connection_keys
from pms_sync.connections import Connection
from pms_sync.exports import entity_inputs
from pms_sync.partitions import current_range, nightly_tags

Signature = tuple[int, int]  # size in bytes, modification time in nanoseconds
_IGNORED_SUFFIXES = (".tmp", ".part", ".partial", ".crdownload")
ARCHIVE_FOLDER = "archive"
TRIGGER_TAG = "pms_sync/trigger"


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


def input_for(connection: Connection, file_name: str) -> str | None:
    """The file input whose file name pattern the landed file matches (first in mapping order)."""
    for name, source in connection.mapping.inputs.items():
        pattern = getattr(source, "path", None)
        if pattern and fnmatch.fnmatch(file_name, Path(pattern).name):
            return name
    return None


def landed_inputs(
    connection: Connection, folder: Path, changed: dict[str, Signature]
) -> tuple[dict[str, Path], list[str], list[str]]:
    """Per input, the newest changed file that matches it; the files that match no input; and
    older files of an input that a newer one of the same tick supersedes."""
    chosen: dict[str, tuple[int, str]] = {}
    unmatched: list[str] = []
    superseded: list[str] = []
    for name, (_size, mtime) in sorted(changed.items()):
        target = input_for(connection, name)
        if target is None:
            unmatched.append(name)
            continue
        previous = chosen.get(target)
        if previous is None or mtime >= previous[0]:
            if previous is not None:
                superseded.append(previous[1])
            chosen[target] = (mtime, name)
        else:
            superseded.append(name)
    return {target: folder / name for target, (_, name) in chosen.items()}, unmatched, superseded


def run_config_for(connection: Connection, files: dict[str, Path]) -> dg.RunConfig:
    """The mapped assets' config that makes them read ``files`` (input name → landed file)."""
    keys = connection_keys(connection.asset_key())
    assets = {
        Entity.ACCOMMODATION: keys.mapped_accommodations,
        Entity.RESERVATION: keys.mapped_reservations,
    }
    ops: dict[str, Any] = {}
    for entity, key in assets.items():
        if entity not in connection.mapping.entities:
            continue
        inputs = set(entity_inputs(connection, entity))
        chosen = {name: str(path) for name, path in files.items() if name in inputs}
        if chosen:
            ops[key.to_python_identifier()] = {"config": {"files": chosen}}
    return dg.RunConfig(ops=ops)


def files_of_run(run_config: dict[str, Any]) -> list[Path]:
    """The landed files a run read (its mapped assets' ``files`` config)."""
    found: list[Path] = []
    for op in (run_config.get("ops") or {}).values():
        for path in ((op or {}).get("config") or {}).get("files", {}).values():
            if Path(path) not in found:
                found.append(Path(path))
    return found


def archive(folder: Path, run_id: str, files: list[Path]) -> list[Path]:
    """Move the run's files that are still in ``folder`` to ``folder/archive/<run_id>/``."""
    target = folder / ARCHIVE_FOLDER / run_id
    moved: list[Path] = []
    for path in files:
        if path.parent.resolve() != folder.resolve() or not path.exists():
            continue  # not a landed file of this folder, or archived already
        target.mkdir(parents=True, exist_ok=True)
        moved.append(Path(shutil.move(str(path), str(target / path.name))))
    return moved


def build_sensors(
    connection: Connection,
    job: UnresolvedAssetJobDefinition,
    partitions: dg.MonthlyPartitionsDefinition | None,
) -> list[dg.SensorDefinition]:
    """The drop-folder sensor and its archiving sensor; none without a drop folder."""
    folder = connection.drop_folder()
    if folder is None:
        return []
    return [
        _drop_folder_sensor(connection, job, partitions, folder),
        _archive_sensor(connection, job, folder),
    ]


def _drop_folder_sensor(
    connection: Connection,
    job: UnresolvedAssetJobDefinition,
    partitions: dg.MonthlyPartitionsDefinition | None,
    folder: Path,
) -> dg.SensorDefinition:
    @dg.sensor(
        name=f"{connection.name}_drop_folder",
        job=job,
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            f"Starts a sync of {connection.mapping.name} when an export lands in {folder}; the "
            "run reads the landed file for the input whose file name it matches."
        ),
    )
    def drop_folder(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        now = scan(folder)
        changed = changed_files(read_cursor(context.cursor), now)
        if not changed:
            return dg.SkipReason(f"no new or changed file in {folder}")
        files, unmatched, superseded = landed_inputs(connection, folder, changed)
        for name in unmatched:
            context.log.warning(f"{name} matches no file input of {connection.path.name}: not read")
        for name in superseded:
            context.log.warning(f"{name}: a newer file for the same input landed; not read")
        cursor = json.dumps(now, sort_keys=True)
        if not files:
            return dg.SensorResult(skip_reason="no landed file matches an input", cursor=cursor)
        window = drop_folder_window(context, connection, partitions)
        if window is None:  # the cursor stays: the file is read once accounts are known
            return no_accounts_yet(connection)
        names = ", ".join(sorted(path.name for path in files.values()))
        context.log.info(f"new or changed exports: {names}")
        # The run key is the set of changes, so a re-evaluated tick never launches it twice.
        digest = hashlib.sha256(json.dumps(changed, sort_keys=True).encode()).hexdigest()[:16]
        return dg.SensorResult(
            run_requests=[
                dg.RunRequest(
                    run_key=f"{connection.name}:{digest}",
                    run_config=run_config_for(connection, files),
                    tags={
                        **window,
                        TRIGGER_TAG: "drop_folder",
                        "pms_sync/files": names[:200],
                    },
                )
            ],
            cursor=cursor,
        )

    return drop_folder


def drop_folder_window(
    context: dg.SensorEvaluationContext,
    connection: Connection,
    partitions: dg.MonthlyPartitionsDefinition | None,
) -> dict[str, str] | None:
    """The nightly window of a drop-folder run: one run of every account (a landed export is
    read once), the accounts registered so far when the connection is partitioned by account
    (None: none yet)."""
    if partitions is None or not connection.partitioned_by_account:
        return nightly_tags(partitions)
    # The instance only now: a sensor tested without one still evaluates monthly windows.
    accounts = registered_accounts(context.instance, connection)
    return rectangle_tags(current_range(partitions), accounts) if accounts else None


def _archive_sensor(
    connection: Connection, job: UnresolvedAssetJobDefinition, folder: Path
) -> dg.SensorDefinition:
    @dg.run_status_sensor(
        name=f"{connection.name}_drop_folder_archive",
        run_status=dg.DagsterRunStatus.SUCCESS,
        monitored_jobs=[job],
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            f"Moves the files a successful drop-folder run of {connection.mapping.name} read to "
            f"{folder / ARCHIVE_FOLDER}/<run id>/."
        ),
    )
    def drop_folder_archive(context: dg.RunStatusSensorContext) -> dg.SkipReason | None:
        run = context.dagster_run
        if run.tags.get(TRIGGER_TAG) != "drop_folder":
            return dg.SkipReason(f"run {run.run_id} was not started by the drop folder")
        moved = archive(folder, run.run_id, files_of_run(dict(run.run_config)))
        context.log.info(f"archived {', '.join(p.name for p in moved) or 'nothing'}")
        return None

    return drop_folder_archive

"""``make demo``: the real pipeline end to end through Dagster, against the embedded defaults.

Regenerates the bundled sample exports when they were generated around another month (so the
nightly window holds arrivals), starts the sandbox on 127.0.0.1:8765 as a subprocess when
nothing answers there, runs every connection's job over all its partitions (one run each, in
process) on the persistent Dagster instance that ``make dev`` opens too
(``.pms-sync/dagster_home``), and prints what was sent. A second run prints zero changes
pushed: the snapshot under ``.pms-sync/`` remembers.

    python -m assets.demo
"""

import sys
from collections.abc import Iterable
from datetime import date

import dagster as dg

from assets.local_sandbox import sandbox_if_needed
from assets.project import DAGSTER_HOME, MAPPINGS_DIR, PROJECT_ROOT, prepare_dagster_home
from assets.samples import refresh_stale_samples
from connector.plan import ACTIONS
from connector.push import OUTCOMES
from pms_sync.assets import connection_keys
from pms_sync.component import folder_definitions
from pms_sync.connections import discover, mappings_dir
from pms_sync.jobs import job_name
from pms_sync.partitions import range_tags
from pms_sync.resources import ServiceResource

DEMO_MONTHS_BACK = 6
"""The demo syncs the months from this many back to the last partition: where the samples' stays are."""

_QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def _added_up(materializations: list[dg.AssetMaterialization]) -> dict[str, object]:
    """The counts of every partition of the run added up; texts from the first that has one."""
    total: dict[str, object] = {}
    for materialization in materializations:
        for key, entry in materialization.metadata.items():
            value = entry.value
            if isinstance(value, int) and not key.startswith("run_"):
                total[key] = int(total.get(key, 0)) + value  # type: ignore[call-overload]
            elif value:
                total.setdefault(key, value)
    return total


def _summary(result: dg.ExecuteInProcessResult, name: str) -> tuple[list[str], int]:
    keys = connection_keys(dg.AssetKey([name]))
    lines, pushed = [], 0
    for key in (keys.synced_accommodations, keys.synced_reservations):
        materializations = result.asset_materializations_for_node(key.to_python_identifier())
        if not materializations:
            lines.append(f"  {key.path[-1]:<22} not synced (see the failures below)")
            continue
        metadata = _added_up(materializations)
        actions = " ".join(f"{a}={metadata.get(str(a), 0)}" for a in ACTIONS)
        outcomes = " ".join(f"{o}={metadata.get(str(o), 0)}" for o in OUTCOMES)
        pushed += int(metadata.get("requests", 0))
        held = metadata.get("held", 0)
        lines.append(f"  {key.path[-1]:<22} {actions} held={held} | {outcomes}")
        reasons = str(metadata.get("dead_letter_top_reasons", "")).splitlines()[2:3]
        lines += [f"  {'':<22} most refused: {reason.strip('| ')}" for reason in reasons]
    return lines, pushed


def failed_check_lines(evaluations: Iterable[dg.AssetCheckEvaluation]) -> list[str]:
    """One line per check and asset that did not pass, however many months it failed in: the
    months, and why (the description of its first failed month)."""
    failed: dict[tuple[str, str], list[dg.AssetCheckEvaluation]] = {}
    for check in evaluations:
        if not check.passed:
            key = (check.check_name, check.asset_key.to_user_string())
            failed.setdefault(key, []).append(check)
    lines = []
    for (name, asset), checks in failed.items():
        months = sorted(check.partition for check in checks if check.partition)
        where = ""
        if len(months) == 1:
            where = f" in {months[0]}"
        elif months:
            where = f" in {len(months)} months ({months[0]} … {months[-1]})"
        why = next((check.description for check in checks if check.description), None)
        lines.append(
            f"  ! check {name} on {asset} did not pass{where}" + (f": {why}" if why else "")
        )
    return lines


def months_back(today: date, months: int) -> str:
    index = today.year * 12 + today.month - 1 - months
    return f"{index // 12:04d}-{index % 12 + 1:02d}"


def project_instance() -> dg.DagsterInstance:
    """The Dagster instance of ``make demo`` and ``make dev``: DAGSTER_HOME under the state
    folder, with the project's instance settings (assets/dagster.yaml)."""
    return dg.DagsterInstance.from_config(str(prepare_dagster_home()))


def main() -> int:
    for sample in refresh_stale_samples(MAPPINGS_DIR):
        print(f"regenerated {sample.manifest.parent} around {sample.anchor:%Y-%m} (was stale)")
    folder = mappings_dir(MAPPINGS_DIR)
    # The code location's Definitions (assets/definitions.py), built after the samples' refresh.
    defs = folder_definitions(folder, PROJECT_ROOT)
    service = defs.resources["service"]
    assert isinstance(service, ServiceResource)
    failed = False
    total = 0
    instance = project_instance()
    with sandbox_if_needed(service.base_url):
        for connection in discover(folder):
            job = defs.resolve_job_def(job_name(connection))
            partitions = job.partitions_def
            assert partitions is not None
            keys = partitions.get_partition_keys()
            # The samples' stays start at most DEMO_MONTHS_BACK months back: the months before
            # hold none, and each month is its own materialization and check results.
            first = max(keys[0], months_back(date.today(), DEMO_MONTHS_BACK))
            everything = dg.PartitionKeyRange(first, keys[-1])
            result = job.execute_in_process(
                instance=instance,
                tags=range_tags(everything),
                run_config=_QUIET,
                raise_on_error=False,
            )
            lines, pushed = _summary(result, connection.name)
            total += pushed
            print(
                f"{connection.name} ({connection.path}): "
                f"{'ok' if result.success else 'FAILED'}, {pushed} requests"
            )
            print("\n".join(lines))
            for event in result.all_events:
                if event.event_type_value == "STEP_FAILURE":
                    failed = True
                    print(
                        f"  ! {event.step_key}: {event.event_specific_data.error.message.strip()}"
                    )
            evaluations = [
                event.event_specific_data
                for event in result.all_events
                if isinstance(event.event_specific_data, dg.AssetCheckEvaluation)
            ]
            print("\n".join(failed_check_lines(evaluations)))
    quiet = total == 0 and not failed
    print(f"requests sent: {total}" + (" (nothing changed since the last run)" if quiet else ""))
    print(f"the runs are in {DAGSTER_HOME}: `make dev` shows them on http://127.0.0.1:3000")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""Dagster's own floor for a run that shows what a connection's nightly run shows (issue 38).

    python -m bench.dagster_floor --months 34 --assets 5 --materializations 71 --checks 313
        [--storage postgres] [--rounds 3] [--out FILE]

A job of ``--assets`` assets partitioned by month does no work: over a range run of
``--months`` months it writes ``--materializations`` per-month materializations and
``--checks`` per-month check evaluations, the events the UI shows for a pms-sync run (Dagster
adds a planned event per asset and month). It runs in a fresh process on an instance of the
chosen storage, so its CPU is what importing Dagster and writing those events costs, with
nothing mapped, diffed or sent: a lower bound for any run that keeps the per-month view.
``bench.dagster_cost`` runs it with the event counts of the run it measured.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from bench.dagster_deployment import instance_storage


@dataclass(frozen=True)
class EventCounts:
    """The events of one run that the floor writes again."""

    months: int
    assets: int
    materializations: int
    checks: int


def counts_of_run(home: Path, run_id: str) -> EventCounts:
    """What a finished run of a deployment wrote: its months, assets and per-month events."""
    kinds: Counter[str] = Counter()
    months: set[str] = set()
    assets: set[str] = set()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        records = instance.all_logs(run_id)
    for record in records:
        event = record.dagster_event
        if event is None:
            continue
        kinds[event.event_type_value] += 1
        if event.event_type_value == "ASSET_MATERIALIZATION_PLANNED":
            assets.add(event.asset_key.to_user_string() if event.asset_key else "")
            if event.partition:
                months.add(event.partition)
    return EventCounts(
        months=max(len(months), 1),
        assets=max(len(assets), 1),
        materializations=kinds["ASSET_MATERIALIZATION"],
        checks=kinds["ASSET_CHECK_EVALUATION"],
    )


def _spread(total: int, slots: int) -> list[int]:
    return [total // slots + (1 if slot < total % slots else 0) for slot in range(slots)]


def _floor_job(counts: EventCounts) -> dict[str, float]:
    """Run in the child process: define the job, run it over every month, report CPU."""
    imported = time.process_time()
    start = dg.MonthlyPartitionsDefinition(start_date="2000-01-01").get_partition_keys()
    months = start[: counts.months]
    partitions = dg.StaticPartitionsDefinition(months)
    slots = counts.assets * counts.months
    materializations = iter(_spread(counts.materializations, slots))
    checks = iter(_spread(counts.checks, slots))
    plan = {
        (asset, month): (next(materializations), next(checks))
        for asset in range(counts.assets)
        for month in months
    }
    most_checks = max((per_month for _, per_month in plan.values()), default=0)

    def floor_asset(asset: int, upstream: dg.AssetKey | None) -> dg.AssetsDefinition:
        key = dg.AssetKey(f"floor_{asset}")
        names = [f"check_{number}" for number in range(most_checks)]

        @dg.asset(
            key=key,
            deps=[upstream] if upstream else [],
            partitions_def=partitions,
            backfill_policy=dg.BackfillPolicy.single_run(),
            check_specs=[dg.AssetCheckSpec(name, asset=key) for name in names],
        )
        def floor(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
            for month in context.partition_keys:
                written, evaluated = plan[(asset, month)]
                for _ in range(written):
                    context.log_event(
                        dg.AssetMaterialization(key, partition=month, metadata={"records": 1})
                    )
                for name in names[:evaluated]:
                    context.log_event(
                        dg.AssetCheckEvaluation(
                            asset_key=key,
                            check_name=name,
                            passed=True,
                            metadata={"records": 1},
                            partition=month,
                        )
                    )
            return dg.MaterializeResult(
                check_results=[dg.AssetCheckResult(check_name=name, passed=True) for name in names]
            )

        return floor

    assets: list[dg.AssetsDefinition] = []
    for asset in range(counts.assets):
        assets.append(floor_asset(asset, assets[-1].key if assets else None))
    instance = dg.DagsterInstance.get()
    result = dg.materialize(
        assets,
        instance=instance,
        tags={
            "dagster/asset_partition_range_start": months[0],
            "dagster/asset_partition_range_end": months[-1],
        },
    )
    if not result.success:
        raise RuntimeError("the floor run failed")
    return {"import_cpu_seconds": imported, "events": len(instance.all_logs(result.run_id))}


def floor_run(counts: EventCounts, storage_section: str) -> dict[str, Any]:
    """One floor run in a fresh process on a fresh instance: its CPU and wall."""
    with tempfile.TemporaryDirectory(prefix="pms-dagster-floor-") as home:
        Path(home, "dagster.yaml").write_text(storage_section, encoding="utf-8")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "bench.dagster_floor", "--child", json.dumps(asdict(counts))],
            env={**os.environ, "DAGSTER_HOME": home},
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"the floor run failed: {done.stderr[-3000:]}")
    child = json.loads(done.stdout.strip().splitlines()[-1])
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return {"cpu_seconds": cpu, "wall_seconds": wall, **child}


def measure(counts: EventCounts, storage: str, rounds: int) -> dict[str, Any]:
    with instance_storage(storage) as section:
        runs = [floor_run(counts, section) for _ in range(rounds)]
    return {
        "counts": asdict(counts),
        "storage": storage,
        "runs": runs,
        "median_cpu_seconds": round(statistics.median(r["cpu_seconds"] for r in runs), 2),
        "median_wall_seconds": round(statistics.median(r["wall_seconds"] for r in runs), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dagster_floor", description=__doc__)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--months", type=int, default=34)
    parser.add_argument("--assets", type=int, default=5)
    parser.add_argument("--materializations", type=int, default=71)
    parser.add_argument("--checks", type=int, default=313)
    parser.add_argument("--storage", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="results JSON")
    arguments = parser.parse_args()
    if arguments.child is not None:
        print(json.dumps(_floor_job(EventCounts(**json.loads(arguments.child)))))
        return
    counts = EventCounts(
        arguments.months, arguments.assets, arguments.materializations, arguments.checks
    )
    text = json.dumps(measure(counts, arguments.storage, arguments.rounds), indent=2)
    if arguments.out:
        arguments.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()

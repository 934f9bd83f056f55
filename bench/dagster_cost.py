"""What a nightly run costs through Dagster against the same run from the CLI (issue 38).

    python -m bench.dagster_cost --size 10000 --pairs 3 [--before TREE] [--event-batch-size N]
        [--storage postgres] [--out FILE]

The hotel benchmark export as one connection (partitions from its first month of check-in),
synced once from the CLI, then a nightly run with nothing changed, in interleaved pairs:
``pms-sync sync`` in a process of its own, and the connection's job as a deployment runs it
(``bench.dagster_deployment``: a daemon dequeues the run, the default run launcher starts it,
the job's own executor runs its steps), over every month of the export. With ``--before``, the
same Dagster run from another checkout (e.g. ``git worktree add --detach /tmp/before REV``)
is a third member of each round, so a before/after ratio comes from one run of the bench.
With ``--event-batch-size``, a deployment of this tree whose processes write Dagster's
batchable events (per-partition materializations, planned events) in batches of N
(``DAGSTER_EVENT_BATCH_SIZE``; a PostgreSQL instance writes a batch in one statement) is
another member.

Each deployment stays up for every round and is warm (one run done first, not measured), as a
deployment's daemon and code server are. CPU of a Dagster run is that of the processes the run
started (its run process and any step processes, sampled from /proc); the daemon's and the code
server's own work meanwhile is reported apart. Wall is the run's own start to end, and from its
creation (queue and launch included).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from bench.dagster_deployment import (
    ROOT,
    Deployment,
    boot_ticks,
    dagster_deployment,
    instance_storage,
)
from bench.dagster_floor import counts_of_run
from bench.dagster_floor import measure as dagster_floor
from bench.data import Dataset, prepare
from bench.harness import FULL_PUSH_MAX, run_stage

PMS_SYNC = Path(sys.executable).with_name("pms-sync")
TOKEN = "demo-token"  # the sandbox's default account


def connection_folder(dataset: Dataset, work: Path) -> Path:
    """A mappings folder with the export as connection ``hotel``, partitioned by month from
    its first check-in: the folder the code location reads (``PMS_SYNC_MAPPINGS_DIR``)."""
    folder = work / "mappings"
    connection = folder / "hotel"
    connection.mkdir(parents=True)
    (connection / "data").symlink_to(dataset.base / "data")
    with (dataset.base / "data" / "bookings.csv").open(encoding="utf-8") as bookings:
        header = bookings.readline().rstrip("\n").split(",")
        arrival = header.index("arrival")
        first = min(line.split(",")[arrival][:7] for line in bookings)
    text = (dataset.mapping).read_text(encoding="utf-8")
    text += f"\ndagster:\n  partitions_start: '{first}'\n"
    (connection / "mapping.yaml").write_text(text, encoding="utf-8")
    return folder


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cli_run(mapping: Path, env: dict[str, str]) -> dict[str, Any]:
    """``pms-sync sync MAPPING --json`` in a fresh process: its CPU, wall and requests."""
    cpu, started = _children_cpu(), time.perf_counter()
    done = subprocess.run(
        [str(PMS_SYNC), "sync", str(mapping), "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall, cpu = time.perf_counter() - started, _children_cpu() - cpu
    if done.returncode != 0:
        raise RuntimeError(f"pms-sync sync failed ({done.returncode}): {done.stderr[-3000:]}")
    return {
        "cpu_seconds": cpu,
        "wall_seconds": wall,
        "requests": json.loads(done.stdout)["requests"],
    }


def full_range(folder: Path) -> dict[str, str]:
    """The tags of a run over every month of the connection's partitions."""
    from pms_sync.connections import load_connection
    from pms_sync.partitions import full_range_tags, reservation_partitions

    connection = load_connection(folder / "hotel" / "mapping.yaml")
    months = reservation_partitions(connection.dagster.partitions_start, "UTC")
    return {**full_range_tags(months), "pms_sync/trigger": "nightly"}


# psycopg2 named explicitly: SQLAlchemy's default PostgreSQL driver is psycopg 3, whose
# parameters Dagster's NOTIFY statement does not take.
@contextmanager
def deployment_of(
    tree: Path, folder: Path, env: dict[str, str], work: Path, storage: str
) -> Iterator[Deployment]:
    """A deployment serving ``tree``'s code location, warm: one run done (its code server
    loaded, its storage written once) before any is measured."""
    dagster_env = {**env, "PMS_SYNC_MAPPINGS_DIR": str(folder)}
    with (
        instance_storage(storage) as section,
        dagster_deployment(work, dagster_env, 1, tree, section) as deployment,
    ):
        dagster_run(deployment, folder)
        yield deployment


def dagster_run(deployment: Deployment, folder: Path) -> dict[str, Any]:
    """One run of ``hotel_sync`` over every month, as the daemon launches it."""
    deployment_cpu = deployment.cpu.total()
    since = boot_ticks()
    run_ids = deployment.submit("hotel_sync", [full_range(folder)], accounts="")
    (run,) = deployment.wait_for(run_ids, timeout=3600)
    run_cpu = deployment.cpu.started_since(since)
    processes = deployment.cpu.breakdown_since(since)
    deployment_cpu = deployment.cpu.total() - deployment_cpu - run_cpu
    if run["status"] != "SUCCESS":
        raise RuntimeError(f"the Dagster run failed: see {deployment.home}")
    return {
        "cpu_seconds": run_cpu,
        "wall_seconds": run["ended"] - run["started"],
        "run_id": run["run_id"],
        "created_to_end_seconds": run["ended"] - run["created"],
        "daemon_cpu_seconds": deployment_cpu,
        "processes": processes,
    }


def measure(
    size: int,
    pairs: int,
    before: Path | None,
    work: Path,
    sandbox: Any,
    storage: str,
    event_batch_size: int | None = None,
) -> dict[str, Any]:
    dataset = prepare(size)
    folder = connection_folder(dataset, work)
    mapping = folder / "hotel" / "mapping.yaml"
    env = {
        **os.environ,
        "PMS_SYNC_BASE_URL": sandbox.base_url,
        "PMS_SYNC_TOKEN": TOKEN,
        "PMS_SYNC_SNAPSHOT": str(work / "snapshot.duckdb"),
        "PYTHONHASHSEED": "0",
    }
    if size <= FULL_PUSH_MAX:
        first = cli_run(mapping, env)
    else:  # as make bench does above this size: the snapshot seeded, nothing pushed
        first = run_stage("seed", mapping=str(mapping), snapshot=env["PMS_SYNC_SNAPSHOT"])
    print(f"[dagster-cost] first sync {first}", file=sys.stderr, flush=True)
    sides: dict[str, tuple[Path, dict[str, str]]] = {"dagster": (ROOT, env)}
    if before is not None:
        sides["dagster_before"] = (before, env)
    if event_batch_size is not None:
        batched = {**env, "DAGSTER_EVENT_BATCH_SIZE": str(event_batch_size)}
        sides["dagster_batched"] = (ROOT, batched)
    rounds: list[dict[str, dict[str, Any]]] = []
    with ExitStack() as stack:
        deployments = {
            side: stack.enter_context(deployment_of(tree, folder, side_env, work, storage))
            for side, (tree, side_env) in sides.items()
        }
        for number in range(1, pairs + 1):
            measured = {"cli": cli_run(mapping, env)}
            for side, deployment in deployments.items():
                measured[side] = dagster_run(deployment, folder)
            for side, figures in measured.items():
                print(
                    f"[dagster-cost] round {number} {side} {json.dumps(figures)} "
                    f"(load {os.getloadavg()[0]:.2f})",
                    file=sys.stderr,
                    flush=True,
                )
            if measured["cli"]["requests"] != 0:
                raise RuntimeError("the nightly run sent requests: the export changed")
            rounds.append(measured)
        counts = counts_of_run(deployments["dagster"].home, rounds[-1]["dagster"]["run_id"])
    floor = dagster_floor(counts, storage, pairs)
    cli_cpu = statistics.median(r["cli"]["cpu_seconds"] for r in rounds)
    floor["floor_vs_cli_cpu"] = round(floor["median_cpu_seconds"] / cli_cpu, 2)
    print(f"[dagster-cost] floor {json.dumps(floor)}", file=sys.stderr, flush=True)
    return {
        "size": size,
        "storage": storage,
        "event_batch_size": event_batch_size,
        "first_sync": first,
        "rounds": rounds,
        "ratios": ratios(rounds),
        "floor": floor,
    }


def ratios(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, float]]:
    """Per figure, the median over rounds of each side's value divided by the baseline's in
    the same round (the CLI for ``dagster``; the before tree for ``after_vs_before``)."""
    pairs = {
        "dagster_vs_cli": ("dagster", "cli"),
        "after_vs_before": ("dagster", "dagster_before"),
        "batched_vs_cli": ("dagster_batched", "cli"),
        "batched_vs_unbatched": ("dagster_batched", "dagster"),
    }
    found: dict[str, dict[str, float]] = {}
    for name, (side, baseline) in pairs.items():
        if side not in rounds[0] or baseline not in rounds[0]:
            continue
        found[name] = {
            figure: round(
                statistics.median(r[side][figure] / r[baseline][figure] for r in rounds), 2
            )
            for figure in ("cpu_seconds", "wall_seconds")
        }
    found["medians"] = {
        f"{side}_{figure}": round(statistics.median(r[side][figure] for r in rounds), 2)
        for side in rounds[0]
        for figure in ("cpu_seconds", "wall_seconds")
    }
    return found


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dagster_cost", description=__doc__)
    parser.add_argument("--size", type=int, default=10_000, help="reservations")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--before", type=Path, default=None, help="a checkout to compare with")
    parser.add_argument(
        "--storage",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="the Dagster instance's storage (postgres: a new database on 127.0.0.1:5432)",
    )
    parser.add_argument(
        "--event-batch-size",
        type=int,
        default=None,
        help="also measure a deployment with DAGSTER_EVENT_BATCH_SIZE set to this",
    )
    parser.add_argument("--out", type=Path, default=None, help="results JSON")
    arguments = parser.parse_args()
    from connector.sandbox.testing import sandbox_process

    with tempfile.TemporaryDirectory(prefix="pms-dagster-cost-", ignore_cleanup_errors=True) as tmp:
        work = Path(tmp)
        with sandbox_process(work / "sandbox") as sandbox:
            result = measure(
                arguments.size,
                arguments.pairs,
                arguments.before,
                work,
                sandbox,
                arguments.storage,
                arguments.event_batch_size,
            )
        shutil.rmtree(work / "mappings", ignore_errors=True)
    text = json.dumps(result, indent=2)
    if arguments.out:
        arguments.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()

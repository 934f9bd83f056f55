"""Scale-out: 8 accounts x 10,000 reservations into a fresh sandbox, on a PostgreSQL snapshot,
synced one account after another, then with 4 runs at once (``python -m bench.scale_out``).

The primary modes run Dagster as a deployment does (``--runner dagster``, the default): one
connection ``hotel`` whose reservations are partitioned by account and month
(``partition_by_account``), its export holding the 8 hotels (codes ``H01``… mapped to accounts
``acc-01``… by the mapping's lookup); one run per account over all its months, as the nightly
schedule fans out (``pms_sync.account_partitions.per_account_requests``), queued in a fresh
instance whose ``QueuedRunCoordinator`` allows 1 (sequential) or 4 (concurrent) runs at once,
dequeued by ``dagster-daemon``, each run in its own process with its steps in that process
(the job's in-process executor), the instance's storage on PostgreSQL unless
``--instance-storage sqlite`` (``bench/dagster_deployment.py``). Wall time is from the first
run's creation to the last run's end; CPU is every process of the daemon's session (daemon,
code servers, runs).

The secondary modes (``--runner cli``) are the earlier measurement: each account is one
connection (a copy of the hotel mapping named ``hotel-acc-NN``, its Berlin hotel's export
sent to account ``acc-NN``), so the runs lock different scopes and proceed together
(connector/snapshot/_locks.py). One connection per account rather than one connection run per
account: the mass-change guard compares a run with the connection's last one, so a run of only
one of its accounts would read the others as gone (docs/decisions.md). The
concurrent runs are 4 ``pms-sync sync`` processes at a time: what 4 Dagster runs at once do,
without Dagster's own start-up and event writes (BENCHMARKS.md says which was measured).

Reported per mode: wall time, requests and requests/s, CPU seconds of the sync processes and
of the sandbox, and correctness: every record in the service exactly once (lost 0,
duplicates 0: each record written once). A no-change pass gives the nightly per-account cost.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench.dagster_deployment import dagster_deployment, instance_storage
from bench.data import BENCH_ANCHOR, HOTEL, ROOT, SEED, _generator

PMS_SYNC = Path(sys.executable).with_name("pms-sync")
POSTGRES_URL = os.environ.get("BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
HOTEL_CODE = "BER"


def account_export(folder: Path, reservations: int) -> Path:
    """The hotel example's Berlin export with ``reservations`` reservations (all its rooms)."""
    done = folder / ".complete"
    if done.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    raw = folder / "raw"
    # Twice as many (two hotels) and a margin: the generator picks a hotel per reservation.
    _generator().write(raw, reservations * 2 + 2000, 80, SEED, skew=True, anchor=BENCH_ANCHOR)
    data = folder / "data"
    data.mkdir(parents=True)
    shutil.copy(raw / "room_types.csv", data / "room_types.csv")
    _keep_rows(raw / "rooms.csv", data / "rooms.csv", lambda row, _: True)
    kept: set[str] = set()

    def first_bookings(row: dict[str, str], _: int) -> bool:
        if row["booking_no"] not in kept and len(kept) < reservations:
            kept.add(row["booking_no"])
        return row["booking_no"] in kept

    _keep_rows(raw / "bookings.csv", data / "bookings.csv", first_bookings)
    shutil.rmtree(raw)
    if len(kept) != reservations:
        raise RuntimeError(f"only {len(kept)} Berlin reservations generated")
    shutil.copy(HOTEL / "mapping.yaml", folder / "mapping.yaml")
    done.write_text("ok\n")
    return folder


def _keep_rows(source: Path, target: Path, keep: Any) -> None:
    with (
        source.open(newline="", encoding="utf-8") as read,
        target.open("w", newline="", encoding="utf-8") as write,
    ):
        reader = csv.DictReader(read)
        writer = csv.DictWriter(write, reader.fieldnames or [], lineterminator="\n")
        writer.writeheader()
        for index, row in enumerate(reader):
            if row["hotel_code"] == HOTEL_CODE and keep(row, index):
                writer.writerow(row)


@contextmanager
def fresh_schema(sizes: dict[str, int]) -> Iterator[str]:
    """A snapshot URL of a new PostgreSQL schema; its size on disk goes to ``sizes["bytes"]``
    before it is dropped."""
    schema = f"pms_sync_bench_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(POSTGRES_URL.replace("postgresql://", "postgresql+psycopg://", 1))
    with admin.begin() as connection:
        connection.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield f"{POSTGRES_URL}?options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as connection:
            sizes["bytes"] = int(
                connection.execute(
                    sa.text(
                        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class "
                        "AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace "
                        "WHERE n.nspname = :schema AND c.relkind = 'r'"
                    ),
                    {"schema": schema},
                ).scalar_one()
            )
            connection.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@contextmanager
def fresh_file(folder: Path, sizes: dict[str, int]) -> Iterator[str]:
    """A new DuckDB snapshot file (the default backend, for comparison)."""
    path = folder / f"snapshot-{uuid.uuid4().hex[:6]}.duckdb"
    yield str(path)
    sizes["bytes"] = path.stat().st_size


def sandbox_config(accounts: list[str]) -> Any:
    from connector.sandbox.config import AccountConfig, SandboxConfig

    return SandboxConfig(
        accounts=[
            AccountConfig(id=a, name=f"Hotel {a}", externalId=a, sync_tokens=[f"{a}-token"])
            for a in accounts
        ]
    )


def _cpu_of(pid: int) -> float:
    """User + system CPU seconds of a running process (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def connection_mapping(export: Path, account: str) -> Path:
    """The hotel mapping as the connection of one account."""
    mapping = export / f"mapping-{account}.yaml"
    text = (export / "mapping.yaml").read_text(encoding="utf-8")
    mapping.write_text(text.replace("name: hotel\n", f"name: hotel-{account}\n", 1))
    return mapping


def sync_all(
    export: Path, accounts: list[str], env: dict[str, str], workers: int
) -> list[dict[str, Any]]:
    def one(account: str) -> dict[str, Any]:
        started = time.perf_counter()
        done = subprocess.run(
            # --wait: on a DuckDB file the runs take turns (one writer per file).
            [
                *(str(PMS_SYNC), "sync", str(connection_mapping(export, account))),
                *("--json", "--wait", "900"),
            ],
            env={**env, "HOTEL_BER_ACCOUNT": account},
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"sync of {account} failed: {done.stdout[-2000:]}{done.stderr}")
        report = json.loads(done.stdout)
        return {
            "account": account,
            "seconds": time.perf_counter() - started,
            "requests": report["requests"],
            "acknowledged": report["outcomes"]["acknowledged"],
        }

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, accounts))


def measure(
    mode: str, export: Path, accounts: list[str], env: dict[str, str], workers: int, sandbox: Any
) -> dict[str, Any]:
    cpu_before, sandbox_before = _children_cpu(), _cpu_of(sandbox.process.pid)
    started = time.perf_counter()
    runs = sync_all(export, accounts, env, workers)
    wall = time.perf_counter() - started
    requests = sum(run["requests"] for run in runs)
    result = {
        "mode": mode,
        "workers": workers,
        "wall_seconds": round(wall, 1),
        "requests": requests,
        "requests_per_second": round(requests / wall, 1),
        "sync_cpu_seconds": round(_children_cpu() - cpu_before, 1),
        "sandbox_cpu_seconds": round(_cpu_of(sandbox.process.pid) - sandbox_before, 1),
        "per_account_seconds": sorted(round(run["seconds"], 1) for run in runs),
    }
    print(f"[scale-out] {json.dumps(result)}", file=sys.stderr, flush=True)
    return result


def correctness(sandbox: Any, expected_per_account: int, accounts: list[str]) -> dict[str, Any]:
    records = sandbox.records()
    keys = [(r["accountId"], r["entity"], r["id"]) for r in records]
    per_account = {a: sum(1 for k in keys if k[0] == a) for a in accounts}
    return {
        "records_in_service": len(records),
        "expected": expected_per_account * len(accounts),
        "lost": sum(max(expected_per_account - n, 0) for n in per_account.values()),
        "duplicate_keys": len(keys) - len(set(keys)),
        "written_more_than_once": sum(1 for r in records if r.get("writes", 1) != 1),
    }


def account_code(account: str) -> str:
    return f"H{account.rsplit('-', 1)[-1]}"


def dagster_export(single: Path, accounts: list[str], folder: Path) -> Path:
    """One connection ``hotel`` partitioned by account: ``single``'s Berlin export once per
    account (hotel code ``H01``… for ``acc-01``…), the lookup sending each code to its account,
    and partitions from the first month of check-in. The mappings folder, for the code location."""
    connection = folder / "hotel"
    done = connection / ".complete"
    if done.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    (connection / "data").mkdir(parents=True)
    shutil.copy(single / "data" / "room_types.csv", connection / "data" / "room_types.csv")
    first_checkin = "9999-12"
    for name in ("rooms.csv", "bookings.csv"):
        with (
            (single / "data" / name).open(newline="", encoding="utf-8") as read,
            (connection / "data" / name).open("w", newline="", encoding="utf-8") as write,
        ):
            rows = list(csv.DictReader(read))
            writer = csv.DictWriter(write, list(rows[0]), lineterminator="\n")
            writer.writeheader()
            for account in accounts:
                for row in rows:
                    writer.writerow({**row, "hotel_code": account_code(account)})
            if name == "bookings.csv":
                first_checkin = min(row["arrival"][:7] for row in rows)
    text = (single / "mapping.yaml").read_text(encoding="utf-8")
    start, end = text.index("  hotel_accounts:\n"), text.index("  reservation_status:\n")
    lookup = "".join(f"    {account_code(a)}: {a}\n" for a in accounts)
    text = text[:start] + "  hotel_accounts:\n" + lookup + text[end:]
    text += f"\ndagster:\n  partition_by_account: true\n  partitions_start: '{first_checkin}'\n"
    (connection / "mapping.yaml").write_text(text, encoding="utf-8")
    done.write_text("ok\n")
    return folder


def _sync_requests(sandbox: Any) -> int:
    stats = sandbox.stats()["requests"]
    return sum(
        n
        for endpoint, by_status in stats.items()
        if "/api/v1/hooks/" in endpoint
        for n in by_status.values()
    )


def measure_dagster(
    mode: str,
    mappings: Path,
    accounts: list[str],
    env: dict[str, str],
    runs_at_once: int,
    sandbox: Any,
    work: Path,
    storage: str = "postgresql",
) -> dict[str, Any]:
    """One Dagster run per account, ``runs_at_once`` at a time, in a fresh instance whose
    event log and runs are in ``storage`` (``bench.dagster_deployment.instance_storage``)."""
    import dagster as dg

    from pms_sync.account_partitions import accounts_definition, per_account_requests
    from pms_sync.connections import load_connection
    from pms_sync.partitions import full_range_tags, reservation_partitions

    connection = load_connection(mappings / "hotel" / "mapping.yaml")
    months = reservation_partitions(connection.dagster.partitions_start, "UTC")
    full = full_range_tags(months)
    every_month = dg.PartitionKeyRange(
        full["dagster/asset_partition_range_start"], full["dagster/asset_partition_range_end"]
    )
    requests = per_account_requests(every_month, accounts, {"pms_sync/trigger": "bench"}, mode)
    dagster_env = {**env, "PMS_SYNC_MAPPINGS_DIR": str(mappings)}
    with (
        instance_storage(storage) as section,
        dagster_deployment(work, dagster_env, runs_at_once, storage=section) as deployment,
    ):
        requests_before, sandbox_before = _sync_requests(sandbox), _cpu_of(sandbox.process.pid)
        submit_cpu = _children_cpu()
        cpu_before = deployment.cpu.total()
        submitted = time.perf_counter()
        run_ids = deployment.submit(
            connection.name + "_sync",
            [request.tags for request in requests],
            f"{accounts_definition(connection).name}:{','.join(accounts)}",
        )
        submit_seconds = time.perf_counter() - submitted
        submit_cpu = _children_cpu() - submit_cpu
        runs = deployment.wait_for(run_ids, timeout=3600)
        dagster_cpu = deployment.cpu.total() - cpu_before
    wall = max(r["ended"] for r in runs) - min(r["created"] for r in runs)
    requests_sent = _sync_requests(sandbox) - requests_before
    result = {
        "mode": mode,
        "runner": "dagster",
        "runs_at_once": runs_at_once,
        "runs": len(runs),
        "runs_succeeded": sum(1 for r in runs if r["status"] == "SUCCESS"),
        "wall_seconds": round(wall, 1),
        "submit_seconds": round(submit_seconds, 1),
        "requests": requests_sent,
        "requests_per_second": round(requests_sent / wall, 1),
        "dagster_cpu_seconds": round(dagster_cpu, 1),
        "submit_cpu_seconds": round(submit_cpu, 1),
        "sandbox_cpu_seconds": round(_cpu_of(sandbox.process.pid) - sandbox_before, 1),
        "per_run_seconds": sorted(round(r["ended"] - r["started"], 1) for r in runs),
        "queued_seconds": sorted(round(r["started"] - r["created"], 1) for r in runs),
    }
    print(f"[scale-out] {json.dumps(result)}", file=sys.stderr, flush=True)
    if result["runs_succeeded"] != len(runs):
        raise RuntimeError(f"{mode}: not every run succeeded (see {deployment.home})")
    return result


def run_dagster_modes(
    single: Path,
    accounts: list[str],
    reservations: int,
    rooms: int,
    modes: list[str],
    runs_at_once: int,
    base_env: dict[str, str],
    sandbox: Any,
    work: Path,
    first_sync_only: bool = False,
    storage: str = "postgresql",
) -> list[dict[str, Any]]:
    """Each mode into a fresh sandbox and snapshot: first sync, then a no-change pass."""
    mappings = dagster_export(
        single, accounts, single.parent / f"{single.name}-dagster-{len(accounts)}"
    )
    results: list[dict[str, Any]] = []
    at_once = {"sequential": 1, "concurrent": runs_at_once}
    for mode in modes:
        sandbox.reset()
        sizes: dict[str, int] = {}
        with fresh_schema(sizes) as snapshot:
            env = {**base_env, "PMS_SYNC_SNAPSHOT": snapshot}
            first = measure_dagster(
                mode, mappings, accounts, env, at_once[mode], sandbox, work, storage
            )
            first |= correctness(sandbox, reservations + rooms, accounts)
            # Printed now: the next mode resets the sandbox, and a long bench may be stopped.
            print(f"[scale-out] {json.dumps(first)}", file=sys.stderr, flush=True)
            nightly = (
                []
                if first_sync_only
                else [
                    measure_dagster(
                        f"{mode} no-change",
                        mappings,
                        accounts,
                        env,
                        at_once[mode],
                        sandbox,
                        work,
                        storage,
                    )
                ]
            )
        results += [first | {"snapshot_bytes": sizes["bytes"]}, *nightly]
    return results


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scale_out", description=__doc__)
    parser.add_argument("--accounts", type=int, default=8)
    parser.add_argument("--reservations", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument(
        "--backend",
        choices=("postgresql", "duckdb"),
        default="postgresql",
        help="where the snapshot lives (duckdb: the default file backend, for comparison)",
    )
    parser.add_argument("--modes", default="sequential,concurrent")
    parser.add_argument(
        "--runner",
        choices=("dagster", "cli"),
        default="dagster",
        help="dagster: one Dagster run per account (queued, daemon); cli: pms-sync processes",
    )
    parser.add_argument(
        "--instance-storage",
        choices=("postgresql", "sqlite"),
        default="postgresql",
        help="the Dagster instance's runs and event log: a PostgreSQL database, as a "
        "deployment has, or SQLite files in its home (dagster dev's default)",
    )
    parser.add_argument(
        "--first-sync-only",
        action="store_true",
        help="skip the no-change pass after each first sync",
    )
    parser.add_argument(
        "--work", type=Path, default=None, help="keep the sandbox and Dagster homes here"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="results file (default: bench/results-scale-out.json, -cli.json for --runner cli)",
    )
    arguments = parser.parse_args()
    from connector.sandbox.testing import sandbox_process

    export = account_export(
        ROOT / "bench" / "data" / f"scale-out-{arguments.reservations}", arguments.reservations
    )
    rooms = sum(1 for _ in (export / "data" / "rooms.csv").open()) - 1
    accounts = [f"acc-{n:02d}" for n in range(1, arguments.accounts + 1)]
    results: dict[str, Any] = {
        "accounts": arguments.accounts,
        "reservations_per_account": arguments.reservations,
        "rooms_per_account": rooms,
        "backend": arguments.backend,
        "cores": os.cpu_count(),
        "load_before": os.getloadavg(),
        "modes": [],
    }
    with tempfile.TemporaryDirectory(prefix="pms-scale-out-") as tmp:
        work = arguments.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        tokens = work / "tokens.json"
        tokens.write_text(json.dumps({a: f"{a}-token" for a in accounts}))
        base_env = {
            **os.environ,
            "PMS_SYNC_TOKENS_FILE": str(tokens),
            "PMS_SYNC_TOKEN": "",
            "PMS_SYNC_EXPORT_SETTLE_SECONDS": "0.05",
        }
        with sandbox_process(work / "sandbox", sandbox_config(accounts)) as sandbox:
            base_env["PMS_SYNC_BASE_URL"] = sandbox.base_url
            if arguments.runner == "dagster":
                if arguments.backend != "postgresql":
                    parser.error("--runner dagster runs on the PostgreSQL backend")
                results["runner"] = "dagster"
                results["modes"] = run_dagster_modes(
                    export,
                    accounts,
                    arguments.reservations,
                    rooms,
                    arguments.modes.split(","),
                    arguments.workers,
                    base_env,
                    sandbox,
                    work,
                    arguments.first_sync_only,
                    arguments.instance_storage,
                )
            workers_of = {"sequential": 1, "concurrent": arguments.workers}
            for mode in arguments.modes.split(",") if arguments.runner == "cli" else []:
                sandbox.reset()
                sizes: dict[str, int] = {}
                fresh = (
                    fresh_schema(sizes)
                    if arguments.backend == "postgresql"
                    else fresh_file(work, sizes)
                )
                with fresh as snapshot:
                    env = {**base_env, "PMS_SYNC_SNAPSHOT": snapshot}
                    first = measure(mode, export, accounts, env, workers_of[mode], sandbox)
                    first |= correctness(sandbox, arguments.reservations + rooms, accounts)
                    nightly = measure(
                        f"{mode} no-change", export, accounts, env, workers_of[mode], sandbox
                    )
                results["modes"] += [first | {"snapshot_bytes": sizes["bytes"]}, nightly]
    results["load_after"] = os.getloadavg()
    suffix = "-cli" if arguments.runner == "cli" else ""
    out = arguments.out or ROOT / "bench" / f"results-scale-out{suffix}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

"""Scale-out: 8 accounts x 10,000 reservations into a fresh sandbox, on a PostgreSQL snapshot,
synced one account after another, then with 4 runs at once (``python -m bench.scale_out``).

Each account is one connection (a copy of the hotel mapping named ``hotel-acc-NN``, its Berlin
hotel's export sent to account ``acc-NN``), so the runs lock different scopes and proceed
together (connector/snapshot/_locks.py). One connection per account rather than one connection
run per account: the mass-change guard compares a run with the connection's last one, so a
run of only one of its accounts would read the others as gone (docs/decisions.md). The concurrent runs are 4 ``pms-sync sync``
processes at a time: what Dagster's multiprocess executor does with one step per account,
without Dagster's own start-up per step (BENCHMARKS.md says which was measured).

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
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results-scale-out.json")
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
        work = Path(tmp)
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
            workers_of = {"sequential": 1, "concurrent": arguments.workers}
            for mode in arguments.modes.split(","):
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
    arguments.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

"""Run the scenarios at one size: every timed stage in a fresh subprocess, medians of runs."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.data import ROOT, Dataset, prepare
from bench.sql_data import SqlDataset

# Peers send one blocking request per record; above this many reservations their first run is
# measured on a prefix of this many and its time extrapolated linearly (said in the results).
# (Full pushes of every size one request at a time would not fit the time of `make bench`.)
PEER_PREFIX = int(os.environ.get("BENCH_PEER_PREFIX", "1000"))
# The raw aiohttp generator's rate is taken over the first this many of the same payloads.
RAW_REQUESTS = int(os.environ.get("BENCH_RAW_REQUESTS", "5000"))
# Above this many reservations pms-sync's first run is not pushed: the full snapshot is seeded
# (map + diff + record, no HTTP) and the first run's time estimated as the seed's time plus the
# requests at the push rate measured at the largest pushed size.
FULL_PUSH_MAX = int(os.environ.get("BENCH_FULL_PUSH_MAX", "10000"))
# Up to this size the floor's documents are compared with pms-sync's, byte for byte.
FLOOR_CHECK_MAX = int(os.environ.get("BENCH_FLOOR_CHECK_MAX", "100000"))

SCENARIOS = (
    "map",
    "diff",
    "first",
    "noop",
    "change",
    "floor",
    "sql",
    "push",
    "dagster",
    "naive",
    "dlt",
)
# Run by name only: the sql scenario measures the same among its figures.
EXTRA_SCENARIOS = ("sql_incremental",)
# The sources of the sql scenario: the CSV export, then the same in each database.
SQL_SOURCES = ("csv", "postgresql", "mariadb")


def run_stage(name: str, **arguments: Any) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, "-m", "bench.stage", name, json.dumps(arguments)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONHASHSEED": "0", "RUNTIME__LOG_LEVEL": "WARNING"},
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"stage {name} failed:\n{completed.stderr[-4000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def run_floor(command: str, *arguments: str) -> dict[str, Any]:
    """One run of bench/floor.py in a fresh process (its peak memory is its own)."""
    completed = subprocess.run(
        [sys.executable, "-m", "bench.floor", command, *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"floor {command} failed:\n{completed.stderr[-4000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of the numeric figures of several runs, and the runs themselves."""
    summary: dict[str, Any] = {"runs": runs}
    for key, value in runs[0].items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            summary[key] = statistics.median(run[key] for run in runs)
        else:
            summary[key] = value
    return summary


@dataclass
class SizeRun:
    """The scenarios of one size against one sandbox process."""

    dataset: Dataset
    sandbox: Any  # connector.sandbox.testing.SandboxProcessHandle
    work: Path
    runs: int = 3
    results: dict[str, Any] = field(default_factory=dict)
    push_rate: float | None = None  # pms-sync's, measured at a smaller size of the same run

    @property
    def full_snapshot(self) -> Path:
        return self.work / "full.duckdb"

    def _fresh(self, name: str, template: Path | None = None) -> Path:
        target = self.work / name
        if target.is_dir():
            shutil.rmtree(target)
        target.unlink(missing_ok=True)
        Path(f"{target}.wal").unlink(missing_ok=True)
        if template is not None:
            if template.is_dir():
                shutil.copytree(template, target)
            else:
                shutil.copy(template, target)
        return target

    def repeat(self, stage: Callable[[], dict[str, Any]], runs: int | None = None) -> dict:
        return summarise([stage() for _ in range(runs or self.runs)])

    def scenario_map(self) -> dict[str, Any]:
        return self.repeat(lambda: run_stage("map", mapping=str(self.dataset.mapping)))

    def scenario_first(self) -> dict[str, Any]:
        if self.dataset.size > FULL_PUSH_MAX:
            return self._seed()

        def once() -> dict[str, Any]:
            self.sandbox.reset()
            snapshot = self._fresh("first.duckdb")
            result = run_stage(
                "sync",
                mapping=str(self.dataset.mapping),
                snapshot=str(snapshot),
                base_url=self.sandbox.base_url,
            )
            result["sandbox_requests"] = self.sandbox.stats()["total"]
            shutil.copy(snapshot, self.full_snapshot)
            return result

        summary = self.repeat(once)
        summary["push_rate"] = summary["requests"] / summary["push_seconds"]
        return summary

    def _seed(self) -> dict[str, Any]:
        snapshot = self._fresh("first.duckdb")
        result = run_stage("seed", mapping=str(self.dataset.mapping), snapshot=str(snapshot))
        shutil.copy(snapshot, self.full_snapshot)
        summary = summarise([result])
        rate = self.push_rate
        summary["counts"] = {"create": result["records"]}
        summary["requests"] = result["records"]
        summary["seed_seconds"] = result["seconds"]
        if rate:
            summary["seconds"] = result["seconds"] + result["records"] / rate
            summary["estimated"] = True
        return summary

    def _ensure_full(self) -> None:
        if "first" not in self.results:
            self.results["first"] = self.scenario_first()

    def scenario_diff(self) -> dict[str, Any]:
        self._ensure_full()

        def once() -> dict[str, Any]:
            snapshot = self._fresh("diff.duckdb", self.full_snapshot)
            return run_stage("diff", mapping=str(self.dataset.mapping), snapshot=str(snapshot))

        return self.repeat(once)

    def _sync_from_full(self, mapping: Path) -> dict[str, Any]:
        self._ensure_full()

        def once() -> dict[str, Any]:
            snapshot = self._fresh("run.duckdb", self.full_snapshot)
            before = self.sandbox.stats()["total"]
            result = run_stage(
                "sync", mapping=str(mapping), snapshot=str(snapshot), base_url=self.sandbox.base_url
            )
            result["sandbox_requests"] = self.sandbox.stats()["total"] - before
            return result

        return self.repeat(once)

    def scenario_noop(self) -> dict[str, Any]:
        return self._sync_from_full(self.dataset.mapping)

    def scenario_change(self) -> dict[str, Any]:
        return self._sync_from_full(self.dataset.changed_mapping)

    def scenario_floor(self) -> dict[str, Any]:
        """pms-sync against the DuckDB-only floor (bench/floor.py), interleaved pair by pair.

        first: pms-sync's extract + map + validate against the floor's full variant; noop: a
        whole pms-sync run with nothing changed (0 requests) against the floor's fingerprint
        variant; change: pms-sync's map + diff of the 1 %-changed export (no push) against the
        fingerprint variant on the same export. The order alternates in each pair.
        """
        self._ensure_full()
        base, changed = self.dataset.base / "data", self.dataset.changed / "data"
        state = self._fresh("floor.duckdb")
        run_floor("prepare", str(base), str(state))
        check = (
            run_floor("check", str(base), str(self.dataset.mapping))
            if (self.dataset.size <= FLOOR_CHECK_MAX)
            else None
        )

        def pms_noop() -> dict[str, Any]:
            snapshot = self._fresh("floor-run.duckdb", self.full_snapshot)
            return run_stage(
                "sync",
                mapping=str(self.dataset.mapping),
                snapshot=str(snapshot),
                base_url=self.sandbox.base_url,
            )

        def pms_change() -> dict[str, Any]:
            snapshot = self._fresh("floor-run.duckdb", self.full_snapshot)
            return run_stage(
                "diff", mapping=str(self.dataset.changed_mapping), snapshot=str(snapshot)
            )

        pairs: dict[str, tuple[Callable[[], dict[str, Any]], Callable[[], dict[str, Any]]]] = {
            "first": (
                lambda: run_stage("map", mapping=str(self.dataset.mapping)),
                lambda: run_floor("full", str(base), str(state)),
            ),
            "noop": (pms_noop, lambda: run_floor("fingerprint", str(base), str(state))),
            "change": (pms_change, lambda: run_floor("fingerprint", str(changed), str(state))),
        }
        result: dict[str, Any] = {"check": check}
        for name, (ours, floor) in pairs.items():
            runs: dict[str, list[dict[str, Any]]] = {"pms_sync": [], "floor": []}
            for index in range(self.runs):
                order = [("pms_sync", ours), ("floor", floor)]
                for side, stage in order if index % 2 == 0 else reversed(order):
                    runs[side].append({**stage(), "load": os.getloadavg()[0]})
            ours_summary, floor_summary = summarise(runs["pms_sync"]), summarise(runs["floor"])
            result[name] = {
                "pms_sync": ours_summary,
                "floor": floor_summary,
                "time_ratio": ours_summary["seconds"] / floor_summary["seconds"],
                "memory_ratio": ours_summary["peak_rss_mb"] / floor_summary["peak_rss_mb"],
            }
        return result

    def scenario_sql(self) -> dict[str, Any]:
        """The export read from PostgreSQL and MariaDB against the same read from CSV files,
        interleaved round by round (bench/sql_data.py loads the tables).

        first: a first run without HTTP (map + diff + record every record, the ``seed``
        stage), once per source; noop: ``pms-sync plan`` with nothing changed against that source's own full
        snapshot; change: the same with 1 % of the reservations changed. Ratios are the
        database's time ÷ the CSV's, per round, and their median.
        """
        from bench.sql_data import prepare_sql

        mappings: dict[str, tuple[Path, Path]] = {
            "csv": (self.dataset.mapping, self.dataset.changed_mapping)
        }
        skipped: dict[str, str] = {}
        loaded_sql: dict[str, SqlDataset] = {}
        for database in SQL_SOURCES[1:]:
            try:
                loaded = prepare_sql(self.dataset, database)
            except Exception as error:  # a server that does not answer skips its rows
                skipped[database] = str(error).splitlines()[0]
                continue
            mappings[database] = (loaded.mapping, loaded.changed_mapping)
            loaded_sql[database] = loaded
        sources = [source for source in SQL_SOURCES if source in mappings]
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {
            name: {source: [] for source in sources} for name in ("first", "noop", "change")
        }

        def full(source: str) -> Path:
            return self.work / f"sql-full-{source}.duckdb"

        def measured(name: str, source: str, result: dict[str, Any]) -> None:
            runs[name][source].append({**result, "load": os.getloadavg()[0]})
            # Each figure as it comes: a long run stopped early keeps what it measured.
            print(f"[bench] sql {name} {source} {json.dumps(result)}", file=sys.stderr, flush=True)

        # The first run once per source (the longest stage; a snapshot for the later ones),
        # then the nightly and 1 %-changed plans, the order rotating each round.
        for source in sources:
            snapshot = self._fresh(f"sql-first-{source}.duckdb")
            measured(
                "first",
                source,
                run_stage("seed", mapping=str(mappings[source][0]), snapshot=str(snapshot)),
            )
            shutil.copy(snapshot, full(source))
        for index in range(self.runs):
            order = sources[index % len(sources) :] + sources[: index % len(sources)]
            for name, variant in (("noop", 0), ("change", 1)):
                for source in order:
                    snapshot = self._fresh(f"sql-run-{source}.duckdb", full(source))
                    result = run_stage(
                        "diff", mapping=str(mappings[source][variant]), snapshot=str(snapshot)
                    )
                    measured(name, source, result)
        result: dict[str, Any] = {"skipped": skipped}
        result["incremental"] = self._sql_incremental(loaded_sql, full)
        for name, per_source in runs.items():
            figures: dict[str, Any] = {
                source: summarise(done) for source, done in per_source.items()
            }
            for source in sources[1:]:
                pairs = zip(per_source[source], per_source["csv"], strict=True)
                ratios = [ours["seconds"] / csv["seconds"] for ours, csv in pairs]
                figures[f"{source}_ratio"] = statistics.median(ratios)
                figures[f"{source}_ratios"] = ratios
            result[name] = figures
        return result

    def scenario_sql_incremental(self) -> dict[str, Any]:
        """The incremental part of ``scenario_sql`` alone: each database's full snapshot
        seeded (the first run without HTTP), then the incremental and full-read plans."""
        from bench.sql_data import prepare_sql

        loaded: dict[str, SqlDataset] = {}
        for database in SQL_SOURCES[1:]:
            try:
                loaded[database] = prepare_sql(self.dataset, database)
            except Exception as error:  # a server that does not answer skips its rows
                print(f"[bench] sql_incremental: {database} skipped: {error}", file=sys.stderr)
        for database, sql in loaded.items():
            snapshot = self._fresh(f"sql-full-{database}.duckdb")
            run_stage("seed", mapping=str(sql.mapping), snapshot=str(snapshot))
        return self._sql_incremental(
            loaded, lambda database: self.work / f"sql-full-{database}.duckdb"
        )

    def _sql_incremental(
        self,
        loaded: dict[str, SqlDataset],
        full: Callable[[str], Path],
    ) -> dict[str, Any]:
        """The 1 %-changed plan reading the bookings since the export's largest update time
        (an incremental read: every row of the changed bookings) against the same plan with
        ``--full-read``, interleaved round by round, per database; from the source's full
        snapshot with that cursor kept, as a settled full read leaves it."""
        from bench.sql_data import largest_update

        found: dict[str, Any] = {}
        for database, sql in loaded.items():
            snapshot = self._fresh(f"sql-incremental-{database}.duckdb", full(database))
            since = largest_update(sql.url, sql.base_table)
            run_stage(
                "cursor", mapping=str(sql.incremental_mapping), snapshot=str(snapshot), value=since
            )
            rounds: dict[str, list[dict[str, Any]]] = {"incremental": [], "full_read": []}
            for index in range(self.runs):
                order = [False, True] if index % 2 == 0 else [True, False]
                for full_read in order:
                    name = "full_read" if full_read else "incremental"
                    done = run_stage(
                        "diff",
                        mapping=str(sql.incremental_mapping),
                        snapshot=str(snapshot),
                        full_read=full_read,
                    )
                    rounds[name].append(done)
                    print(f"[bench] sql {name} {database} {json.dumps(done)}", file=sys.stderr)
            pairs = zip(rounds["incremental"], rounds["full_read"], strict=True)
            ratios = [ours["seconds"] / whole["seconds"] for ours, whole in pairs]
            found[database] = {
                "since": since,
                "incremental": summarise(rounds["incremental"]),
                "full_read": summarise(rounds["full_read"]),
                "rows_read": rounds["incremental"][0]["rows_read"],
                "rows_read_full": rounds["full_read"][0]["rows_read"],
                "time_ratio": statistics.median(ratios),
                "time_ratios": ratios,
            }
        return found

    def scenario_push(self) -> dict[str, Any]:
        """pms-sync's push against the raw aiohttp generator, interleaved pair by pair.

        Both post the same envelopes (every record of the export, built by pms-sync's own
        ``_envelope``) to a freshly reset sandbox at concurrency 16: pms-sync's whole first run
        (its push rate: requests ÷ push time, acknowledgements recorded), the raw generator
        posting and reading the answers only. The order alternates in each pair.
        """
        self._ensure_full()
        if self.dataset.size > FULL_PUSH_MAX:
            return {}

        def ours() -> dict[str, Any]:
            self.sandbox.reset()
            snapshot = self._fresh("push.duckdb")
            result = run_stage(
                "sync",
                mapping=str(self.dataset.mapping),
                snapshot=str(snapshot),
                base_url=self.sandbox.base_url,
            )
            return {**result, "rate": result["requests"] / result["push_seconds"]}

        def raw() -> dict[str, Any]:
            self.sandbox.reset()
            result = run_stage(
                "raw", mapping=str(self.dataset.mapping), base_url=self.sandbox.base_url
            )
            return {**result, "rate": result["requests"] / result["seconds"]}

        pairs = []
        for index in range(self.runs):
            if index % 2 == 0:
                first_ours = ours()
                pairs.append((first_ours, raw()))
            else:
                first_raw = raw()
                pairs.append((ours(), first_raw))
        ratios = [mine["rate"] / theirs["rate"] for mine, theirs in pairs]
        ours_summary = summarise([mine for mine, _ in pairs])
        raw_summary = summarise([theirs for _, theirs in pairs])
        return {
            "pms_sync_rate": ours_summary["rate"],
            "raw_rate": raw_summary["rate"],
            "ratio": statistics.median(ratios),
            "ratios": ratios,
            "requests": [(mine["requests"], theirs["requests"]) for mine, theirs in pairs],
            "pms_sync": ours_summary,
            "raw": raw_summary,
        }

    def _limit(self) -> int | None:
        return PEER_PREFIX if self.dataset.size > PEER_PREFIX else None

    def _extrapolate(self, result: dict[str, Any], full_records: int) -> dict[str, Any]:
        if result["requests"] and result["requests"] < full_records:
            factor = full_records / result["requests"]
            result = {
                **result,
                "measured_seconds": result["seconds"],
                "measured_requests": result["requests"],
                "seconds": result["seconds"] * factor,
                "requests": full_records,
                "extrapolated": True,
            }
        return result

    def _records(self) -> int:
        """Records of a full first run (what a stateless peer sends on every run)."""
        self._ensure_full()
        return int(self.results["first"]["requests"])

    def scenario_dagster(self) -> dict[str, Any]:
        """A nightly run with nothing changed through Dagster against the CLI's, interleaved
        (bench/dagster_cost.py), on a snapshot of its own."""
        from bench.dagster_cost import measure

        work = self.work / "dagster"
        work.mkdir(exist_ok=True)
        self.sandbox.reset()
        result = measure(self.dataset.size, self.runs, None, work, self.sandbox, "sqlite")
        return {"ratios": result["ratios"], "rounds": result["rounds"]}

    def scenario_naive(self) -> dict[str, Any]:
        """The naive script keeps no state: its no-change run is the same work as its first."""
        limit, records = self._limit(), self._records()
        data = str(self.dataset.base / "data")

        def once() -> dict[str, Any]:
            self.sandbox.reset()
            return self._extrapolate(
                run_stage("naive", data=data, base_url=self.sandbox.base_url, limit=limit), records
            )

        runs = self.repeat(once)
        return {"first": runs, "noop": runs, "change": runs, "prefix": limit}

    def scenario_dlt(self) -> dict[str, Any]:
        limit, records = self._limit(), self._records()
        state = self.work / "dlt-full"

        def first() -> dict[str, Any]:
            self.sandbox.reset()
            pipelines = self._fresh("dlt-first")
            result = run_stage(
                "dlt",
                data=str(self.dataset.base / "data"),
                base_url=self.sandbox.base_url,
                pipelines_dir=str(pipelines),
                limit=limit,
            )
            shutil.rmtree(state, ignore_errors=True)
            shutil.copytree(pipelines, state)
            return self._extrapolate(result, records)

        def later(data: Path) -> Callable[[], dict[str, Any]]:
            def once() -> dict[str, Any]:
                pipelines = self._fresh("dlt-run", state)
                return run_stage(
                    "dlt",
                    data=str(data),
                    base_url=self.sandbox.base_url,
                    pipelines_dir=str(pipelines),
                    limit=limit,
                )

            return once

        result = {
            "first": self.repeat(first),
            "noop": self.repeat(later(self.dataset.base / "data")),
            "change": self.repeat(later(self.dataset.changed / "data")),
            "prefix": limit,
        }
        if limit is not None:
            scale_incremental(result, self.dataset.size, self._rooms())
        return result

    def _rooms(self) -> int:
        return (
            int(self.results["map"]["records"]) - self.dataset.size if "map" in self.results else 0
        )


def scale_incremental(result: dict[str, Any], size: int, rooms: int) -> None:
    """dlt's later runs on a prefix: scale the reservations they sent to the full size.

    Rooms are sent whole on every run; the reservations sent (those past the cursor) scale by
    size / prefix, each costing the first run's measured time per request.
    """
    first = result["first"]
    per_request = first.get("measured_seconds", first["seconds"]) / max(
        first.get("measured_requests", first["requests"]), 1
    )
    factor = size / result["prefix"]
    for name in ("noop", "change"):
        run = result[name]
        reservations = max(run["requests"] - rooms, 0)
        extra = reservations * (factor - 1)
        run["measured_seconds"], run["measured_requests"] = run["seconds"], run["requests"]
        run["requests"] = run["requests"] + extra
        run["seconds"] = run["seconds"] + extra * per_request
        run["extrapolated"] = True


def run_size(
    size: int,
    scenarios: tuple[str, ...] = SCENARIOS,
    runs: int = 3,
    push_rate: float | None = None,
) -> dict[str, Any]:
    from connector.sandbox.testing import sandbox_process

    dataset = prepare(size)
    with tempfile.TemporaryDirectory(prefix=f"pms-bench-{size}-") as tmp:
        work = Path(tmp)
        with sandbox_process(work / "sandbox") as sandbox:
            run = SizeRun(dataset, sandbox, work, runs, push_rate=push_rate)
            for name in scenarios:
                if name in run.results:  # already run as another scenario's prerequisite
                    continue
                started = time.perf_counter()
                run.results[name] = getattr(run, f"scenario_{name}")()
                took = time.perf_counter() - started
                print(f"[bench] size {size}: {name} {took:.0f} s", file=sys.stderr, flush=True)
            return {
                "size": size,
                "rooms": dataset.rooms,
                "booking_rows": dataset.booking_rows(),
                **run.results,
            }

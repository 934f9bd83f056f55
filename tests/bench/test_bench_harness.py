"""Smoke test of the benchmark harness at a tiny size: the stages run and report their figures.

No timing is asserted (benchmarks are never timed tests); only the shape of the results.
"""

from __future__ import annotations

import csv

from bench import floor, stage
from bench.data import prepare
from bench.peers import naive_sync
from bench.report import markdown_table
from connector.sandbox.testing import running_sandbox


def test_stages_run_at_a_tiny_size(tmp_path):
    dataset = prepare(150, root=tmp_path / "data")
    with (dataset.changed / "data" / "bookings.csv").open() as handle:
        changed = {
            row["booking_no"]
            for row in csv.DictReader(handle)
            if row["modified_at"] == "2026-11-01T12:00:00Z"
        }
    assert len(changed) == 1  # 1 % of 150 bookings: booking number 100

    mapped = stage.stage_map(str(dataset.mapping))
    assert mapped["records"] == 150 + dataset.rooms and mapped["quarantined"] == 0

    snapshot = tmp_path / "full.duckdb"
    seeded = stage.stage_seed(str(dataset.mapping), str(snapshot))
    assert seeded["records"] == mapped["records"]

    diff = stage.stage_diff(str(dataset.mapping), str(snapshot))
    assert diff["counts"]["skip"] == mapped["records"]

    with running_sandbox(tmp_path / "sandbox") as sandbox:
        noop = stage.stage_sync(str(dataset.mapping), str(snapshot), sandbox.base_url)
        assert noop["requests"] == 0 and sandbox.stats()["total"] == 0
        change = stage.stage_sync(str(dataset.changed_mapping), str(snapshot), sandbox.base_url)
        # The seeded snapshot was never pushed: the sandbox answers the update as a new
        # reservation, which the report lists as a disagreement.
        assert change["requests"] == 1 and change["status"] == "disagreed"
        naive = naive_sync(dataset.base / "data", sandbox.base_url, limit=5)
        assert naive["requests"] == dataset.rooms + 5 and naive["failed"] == 0

    # The floor builds pms-sync's documents byte for byte, and finds what changed.
    assert floor.check(dataset.base / "data", dataset.mapping) == {
        "reservations": 150,
        "floor_reservations": 150,
        "identical": 150,
        "differing_sample": [],
    }
    state = tmp_path / "floor.duckdb"
    assert floor.prepare(dataset.base / "data", state) == {"sent": 150}
    for variant in ("full", "fingerprint"):
        assert floor.run(variant, dataset.base / "data", state)["changed"] == 0
        assert floor.run(variant, dataset.changed / "data", state)["changed"] == 1

    results = {
        "date": "today",
        "commit": "abc",
        "runs": 1,
        "machine": {
            "cores": 2,
            "cpu": "cpu",
            "memory_gb": 1,
            "python": "3.11",
            "load_average_at_start": 0,
        },
        "sizes": {
            "150": {
                "map": {**mapped, "peak_rss_mb": 1.0},
                "diff": {**diff, "peak_rss_mb": 1.0},
                "noop": {**noop, "sandbox_requests": 0, "peak_rss_mb": 1.0},
                "change": {**change, "sandbox_requests": 1, "peak_rss_mb": 1.0},
                "naive": {"first": naive, "noop": naive, "change": naive, "prefix": 5},
                "floor": {
                    "check": {"identical": 150, "reservations": 150},
                    "noop": {
                        "pms_sync": {"seconds": 2.0, "peak_rss_mb": 400.0},
                        "floor": {"seconds": 1.0, "peak_rss_mb": 200.0},
                        "time_ratio": 2.0,
                        "memory_ratio": 2.0,
                    },
                },
            }
        },
    }
    table = markdown_table(results)
    assert "nightly run, nothing changed (requests)" in table and "| 150 |" in table
    assert "2.00 s vs 1.00 s = 2.0x" in table and "150 of 150" in table


def test_the_dagster_cost_ratios_are_those_of_the_sides_measured() -> None:
    from bench.dagster_cost import ratios

    def side(cpu: float, wall: float) -> dict[str, float]:
        return {"cpu_seconds": cpu, "wall_seconds": wall}

    rounds = [
        {"cli": side(2.0, 2.0), "dagster": side(6.0, 5.0)},
        {"cli": side(2.0, 2.5), "dagster": side(7.0, 5.0)},
        {"cli": side(2.0, 2.0), "dagster": side(8.0, 6.0)},
    ]

    found = ratios(rounds)

    assert found["dagster_vs_cli"] == {"cpu_seconds": 3.5, "wall_seconds": 2.5}
    assert "after_vs_before" not in found and "batched_vs_cli" not in found
    assert found["medians"]["dagster_cpu_seconds"] == 7.0


def test_the_sql_mapping_reads_each_csv_input_from_its_table(tmp_path) -> None:
    from bench.data import HOTEL
    from bench.sql_data import _mapping

    target = _mapping(HOTEL / "mapping.yaml", tmp_path / "m.yaml", "sqlite:///x.db", "ns")
    text = target.read_text(encoding="utf-8")
    assert "type: csv" not in text
    for table in ("rooms", "room_types", "bookings"):
        assert f'{{type: sql, url: "sqlite:///x.db", table: ns.{table}}}' in text


def test_the_sql_rows_show_each_database_against_csv() -> None:
    from bench.report import sql_rows

    def side(seconds: float) -> dict:
        return {"seconds": seconds, "peak_rss_mb": 500.0}

    sql = {
        "skipped": {"mariadb": "no server"},
        "noop": {
            "csv": side(4.0),
            "postgresql": side(5.0),
            "postgresql_ratio": 1.25,
            "postgresql_ratios": [1.2, 1.25, 1.3],
        },
    }
    rows = sql_rows(sql, "1,000,000")
    assert rows[0][0] == "nightly plan, nothing changed, from the database ÷ from CSV (PostgreSQL)"
    assert rows[0][3] == "5.00 s vs 4.00 s = **1.25x** (rounds 1.20, 1.25, 1.30)"
    assert rows[1][0] == "sql scenario: mariadb skipped (no server)"

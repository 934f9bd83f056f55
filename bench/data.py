"""Benchmark inputs: the hotel example's export at a given size, and the same with 1 % changed.

Deterministic: the same size gives the same files. They go to ``bench/data/`` (git-ignored) and
are reused when already there.
"""

from __future__ import annotations

import csv
import importlib.util
import os
import shutil
from dataclasses import dataclass
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOTEL = ROOT / "mappings" / "hotel"
DATA_ROOT = Path(os.environ.get("BENCH_DATA") or Path(__file__).resolve().parent / "data")
SEED = 20261122
CHANGED_SHARE = 0.01


@dataclass(frozen=True)
class Dataset:
    size: int  # reservations
    rooms: int
    base: Path  # a directory with mapping.yaml and data/*.csv
    changed: Path  # the same with 1 % of the reservations changed

    @property
    def mapping(self) -> Path:
        return self.base / "mapping.yaml"

    @property
    def changed_mapping(self) -> Path:
        return self.changed / "mapping.yaml"

    def booking_rows(self) -> int:
        with (self.base / "data" / "bookings.csv").open("rb") as handle:
            return sum(1 for _ in handle) - 1


BENCH_ANCHOR = date(2025, 7, 2)


def rooms_for(size: int) -> int:
    # About 2,500 reservations per room over the generator's 18 months keeps rooms realistic.
    return max(40, size // 2500)


def _generator():
    spec = importlib.util.spec_from_file_location("hotel_generate", HOTEL / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def prepare(size: int, root: Path = DATA_ROOT) -> Dataset:
    """Write (or reuse) the export with ``size`` reservations and its 1 %-changed twin."""
    rooms = rooms_for(size)
    home = root / f"hotel-{size}"
    dataset = Dataset(size, rooms, home / "base", home / "changed")
    done = home / ".complete"
    if done.exists():
        return dataset
    shutil.rmtree(home, ignore_errors=True)
    # Pinned: the samples are generated around the current month by default; the benchmark
    # figures were measured with stays from 2025-01-01 on (anchor 182 days later).
    _generator().write(dataset.base / "data", size, rooms, SEED, skew=True, anchor=BENCH_ANCHOR)
    shutil.copy(HOTEL / "mapping.yaml", dataset.mapping)
    (dataset.changed / "data").mkdir(parents=True)
    shutil.copy(HOTEL / "mapping.yaml", dataset.changed_mapping)
    for name in ("rooms.csv", "room_types.csv"):
        shutil.copy(dataset.base / "data" / name, dataset.changed / "data" / name)
    _write_changed(
        dataset.base / "data" / "bookings.csv", dataset.changed / "data" / "bookings.csv"
    )
    done.write_text("ok\n")
    return dataset


def _write_changed(source: Path, target: Path) -> None:
    """Every 100th booking gets a new price on each of its rooms and a later update time."""
    step = round(1 / CHANGED_SHARE)
    with (
        source.open(newline="", encoding="utf-8") as inp,
        target.open("w", newline="", encoding="utf-8") as out,
    ):
        reader = csv.DictReader(inp)
        assert reader.fieldnames
        writer = csv.DictWriter(out, reader.fieldnames, lineterminator="\n")
        writer.writeheader()
        for row in reader:
            number = int(row["booking_no"].rsplit("-", 1)[1])
            if number % step == 0:
                row["price"] = f"{float(row['price']) + 1:.2f}"
                row["modified_at"] = "2026-11-01T12:00:00Z"
            writer.writerow(row)

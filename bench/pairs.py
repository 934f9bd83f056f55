"""Before/after in interleaved pairs: ``python -m bench.pairs BEFORE_TREE [options]``.

Runs ``python -m bench SCENARIOS`` alternately in BEFORE_TREE (e.g. ``git worktree add --detach
/tmp/before <rev>``) and in this tree, ROUNDS times, each run writing its own results JSON into
OUT, then prints a markdown table of every figure with its after ÷ before ratio per pair and
the median. The machine is shared and noisy: a ratio within a pair is what to compare, not a
time across runs. Both trees run on this tree's interpreter (its virtual environment), each
with its own code first on the path, and share the exports (``BENCH_DATA``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

AFTER = Path(__file__).resolve().parent.parent
SIDES = ("before", "after")
FIGURES = (
    ("map", "seconds"),
    ("map", "peak_rss_mb"),
    ("diff", "seconds"),
    ("diff", "peak_rss_mb"),
    ("first", "seconds"),
    ("first", "peak_rss_mb"),
    ("noop", "seconds"),
    ("noop", "peak_rss_mb"),
    ("change", "seconds"),
    ("change", "peak_rss_mb"),
    ("push", "ratio"),
)


def run_pairs(before: Path, scenarios: str, sizes: list[int], rounds: int, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    size_arguments = [argument for size in sizes for argument in ("--size", str(size))]
    for round_number in range(1, rounds + 1):
        for side, tree in zip(SIDES, (before, AFTER), strict=True):
            load = os.getloadavg()[0]
            print(f"[pairs] round {round_number} {side} (load {load:.2f})", file=sys.stderr)
            started = time.monotonic()
            results = out / f"{side}-{round_number}.json"
            command = [sys.executable, "-m", "bench", scenarios, *size_arguments, "--runs", "1"]
            subprocess.run(
                [*command, "--out", str(results)],
                cwd=tree,
                env={**os.environ, "PYTHONPATH": str(tree)},
                check=True,
            )
            print(f"[pairs] {time.monotonic() - started:.0f} s", file=sys.stderr)


def ratio_table(out: Path) -> str:
    values: dict[tuple[int, str, str], dict[str, list[float]]] = {}
    for side in SIDES:
        for path in sorted(out.glob(f"{side}-*.json")):
            for size, result in json.loads(path.read_text())["sizes"].items():
                for scenario, key in FIGURES:
                    value = (result.get(scenario) or {}).get(key)
                    if isinstance(value, int | float):
                        cell = values.setdefault((int(size), scenario, key), {s: [] for s in SIDES})
                        cell[side].append(float(value))
    lines = [
        "| reservations | figure | before | after | after ÷ before, per pair (median) |",
        "|---|---|---|---|---|",
    ]
    for (size, scenario, key), cell in sorted(values.items()):
        pairs = [a / b for b, a in zip(cell["before"], cell["after"], strict=False) if b]
        median = f"{statistics.median(pairs):.2f}" if pairs else "—"

        def shown(numbers: list[float]) -> str:
            return ", ".join(f"{number:.2f}" for number in numbers)

        lines.append(
            f"| {size:,} | {scenario} {key} | {shown(cell['before'])} | {shown(cell['after'])} "
            f"| {shown(pairs)} (**{median}**) |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.pairs", description=__doc__)
    parser.add_argument("before", type=Path, help="the tree to compare this one against")
    parser.add_argument("--scenarios", default="map,diff,first,noop,change,push")
    parser.add_argument("--size", type=int, action="append", help="reservations (repeatable)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=AFTER / ".pms-sync" / "bench-pairs")
    parser.add_argument("--table-only", action="store_true", help="print the table of OUT")
    arguments = parser.parse_args()
    if not arguments.table_only:
        sizes = arguments.size or [10_000, 100_000]
        before = arguments.before.resolve()
        run_pairs(before, arguments.scenarios, sizes, arguments.rounds, arguments.out)
    print(ratio_table(arguments.out))


if __name__ == "__main__":
    main()

"""``python -m bench all`` (what ``make bench`` runs) or ``python -m bench SCENARIO --size N``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from bench.harness import EXTRA_SCENARIOS, SCENARIOS, run_size
from bench.report import RESULTS, environment, write_markdown


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "scenario", help=f"all, or one or more (comma-separated) of {', '.join(SCENARIOS)}"
    )
    parser.add_argument("--size", type=int, action="append", help="reservations (repeatable)")
    parser.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_RUNS", "3")))
    parser.add_argument("--out", type=Path, default=None, help="results JSON (default for all)")
    arguments = parser.parse_args()
    sizes = arguments.size or [
        int(size) for size in os.environ.get("BENCH_SIZES", "10000,100000").split(",")
    ]
    scenarios = SCENARIOS if arguments.scenario == "all" else tuple(arguments.scenario.split(","))
    unknown = set(scenarios) - set(SCENARIOS) - set(EXTRA_SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios {sorted(unknown)}; known: {', '.join(SCENARIOS)}")
    results: dict = {**environment(), "runs": arguments.runs, "sizes": {}}
    out = arguments.out or (RESULTS if arguments.scenario == "all" else None)
    complete = arguments.scenario == "all" or arguments.out is not None
    push_rate = None
    for size in sorted(sizes):
        result = run_size(size, scenarios, arguments.runs, push_rate)
        results["sizes"][str(size)] = result
        push_rate = result.get("first", {}).get("push_rate", push_rate)
        # Written after each size, so a long run interrupted keeps what it measured.
        if out:
            out.write_text(json.dumps(results, indent=2, default=str) + "\n")
            print(f"[bench] wrote {out}", file=sys.stderr)
        if complete:
            write_markdown(results)
    if not out:
        print(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()

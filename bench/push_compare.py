"""The push scenario, before and after a change, interleaved against one sandbox process.

``python -m bench.push_compare --before TREE [--after TREE] [--size 10000] [--rounds 3]
[--without-raw]``

Each round runs, in an order that rotates from round to round, the raw aiohttp generator,
pms-sync's first run from the ``--before`` tree and pms-sync's first run from the ``--after``
tree (default: this one) (``python -m bench.stage sync`` / ``raw`` in a fresh process each,
``PYTHONPATH`` pointing at the tree), each against the same sandbox process reset before it.
It prints, per run, the rate (requests ÷ push time, or ÷ posting time for raw), the sandbox's
CPU seconds per 1,000 requests (``/proc/PID/stat`` of the sandbox process around the run: the
same server work on every side shows the sandbox is a shared bound), the client's CPU seconds
per 1,000 requests (every thread of the client process during the push, or the raw
generator's posting; in brackets the event loop's thread alone, the rest being the snapshot's
writer and DuckDB's workers) and the ratio of each tree to the same round's raw run; then the
medians. The raw stage runs from the ``--before`` tree, so a change
here cannot alter what the raw side sends. Each pms-sync run also prints its whole time (map,
plan, push, record) and its peak RSS: with ``--without-raw`` (no ratios) it measures a first
run end to end, pushed for real, at sizes where the raw side would only add time
(``--size 1000000 --rounds 1``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.data import ROOT, prepare

_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14 and 15)


# ``bench.stage`` with the CPU seconds (every thread of the process) of the timed part added to
# its figures: pms-sync's ``push_plan_async`` and the raw generator's ``raw_post`` wrapped, so
# the same code measures every tree.
_STAGE_WITH_CPU = """
import time
import bench.peers as peers
import connector.push._push as push
from bench import stage

cpu, loop_cpu = [], []
plain_push, plain_raw = push.push_plan_async, peers.raw_post

async def timed_push(*args, **kwargs):
    started, loop_started = time.process_time(), time.thread_time()
    try:
        return await plain_push(*args, **kwargs)
    finally:
        cpu.append(time.process_time() - started)
        loop_cpu.append(time.thread_time() - loop_started)

def timed_raw(*args, **kwargs):
    started, loop_started = time.process_time(), time.thread_time()
    try:
        return plain_raw(*args, **kwargs)
    finally:
        cpu.append(time.process_time() - started)
        loop_cpu.append(time.thread_time() - loop_started)

push.push_plan_async, peers.raw_post = timed_push, timed_raw
printed = print
stage.print = lambda line, **kw: printed(
    line[:-1] + f', "cpu_seconds": {sum(cpu)}, "loop_cpu_seconds": {sum(loop_cpu)}}}', **kw
)
stage.main()
"""


def _stage(tree: Path, name: str, **arguments: Any) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, "-c", _STAGE_WITH_CPU, name, json.dumps(arguments)],
        cwd=tree,
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": str(tree),
            "PYTHONHASHSEED": "0",
            "RUNTIME__LOG_LEVEL": "WARNING",
        },
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"stage {name} in {tree} failed:\n{completed.stderr[-4000:]}")
    # The figures are the last JSON object printed (a stage's library may print before it,
    # DuckDB's progress bar even on the same line).
    lines = [line[line.index("{") :] for line in completed.stdout.splitlines() if "{" in line]
    if not lines:
        raise RuntimeError(
            f"stage {name} in {tree} printed no figures:\n{completed.stdout[-2000:]}"
        )
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.push_compare", description=__doc__)
    parser.add_argument("--before", type=Path, required=True, help="the other tree (e.g. main)")
    parser.add_argument("--after", type=Path, default=ROOT, help="default: this tree")
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--without-raw", action="store_true", help="pms-sync's two trees only, no ratios"
    )
    arguments = parser.parse_args()
    from connector.sandbox.testing import sandbox_process

    dataset = prepare(arguments.size)
    trees = {"raw": arguments.before, "before": arguments.before, "after": arguments.after}
    if arguments.without_raw:
        del trees["raw"]
    rates: dict[str, list[float]] = {name: [] for name in trees}
    ratios: dict[str, list[float]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(prefix="pms-push-compare-") as tmp:
        work = Path(tmp)
        with sandbox_process(work / "sandbox") as sandbox:
            pid = sandbox.process.pid
            order = list(trees)
            for round_ in range(arguments.rounds):
                found: dict[str, float] = {}
                for name in order[round_ % len(order) :] + order[: round_ % len(order)]:
                    sandbox.reset()
                    cpu = _cpu_seconds(pid)
                    if name == "raw":
                        result = _stage(
                            trees[name],
                            "raw",
                            mapping=str(dataset.mapping),
                            base_url=sandbox.base_url,
                        )
                        rate = result["requests"] / result["seconds"]
                    else:
                        snapshot = work / f"{name}-{round_}.duckdb"
                        result = _stage(
                            trees[name],
                            "sync",
                            mapping=str(dataset.mapping),
                            snapshot=str(snapshot),
                            base_url=sandbox.base_url,
                        )
                        rate = result["requests"] / result["push_seconds"]
                    sandbox_cpu = _cpu_seconds(pid) - cpu
                    requests = sandbox.stats()["total"]
                    found[name] = rate
                    rates[name].append(rate)
                    print(
                        f"round {round_ + 1} {name:6s} {result['requests']:,} requests "
                        f"(sandbox counted {requests:,}), {rate:,.0f} req/s, sandbox CPU "
                        f"{1000 * sandbox_cpu / max(requests, 1):.3f} s per 1,000 requests, "
                        f"client CPU {1000 * result['cpu_seconds'] / result['requests']:.3f} s "
                        f"per 1,000 requests ("
                        f"{1000 * result['loop_cpu_seconds'] / result['requests']:.3f} s on the "
                        "event loop's thread)"
                        + (
                            ""
                            if name == "raw"
                            else f", whole run {result['seconds']:.1f} s, "
                            f"peak RSS {result['peak_rss_mb']:,.0f} MB"
                        ),
                        flush=True,
                    )
                if "raw" not in found:
                    continue
                for name in ratios:
                    ratios[name].append(found[name] / found["raw"])
                print(
                    f"round {round_ + 1}: before {ratios['before'][-1]:.0%} of raw, "
                    f"after {ratios['after'][-1]:.0%} of raw",
                    flush=True,
                )
    if not ratios["before"]:
        print(
            "median req/s: "
            + ", ".join(f"{n} {statistics.median(v):,.0f}" for n, v in rates.items())
        )
        return
    print(
        "median req/s: "
        + ", ".join(f"{name} {statistics.median(values):,.0f}" for name, values in rates.items())
        + f"; median ratio to raw: before {statistics.median(ratios['before']):.0%} "
        f"({', '.join(f'{r:.0%}' for r in ratios['before'])}), "
        f"after {statistics.median(ratios['after']):.0%} "
        f"({', '.join(f'{r:.0%}' for r in ratios['after'])})"
    )


if __name__ == "__main__":
    main()

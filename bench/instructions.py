"""Instructions per request of the push's event-loop thread, counted by callgrind.

``python -m bench.instructions [--size 1000] [--raw] [--tree PATH]``

Wall-clock pairs on a shared machine spread ±15 %; instruction counts do not move with the
load. This runs, under ``valgrind --tool=callgrind --separate-threads=yes
--instr-atstart=no``, a child process that maps and plans the export uninstrumented, switches
callgrind on (``callgrind_control -i on``) for pms-sync's push only (``push_plan_async``) or,
with ``--raw``, for the raw generator's posting only (``raw_post``), against a sandbox process
(not under valgrind), and prints the instructions of the process's first thread (the event
loop's) per request. ``--tree`` runs another checkout's code (``PYTHONPATH``), to compare a
change. Needs valgrind (Debian's package); takes about two minutes at the default size.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.data import ROOT

_CHILD = """
import os, subprocess, sys, tempfile
from pathlib import Path

from bench.data import prepare
from bench.stage import _settings
from connector.sandbox.testing import sandbox_process

size, raw = int(sys.argv[1]), sys.argv[2] == "raw"


def counting(on):
    subprocess.run(["callgrind_control", "-i", "on" if on else "off", str(os.getpid())],
                   check=True, capture_output=True)


def counted(function, awaited):
    async def on_async(*args, **kwargs):
        counting(True)
        try:
            return await function(*args, **kwargs)
        finally:
            counting(False)

    def on_sync(*args, **kwargs):
        counting(True)
        try:
            return function(*args, **kwargs)
        finally:
            counting(False)

    return on_async if awaited else on_sync


dataset = prepare(size)
with tempfile.TemporaryDirectory() as tmp, sandbox_process(Path(tmp) / "sandbox") as sandbox:
    if raw:
        import bench.peers as peers
        from bench.stage import stage_raw

        peers.raw_post = counted(peers.raw_post, awaited=False)
        requests = stage_raw(str(dataset.mapping), sandbox.base_url)["requests"]
    else:
        import connector.push._push as push
        from connector.pipeline import run_sync

        push.push_plan_async = counted(push.push_plan_async, awaited=True)
        settings = _settings(sandbox.base_url, str(Path(tmp) / "snapshot.duckdb"))
        requests = run_sync(str(dataset.mapping), settings).requests
print("requests", requests)
"""


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=__doc__)
    parser.add_argument("--size", type=int, default=1000, help="reservations in the export")
    parser.add_argument("--raw", action="store_true", help="the raw generator instead")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout to run")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pms-instructions-") as tmp:
        out = Path(tmp) / "callgrind.out"
        completed = subprocess.run(
            [
                *("valgrind", "--tool=callgrind", "--separate-threads=yes"),
                *("--instr-atstart=no", f"--callgrind-out-file={out}.%p"),
                *(sys.executable, "-c", _CHILD, str(arguments.size)),
                "raw" if arguments.raw else "push",
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(arguments.tree)},
            check=False,
        )
        found = re.search(r"^requests (\d+)$", completed.stdout, re.MULTILINE)
        if completed.returncode != 0 or found is None or not int(found.group(1)):
            raise SystemExit(f"the counted run failed:\n{completed.stderr[-3000:]}")
        requests = int(found.group(1))
        # Thread 1 is the process's main thread: the event loop of the push and of raw_post.
        (first_thread,) = Path(tmp).glob("callgrind.out.*-01")
        totals = re.search(rb"^totals: (\d+)", first_thread.read_bytes(), re.MULTILINE)
        if totals is None:
            raise SystemExit(f"no totals in {first_thread.name}")
        instructions = int(totals.group(1))
    side = "raw generator" if arguments.raw else "pms-sync push"
    print(
        f"{side}: {requests:,} requests, {instructions / requests:,.0f} instructions per "
        f"request on the event loop's thread ({arguments.tree})"
    )


if __name__ == "__main__":
    main()

"""SIGKILL campaign: a real `pms-sync sync` process killed at random points of its run (while
it reads the export, diffs against the snapshot or pushes), then a rerun: every time, the
sandbox ends holding exactly the source, with no record lost and none held twice.

The source changes before every run (seeded random adds, changes and removals of units and
stays), so every killed run has work to lose. Kill times are drawn from a fixed seed across the
measured duration of an unkilled run, every other one within 0.2 s of the run's first
request; where a kill lands also depends on the machine's load,
so the campaign keeps going until PMS_SYNC_KILL_POINTS kills have landed inside a
run. `make test` lands 10 (20-35 s on the 2-core machine, by its load), `make soak` 40; a
run of 20 took 72 s on the loaded machine.
"""

from __future__ import annotations

import random
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from connector.pipeline import load_batches, sync_batches
from connector.sandbox.testing import SandboxHandle
from connector.settings import load_settings
from tests.reliability.campaign import (
    TOKEN,
    ForkServer,
    Source,
    budget,
    differences,
    report_summary,
    sync_requests,
)

SEED = 7_2026
KILL_POINTS = budget("PMS_SYNC_KILL_POINTS", 10)


@pytest.mark.slow
def test_a_sync_killed_at_random_points_then_rerun_always_leaves_exactly_the_source(
    clean_sandbox: SandboxHandle, fork_server: ForkServer, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    source = Source.generate(rng, units=15, stays=60)
    folder, snapshot = tmp_path / "export", tmp_path / "snapshot.duckdb"
    mapping = source.write(folder)
    env = {
        "PMS_SYNC_BASE_URL": clean_sandbox.base_url,
        "PMS_SYNC_TOKEN": TOKEN,
        "PMS_SYNC_SNAPSHOT": str(snapshot),
        "PMS_SYNC_CONCURRENCY": "2",
    }
    # Edits remove records, units with stays among them: both approvals.
    command = [
        "sync",
        str(mapping),
        "--json",
        "--allow-mass-change",
        "--allow-deactivation-with-stays",
    ]
    settings = load_settings(env=env)
    # 10 ms per request: the push of a run lasts about as long as reading and diffing it.
    clean_sandbox.set_faults(latency_ms=10)

    started = time.monotonic()
    fork_server.start(command, env, tmp_path / "first.log")
    assert fork_server.wait() == 0, (tmp_path / "first.log").read_text()
    run_duration = time.monotonic() - started

    landed: Counter[str] = Counter()
    runs, resent, finished_before_kill = 0, 0, 0
    problems: list[str] = []
    while sum(landed.values()) < KILL_POINTS and runs < 3 * KILL_POINTS:
        runs += 1
        source.edit(rng, changes=rng.randrange(15, 40))
        source.write(folder)
        delay = rng.uniform(0.0, run_duration)
        requests_before = sync_requests(clean_sandbox)
        log = tmp_path / f"run-{runs}.log"

        fork_server.start(command, env, log)
        if runs % 2:
            time.sleep(delay)
        else:
            # Every other kill waits for the victim's first request, so kills land in the push
            # however long reading and diffing take on a loaded machine.
            _wait_for_request(clean_sandbox, requests_before, deadline=4 * run_duration)
            time.sleep(rng.uniform(0.0, 0.2))
        fork_server.signal(signal.SIGKILL)  # a no-op on a run that finished before its kill point
        returncode = fork_server.wait()

        sent_by_victim = sync_requests(clean_sandbox) - requests_before
        if returncode == -signal.SIGKILL:
            landed[
                "before the first request (extract, diff)" if not sent_by_victim else "push"
            ] += 1
        else:
            assert returncode == 0, log.read_text()
            finished_before_kill += 1  # not a kill: the run is verified all the same
        batches, policy = load_batches(mapping)
        rerun = sync_batches(
            batches, settings, policy=policy, allow_mass_change=True, release_units_with_stays=True
        )
        found = differences(clean_sandbox, batches)
        if not rerun.push.complete or any(found.values()) or rerun.push.disagreements:
            problems.append(
                f"run {runs} (kill after {delay:.2f} s): {rerun.outcomes} {found} "
                f"{rerun.push.disagreements}"
            )
        # The service already held that content: a re-send after a lost answer (write-ahead).
        resent += rerun.push.resent_after_lost_answer
    batches, policy = load_batches(mapping)
    final = sync_batches(
        batches, settings, policy=policy, allow_mass_change=True, release_units_with_stays=True
    )

    report_summary(
        "kill",
        {
            "seed": SEED,
            "runs": runs + 1,
            "kills": sum(landed.values()),
            "kills_by_stage": dict(landed),
            "finished_before_kill": finished_before_kill,
            "records_lost": sum(1 for p in problems if "lost" in p),
            "duplicates": 0 if not problems else None,
            "resent_after_kill": resent,
            "final_run_requests": final.requests,
            "campaign_s": round(time.monotonic() - started, 1),
            "first_run_s": round(run_duration, 2),
        },
    )
    assert problems == []
    assert sum(landed.values()) == KILL_POINTS
    assert landed["push"] and landed["before the first request (extract, diff)"]
    assert final.requests == 0  # the snapshot agrees with the service: nothing left to send


def _wait_for_request(sandbox: SandboxHandle, before: int, deadline: float) -> None:
    """Until the sync webhooks received a request after ``before`` of them, or ``deadline``
    seconds passed (the run may have had nothing to send)."""
    ends = time.monotonic() + deadline
    while sync_requests(sandbox) <= before and time.monotonic() < ends:
        time.sleep(0.005)

"""The standing "never wrong at the service" campaign (issue 13, docs/reliability.md).

Seeded random rounds. Each round edits the PMS's export (adds, changes, removals of units and
stays, rows turned invalid and fixed again, a key column blanked now and then), turns on a mix
of service faults and misbehaviours (500s, dropped answers, HTML and empty 200s, error JSON,
counts of the wrong type or of nothing, redirects, resets after the headers), and syncs until
the plan is delivered: some runs are real `pms-sync sync` processes stopped at a random point,
half of them by SIGKILL, half by SIGTERM (a graceful stop: exit 0, 3, 5 or 7 within the read
timeout + 10 s, stdout one JSON document). Every round after the first also makes ghost
candidates: a new unit with two future stays is synced while the service loses every answer
(the records may be stored, nothing is confirmed), then their rows leave the export.
Then the faults stop, one clean run completes the round, and the campaign asserts what the
service must hold:

- every valid record of the export exactly as the export has it; every record present but
  invalid in its last valid version (or not at all if it never was valid);
- nothing deactivated or cancelled that is still in the export (valid, invalid or without an
  id), and no unit deactivated while the service holds a stay in it ending today or later;
- every record truly gone from the export retired (units inactive unless held for their stays,
  future stays cancelled), unless a row without an id held the account's reconciliation; the
  ghost candidates included: 0 ghosts;
- the clean run ends `succeeded` or `blocked` (a unit held for its stays), never `disagreed`:
  a lost answer followed by "skipped" is a re-send, so 0 false disagreements;
- after every run, killed or not, nothing in the snapshot recorded as acknowledged in a
  version the service never stored.

`make test` runs PMS_SYNC_TRUST_ROUNDS=5 rounds, `make soak` more.
"""

from __future__ import annotations

import csv
import json
import os
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from pathlib import Path

import pytest

from connector.canonical import canonical_json
from connector.contract import Entity
from connector.mapping import load_mapping
from connector.pipeline import load_batches, plan_sync, sync_batches
from connector.plan import RefreshPolicy, parse_share
from connector.records import MappedRecords
from connector.safety.guard import GuardRules
from connector.sandbox.testing import SandboxHandle
from connector.snapshot import Snapshot
from tests.reliability.campaign import (
    ACCOUNT,
    TOKEN,
    ForkServer,
    budget,
    fast_retry_settings,
    report_summary,
    sync_requests,
)
from tests.reliability.campaign import MAPPING as CAMPAIGN_MAPPING

SEED = 13_2026
ROUNDS = budget("PMS_SYNC_TRUST_ROUNDS", 5)
# The rolling refresh re-sends acknowledged records in every run (docs/drift.md); it must not
# change what the service holds. PMS_SYNC_TRUST_REFRESH=off runs the campaign without it.
REFRESH = os.environ.get("PMS_SYNC_TRUST_REFRESH", "3d")
MAX_FAULTY_RUNS = 4
KILL_SHARE = 0.3  # of the later faulty runs (the first always is): a real process, stopped
SIGTERM_SHARE = 0.5  # of the stopped processes: SIGTERM (a graceful stop), the others SIGKILL
READ_TIMEOUT_S = 2.0  # the forked runs' PMS_SYNC_TIMEOUT
STOP_BOUND_S = READ_TIMEOUT_S + 10  # a SIGTERMed run has ended by then (docs/cli.md)
STOPPED_EXIT_CODES = {0, 3, 5, 7}  # finished anyway, incomplete, held, or stopped
TODAY = date.today()

# The campaigns' connection, with the country read from the export (so a unit can turn
# invalid) and the guard's thresholds out of the way: the campaign judges the plan's decisions.
MAPPING = (
    CAMPAIGN_MAPPING.replace("name: campaign", "name: trust")
    .replace("country: {constant: DE}", "country: country")
    .replace(
        "entities:\n",
        "safety:\n  max_missing_share: 1\n  max_missing_records: 1000000\n  max_row_drop: 1\n"
        "entities:\n",
        1,
    )
)
UNIT_COLUMNS = ["unit_id", "name", "country", "wifi_code", "door_code"]
STAY_COLUMNS = ["stay_id", "first_name", "email", "unit_id", "arrival", "departure", "adults"]

# Faults of a round: each round draws a few of these, at these rates.
FAULTS = {"error_rate": 0.08, "drop_rate": 0.06, "timeout_rate": 0.02}
MISBEHAVIOURS = {
    "html_200": 0.05,
    "empty_200": 0.04,
    "error_json_200": 0.04,
    "zero_counts_200": 0.04,
    "wrong_types_200": 0.04,
    "redirect_302": 0.03,
    "reset_after_headers": 0.05,
}


@dataclass
class Export:
    """The PMS's rows by id; ``broken`` rows are written invalid, ``keyless`` without an id."""

    units: dict[str, dict[str, str]] = field(default_factory=dict)
    stays: dict[str, dict[str, str]] = field(default_factory=dict)
    broken: set[str] = field(default_factory=set)
    keyless: set[str] = field(default_factory=set)
    serial: int = 0

    def add_unit(self, rng: random.Random) -> None:
        self.serial += 1
        key = f"U{self.serial}"
        self.units[key] = {
            "unit_id": key,
            "name": f"Apartment {self.serial}",
            "country": "DE",
            "wifi_code": f"wifi-{rng.randrange(10**6):06d}",
            "door_code": f"{rng.randrange(10**6):06d}",
        }

    def add_stay(self, rng: random.Random) -> None:
        self.serial += 1
        key = f"S{self.serial}"
        arrival = TODAY + timedelta(days=rng.randrange(1, 200))
        self.stays[key] = {
            "stay_id": key,
            "first_name": rng.choice(["Ada", "Grace", "Alan", "Edsger"]),
            "email": f"guest{self.serial}@example.org",
            "unit_id": rng.choice(sorted(self.units)),
            "arrival": arrival.isoformat(),
            "departure": (arrival + timedelta(days=rng.randrange(1, 10))).isoformat(),
            "adults": str(rng.randrange(1, 5)),
        }

    def add_ghost_candidates(self, rng: random.Random) -> list[tuple[str, str]]:
        """A new unit and two future stays in it; their (entity, id)."""
        self.add_unit(rng)
        unit = f"U{self.serial}"
        keys = [("accommodation", unit)]
        for _ in range(2):
            self.add_stay(rng)
            self.stays[f"S{self.serial}"]["unit_id"] = unit
            keys.append(("reservation", f"S{self.serial}"))
        return keys

    def remove(self, keys: list[tuple[str, str]]) -> None:
        for entity, key in keys:
            (self.units if entity == "accommodation" else self.stays).pop(key, None)
            self.broken.discard(key)

    def edit(self, rng: random.Random) -> Counter[str]:
        done: Counter[str] = Counter()
        self.keyless.clear()  # a blanked id is fixed by the next export
        for _ in range(rng.randrange(8, 20)):
            kind = rng.choices(
                ["add", "change", "remove", "break", "fix", "blank_id"], [3, 6, 3, 3, 2, 1]
            )[0]
            table = self.units if rng.random() < 0.3 else self.stays
            if kind == "add" or not table:
                self.add_unit(rng) if table is self.units else self.add_stay(rng)
                done["add"] += 1
                continue
            key = rng.choice(sorted(table))
            row = table[key]
            if kind == "change":
                if table is self.units:
                    row["name"] = f"Apartment {rng.randrange(10**6)}"
                    row["door_code"] = f"{rng.randrange(10**6):06d}"
                else:
                    row["adults"] = str(rng.randrange(1, 6))
                    row["first_name"] = rng.choice(["Barbara", "Donald", "Ken", "Margaret"])
            elif kind == "remove":
                # Units may go while stays still reference them: those units must be held.
                del table[key]
                self.broken.discard(key)
            elif kind == "break":
                self.broken.add(key)
            elif kind == "fix":
                if not self.broken:
                    continue
                self.broken.discard(rng.choice(sorted(self.broken)))
            else:
                self.keyless.add(key)
            done[kind] += 1
        return done

    def write(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        self._write(folder / "units.csv", UNIT_COLUMNS, self.units, "country", "XXX", "unit_id")
        self._write(folder / "stays.csv", STAY_COLUMNS, self.stays, "adults", "-1", "stay_id")
        mapping = folder / "mapping.yaml"
        mapping.write_text(MAPPING)
        return mapping

    def _write(
        self,
        path: Path,
        columns: list[str],
        rows: dict[str, dict[str, str]],
        broken_column: str,
        broken_value: str,
        key_column: str,
    ) -> None:
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            for key in sorted(rows):
                row = dict(rows[key])
                if key in self.broken:
                    row[broken_column] = broken_value
                if key in self.keyless:
                    row[key_column] = ""
                writer.writerow(row)

    def present(self) -> set[tuple[str, str]]:
        """(entity, id) of every record with a row in the export, valid or not."""
        return {("accommodation", key) for key in self.units} | {
            ("reservation", key) for key in self.stays
        }


def stored_versions(sandbox: SandboxHandle) -> dict[tuple[str, str], str]:
    return {(r["entity"], r["id"]): canonical_json(r["resource"]) for r in sandbox.records(ACCOUNT)}


def acknowledged_versions(snapshot: Path) -> dict[tuple[str, str], str]:
    with Snapshot.open(snapshot, read_only=True) as store:
        rows = store.acknowledged()
    return {
        (str(e), str(i)): canonical_json(json.loads(p))
        for e, i, p in zip(rows["entity"], rows["record_id"], rows["payload"], strict=True)
    }


def valid_versions(batches: dict[Entity, MappedRecords]) -> dict[tuple[str, str], str]:
    return {
        (str(entity), row.record_id): canonical_json(json.loads(row.payload))
        for entity, batch in batches.items()
        for row in batch.records.itertuples(index=False)
    }


def upcoming_stays_by_unit(held: dict[tuple[str, str], str]) -> set[str]:
    """Units the service holds a not-cancelled stay in that ends today or later."""
    units: set[str] = set()
    for (entity, _), text in held.items():
        resource = json.loads(text)
        if entity != "reservation" or resource["status"] == "CANCELLED":
            continue
        for item in resource["unitReservations"]:
            if date.fromisoformat(item["checkout"]) >= TODAY:
                units.add(item["unitId"])
    return units


@dataclass
class Tally:
    runs: int = 0
    kills: int = 0
    sigterms: int = 0
    stopped_exits: Counter[int] = field(default_factory=Counter)
    changed: int = 0
    ghosts: list[str] = field(default_factory=list)
    ghost_checks: int = 0  # candidates judged at a round's end (a keyless row holds them all)
    false_disagreements: list[str] = field(default_factory=list)
    bad_stops: list[str] = field(default_factory=list)
    false_acknowledgements: list[str] = field(default_factory=list)
    wrong_retirements: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    not_retired: list[str] = field(default_factory=list)
    edits: Counter[str] = field(default_factory=Counter)


@pytest.mark.slow
def test_random_edits_invalid_rows_misbehaviour_and_kills_never_leave_the_service_wrong(
    clean_sandbox: SandboxHandle, fork_server: ForkServer, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    export = Export()
    for _ in range(10):
        export.add_unit(rng)
    for _ in range(50):
        export.add_stay(rng)
    folder, snapshot = tmp_path / "export", tmp_path / "snapshot.duckdb"
    settings = replace(
        fast_retry_settings(clean_sandbox.base_url, snapshot, max_attempts=3, timeout=0.5),
        refresh=RefreshPolicy(share=parse_share(REFRESH, "PMS_SYNC_TRUST_REFRESH")),
    )
    env = {
        "PMS_SYNC_BASE_URL": clean_sandbox.base_url,
        "PMS_SYNC_TOKEN": TOKEN,
        "PMS_SYNC_SNAPSHOT": str(snapshot),
        "PMS_SYNC_CONCURRENCY": "2",
        "PMS_SYNC_MAX_ATTEMPTS": "2",
        "PMS_SYNC_REFRESH": REFRESH,
        "PMS_SYNC_TIMEOUT": str(READ_TIMEOUT_S),
    }
    tally = Tally()
    ever_stored: set[tuple[tuple[str, str], str]] = set()
    last_valid: dict[tuple[str, str], str] = {}
    ghost_candidates: set[tuple[str, str]] = set()
    requests_before = sync_requests(clean_sandbox)
    started = time.monotonic()

    def after_run() -> None:
        """Nothing in the snapshot that the service never stored in that version."""
        ever_stored.update(stored_versions(clean_sandbox).items())
        for key, version in acknowledged_versions(snapshot).items():
            if (key, version) not in ever_stored:
                tally.false_acknowledgements.append(f"run {tally.runs}: {key}")

    def stop_forked_run(mapping: Path) -> None:
        """A real `pms-sync sync` process, SIGKILLed or SIGTERMed at a random point."""
        log = tmp_path / f"run-{tally.runs}.log"
        fork_server.start(["sync", str(mapping), "--json"], env, log, log.with_suffix(".err"))
        # A forked run reads, diffs and starts pushing within about a second here.
        time.sleep(rng.uniform(0.3, 1.5))
        graceful = rng.random() < SIGTERM_SHARE
        signalled = time.monotonic()
        fork_server.signal(signal.SIGTERM if graceful else signal.SIGKILL)
        code = fork_server.wait()
        if not graceful:
            tally.kills += code == -signal.SIGKILL
            return
        tally.sigterms += 1
        tally.stopped_exits[code] += 1
        took = time.monotonic() - signalled
        problem = _stop_problem(code, took, log.read_text())
        if problem:
            tally.bad_stops.append(f"run {tally.runs}: {problem}")

    for round_number in range(ROUNDS):
        if round_number:
            tally.edits.update(export.edit(rng))
            # Ghost candidates: delivered while every answer is lost, then gone from the export.
            candidates = export.add_ghost_candidates(rng)
            ghost_candidates.update(candidates)
            lossy = export.write(folder)
            clean_sandbox.set_faults(drop_rate=1.0, seed=SEED + round_number)
            tally.runs += 1
            batches, policy = load_batches(lossy)
            sync_batches(
                batches, settings, policy=policy, guard=GuardRules.from_mapping(load_mapping(lossy))
            )
            after_run()
            export.remove(candidates)
        mapping = export.write(folder)
        guard = GuardRules.from_mapping(load_mapping(mapping))
        planned = plan_sync(mapping, settings)
        tally.changed += sum(n for action, n in planned.counts.items() if action != "skip")
        chosen = rng.sample(sorted(MISBEHAVIOURS), k=3)
        clean_sandbox.set_faults(
            **FAULTS,
            misbehaviour_rates={kind: MISBEHAVIOURS[kind] for kind in chosen},
            timeout_s=2.0,
            latency_ms=20,  # a push lasts long enough for a kill to land inside it
            seed=SEED + round_number,
        )
        for attempt in range(MAX_FAULTY_RUNS):
            tally.runs += 1
            if attempt == 0 or rng.random() < KILL_SHARE:
                stop_forked_run(mapping)
                after_run()
                continue
            batches, policy = load_batches(mapping)
            report = sync_batches(batches, settings, policy=policy, guard=guard)
            after_run()
            if report.push.complete:
                break
        clean_sandbox.set_faults()
        tally.runs += 1
        batches, policy = load_batches(mapping)
        final = sync_batches(batches, settings, policy=policy, guard=guard)
        after_run()
        # Everything is delivered now; a unit whose stays the service holds may stay held.
        if final.status == "disagreed":
            tally.false_disagreements.extend(
                f"round {round_number}: {d['entity']} {d['record_id']}: {d['detail']}"
                for d in final.to_json_dict()["disagreements"]
            )
        else:
            assert final.status in ("succeeded", "blocked"), final.to_json_dict()

        held = stored_versions(clean_sandbox)
        valid = valid_versions(batches)
        last_valid.update(valid)
        present = export.present()
        for key, version in last_valid.items():
            if key in present and held.get(key) != version:
                tally.lost.append(
                    f"round {round_number}: {key} {_difference(held.get(key), version)}"
                )
        with_stays = upcoming_stays_by_unit(held)
        tally.ghost_checks += 0 if export.keyless else len(ghost_candidates)
        for key, version in held.items():
            status = json.loads(version)["status"]
            retired = status in ("INACTIVE", "CANCELLED")
            if retired and key in present:
                tally.wrong_retirements.append(f"round {round_number}: {key} {status}")
            if status == "INACTIVE" and key[1] in with_stays:
                tally.wrong_retirements.append(f"round {round_number}: {key} has stays")
            held_for_stays = key[0] == "accommodation" and key[1] in with_stays
            gone = key not in present and not export.keyless  # a keyless row holds them all
            if not retired and gone and not held_for_stays:
                tally.not_retired.append(f"round {round_number}: {key}")
                if key in ghost_candidates:
                    tally.ghosts.append(f"round {round_number}: {key}")

    stats = clean_sandbox.stats()
    requests = sync_requests(clean_sandbox) - requests_before
    report_summary(
        "trust",
        {
            "seed": SEED,
            "rounds": ROUNDS,
            "runs": tally.runs,
            "kills": tally.kills,
            "edits": dict(tally.edits),
            "misbehaviours_injected": sum(
                n for kind, n in stats.get("injected", {}).items() if kind in MISBEHAVIOURS
            ),
            "faults_injected": sum(stats.get("injected", {}).values()),
            "changed_records": tally.changed,
            "requests": requests,
            "requests_per_changed_record": round(requests / max(tally.changed, 1), 2),
            "records_lost": len(tally.lost),
            "wrong_deactivations_or_cancellations": len(tally.wrong_retirements),
            "false_acknowledgements": len(tally.false_acknowledgements),
            "not_retired": len(tally.not_retired),
            "sigterms": tally.sigterms,
            "sigterm_exit_codes": {str(code): n for code, n in sorted(tally.stopped_exits.items())},
            "bad_stops": len(tally.bad_stops),
            "ghost_candidates": len(ghost_candidates),
            "ghosts": len(tally.ghosts),
            "ghost_checks": tally.ghost_checks,
            "false_disagreements": len(tally.false_disagreements),
            "campaign_s": round(time.monotonic() - started, 1),
        },
    )
    assert tally.false_acknowledgements == []
    assert tally.wrong_retirements == []
    assert tally.lost == []
    assert tally.ghosts == []
    assert tally.not_retired == []
    assert tally.false_disagreements == []
    assert tally.bad_stops == []
    assert tally.edits["break"] and tally.edits["remove"]
    assert sum(stats.get("injected", {}).values()) > 0 and tally.kills > 0
    assert tally.sigterms > 0 and (ROUNDS < 2 or tally.ghost_checks)


def _difference(held: str | None, expected: str) -> str:
    if held is None:
        return "not at the service"
    have, want = json.loads(held), json.loads(expected)
    return ", ".join(
        f"{name}: {have.get(name)!r} instead of {want.get(name)!r}"
        for name in sorted(set(have) | set(want))
        if have.get(name) != want.get(name)
    )


def _stop_problem(code: int, took: float, stdout: str) -> str | None:
    """What is wrong with a SIGTERMed run's end, or None: a documented exit code within the
    bound, and stdout exactly one JSON document carrying that code."""
    if code not in STOPPED_EXIT_CODES:
        return f"exit {code}"
    if took > STOP_BOUND_S:
        return f"ended {took:.1f} s after SIGTERM (bound {STOP_BOUND_S:.0f} s)"
    try:
        document = json.loads(stdout)
    except json.JSONDecodeError:
        return f"stdout is not one JSON document: {stdout[:200]!r}"
    if document.get("exit_code") != code:
        return f"the JSON says exit {document.get('exit_code')}, the process {code}"
    return None

"""What the reliability campaigns share: a small connection written as CSV files, seeded random
edits of it, the check that the sandbox holds exactly the source, budgets and summaries."""

from __future__ import annotations

import csv
import json
import os
import random
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from connector.client import ClientConfig, RetryPolicy
from connector.contract import Entity
from connector.push import PushOptions
from connector.records import MappedRecords
from connector.sandbox.testing import SandboxHandle
from connector.settings import SyncSettings, load_settings

REPOSITORY = Path(__file__).resolve().parents[2]
SUMMARY_DIR = REPOSITORY / ".pms-sync" / "reliability"
ACCOUNT = "demo"
TOKEN = "demo-token"

MAPPING = """\
name: campaign
account: {constant: demo}
inputs:
  units: {type: csv, path: units.csv}
  stays: {type: csv, path: stays.csv}
entities:
  accommodation:
    input: units
    on_missing: deactivate
    fields:
      id: unit_id
      status: {constant: ACTIVE}
      name: name
      street: {constant: Hauptstraße}
      streetNumber: {constant: "7"}
      country: {constant: DE}
      city: {constant: Berlin}
      wifiName: {constant: guest}
      wifiCode: wifi_code
      doorCode: door_code
  reservation:
    input: stays
    on_missing: cancel_future
    fields:
      id: stay_id
      status: {constant: CONFIRMED}
      createdAt: {constant: "2026-01-02T10:00:00Z"}
      primaryGuest:
        firstName: first_name
        email: email
      unitReservations:
        fields:
          id: {template: "{stay_id}-1"}
          unitId: unit_id
          unitName: unit_id
          checkin: arrival
          checkout: departure
          adults: adults
"""


def budget(variable: str, default: int) -> int:
    """An iteration count: the default keeps `make test` fast, `make soak` raises it."""
    return int(os.environ.get(variable) or default)


@dataclass
class Source:
    """The PMS's current data: units and stays by id, each a dict of CSV columns."""

    units: dict[str, dict[str, str]] = field(default_factory=dict)
    stays: dict[str, dict[str, str]] = field(default_factory=dict)
    serial: int = 0

    def new_unit(self, rng: random.Random) -> None:
        self.serial += 1
        unit_id = f"U{self.serial}"
        self.units[unit_id] = {
            "unit_id": unit_id,
            "name": f"Apartment {self.serial}",
            "wifi_code": f"wifi-{rng.randrange(10**6):06d}",
            "door_code": f"{rng.randrange(10**6):06d}",
        }

    def new_stay(self, rng: random.Random) -> None:
        self.serial += 1
        arrival = date.today() + timedelta(days=rng.randrange(1, 300))
        self.stays[f"S{self.serial}"] = {
            "stay_id": f"S{self.serial}",
            "first_name": rng.choice(["Ada", "Grace", "Alan", "Edsger"]),
            "email": f"guest{self.serial}@example.org",
            "unit_id": rng.choice(sorted(self.units)),
            "arrival": arrival.isoformat(),
            "departure": (arrival + timedelta(days=rng.randrange(1, 14))).isoformat(),
            "adults": str(rng.randrange(1, 5)),
        }

    @classmethod
    def generate(cls, rng: random.Random, units: int, stays: int) -> Source:
        source = cls()
        for _ in range(units):
            source.new_unit(rng)
        for _ in range(stays):
            source.new_stay(rng)
        return source

    def edit(self, rng: random.Random, changes: int) -> dict[str, int]:
        """``changes`` random edits: add, change or remove units and stays."""
        done = {"add": 0, "change": 0, "remove": 0}
        for _ in range(changes):
            kind = rng.choices(["add", "change", "remove"], weights=[2, 5, 2])[0]
            table = self.units if rng.random() < 0.25 else self.stays
            if kind == "add" or not table:
                self.new_unit(rng) if table is self.units else self.new_stay(rng)
                kind = "add"
            elif kind == "change":
                row = table[rng.choice(sorted(table))]
                if table is self.units:
                    row["name"] = f"Apartment {rng.randrange(10**6)}"
                    row["door_code"] = f"{rng.randrange(10**6):06d}"
                else:
                    row["adults"] = str(rng.randrange(1, 6))
                    row["first_name"] = rng.choice(["Barbara", "Donald", "Ken", "Margaret"])
            else:
                key = rng.choice(sorted(table))
                # A unit still booked stays: removing it would orphan reservations.
                if table is self.units and any(s["unit_id"] == key for s in self.stays.values()):
                    continue
                del table[key]
            done[kind] += 1
        return done

    def write(self, folder: Path) -> Path:
        """Write mapping.yaml and its CSV exports into ``folder``; return the mapping path."""
        folder.mkdir(parents=True, exist_ok=True)
        _write_csv(folder / "units.csv", ["unit_id", "name", "wifi_code", "door_code"], self.units)
        columns = ["stay_id", "first_name", "email", "unit_id", "arrival", "departure", "adults"]
        _write_csv(folder / "stays.csv", columns, self.stays)
        mapping = folder / "mapping.yaml"
        mapping.write_text(MAPPING)
        return mapping


def _write_csv(path: Path, columns: list[str], rows: dict[str, dict[str, str]]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows[key] for key in sorted(rows))


def differences(sandbox: SandboxHandle, batches: dict[Entity, MappedRecords]) -> dict[str, Any]:
    """How the sandbox differs from the source: records missing or stale (lost), records the
    source no longer has but the sandbox still shows active, and ids held twice."""
    held = sandbox.records(ACCOUNT)
    by_key = {(r["entity"], r["id"]): r for r in held}
    expected = {
        (str(entity), row.record_id): json.loads(row.payload)
        for entity, batch in batches.items()
        for row in batch.records.itertuples(index=False)
    }
    lost = sorted(
        f"{e}/{i}"
        for (e, i), payload in expected.items()
        if (e, i) not in by_key or by_key[(e, i)]["resource"] != payload
    )
    gone = {"accommodation": "INACTIVE", "reservation": "CANCELLED"}
    not_retired = sorted(
        f"{e}/{i}"
        for (e, i), record in by_key.items()
        if (e, i) not in expected and record["resource"]["status"] != gone[e]
    )
    duplicated = len(held) - len(by_key)
    return {"lost": lost, "not_retired": not_retired, "duplicated": duplicated}


def fast_retry_settings(
    base_url: str, snapshot: Path, *, max_attempts: int, timeout: float
) -> SyncSettings:
    """Settings of a campaign's in-process runs: production's backoff scaled down to
    milliseconds, a short read timeout (hung requests give up fast), four requests in flight."""
    retry = RetryPolicy(
        max_attempts=max_attempts, base_delay=0.01, max_delay=0.05, max_retry_after=0.05
    )
    base = load_settings(base_url=base_url, snapshot=snapshot, token=TOKEN, env={})
    return SyncSettings(
        client=ClientConfig(base_url=base_url, concurrency=4, retry=retry, read_timeout=timeout),
        tokens=base.tokens,
        snapshot_path=snapshot,
        push=PushOptions(concurrency=4),
    )


def sync_requests(sandbox: SandboxHandle) -> int:
    """Requests the sync webhooks received so far (the admin API's own calls left out)."""
    return sum(
        sum(by_status.values())
        for endpoint, by_status in sandbox.stats()["requests"].items()
        if "/hooks/" in endpoint
    )


def report_summary(name: str, summary: dict[str, Any]) -> None:
    """Print the campaign's figures on one line (visible with -s) and keep them as JSON in
    .pms-sync/reliability/<name>.json: docs/reliability.md quotes them."""
    line = json.dumps(summary, sort_keys=True)
    print(f"\nCAMPAIGN {name} {line}")
    SUMMARY_DIR.mkdir(parents=True, exist_ok=True)
    (SUMMARY_DIR / f"{name}.json").write_text(line + "\n")


class ForkServer:
    """tests/reliability/fork_server.py as a child process: forks warm `pms-sync` processes."""

    def __init__(self, warm_up_mapping: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.fork_server", str(warm_up_mapping)],
            cwd=REPOSITORY,
            env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._read() == {"ready": True}

    def _read(self) -> dict:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"the fork server ended with {self.process.wait()}"
        return json.loads(line)

    def start(
        self, args: list[str], env: dict[str, str], log: Path, stderr: Path | None = None
    ) -> int:
        """Fork a `pms-sync ARGS` child writing stdout to ``log`` and stderr to ``stderr``
        (to ``log`` too when None); its pid."""
        request: dict[str, object] = {"args": args, "env": env, "log": str(log)}
        if stderr is not None:
            request["stderr"] = str(stderr)
        self._write(request)
        return self._read()["pid"]

    def signal(self, number: int) -> None:
        """Signal the running child through the fork server, which has not reaped it."""
        self._write({"signal": number})

    def wait(self) -> int:
        self._write({"wait": True})
        return self._read()["returncode"]

    def _write(self, message: dict[str, object]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

"""Reviewed plans: `pms-sync plan --out` shows masked field differences, `apply` sends exactly
that plan, and refuses it once the snapshot has moved on."""

from __future__ import annotations

import json
import stat
from datetime import date
from pathlib import Path

import pytest

from connector.sandbox.testing import SandboxHandle
from tests.dagster.exports import Export, booking, unit
from tests.safety.cli_runs import document, pms_sync, sync_requests

pytestmark = pytest.mark.slow

UNITS = [unit(1), unit(2), unit(3)]
BOOKINGS = [booking(n, date(2031, 3, 1 + n), unit_number=1 + n % 3) for n in range(6)]


@pytest.fixture
def export(tmp_path: Path) -> Export:
    written = Export(tmp_path / "mappings" / "reviewed", "reviewed")
    written.write(UNITS, BOOKINGS)
    return written


def test_a_plan_file_shows_masked_field_differences_and_apply_sends_exactly_it(
    clean_sandbox: SandboxHandle, export: Export, tmp_path: Path
) -> None:
    state, plan_path = tmp_path / "state", tmp_path / "plan.json"
    assert pms_sync(clean_sandbox, state, "sync", str(export.mapping)).exit_code == 0
    sent = sync_requests(clean_sandbox)
    export.write(
        [unit(1), unit(2, name="Apartment 2 with balcony", wifi_code="new-wifi-secret"), unit(3)],
        BOOKINGS,
    )

    planned = pms_sync(clean_sandbox, state, "plan", str(export.mapping), "--out", str(plan_path))

    assert planned.exit_code == 0, planned.output
    assert "name: Apartment 2 → Apartment 2 with balcony" in planned.stdout
    assert "wifiCode: *** → ***" in planned.stdout
    assert "secret" not in planned.stdout
    plan = json.loads(plan_path.read_text())
    (change,) = plan["changes"]
    assert (change["record_id"], change["action"]) == ("U2", "update")
    assert {"field": "name", "old": "Apartment 2", "new": "Apartment 2 with balcony"} in change[
        "fields"
    ]
    assert "secret" not in json.dumps(plan["changes"])
    assert json.loads(plan["payloads"][0]["payload"])["wifiCode"] == "new-wifi-secret"
    assert stat.S_IMODE(plan_path.stat().st_mode) == 0o600
    assert sync_requests(clean_sandbox) == sent  # planning sends nothing

    export.write(UNITS, BOOKINGS)  # the export moves on; apply sends the reviewed plan anyway
    applied = pms_sync(clean_sandbox, state, "apply", str(plan_path), "--json")

    assert applied.exit_code == 0, applied.output
    assert document(applied)["outcomes"]["acknowledged"] == 1
    assert sync_requests(clean_sandbox) == sent + 1
    (stored,) = [u for u in clean_sandbox.records("demo", "accommodation") if u["id"] == "U2"]
    assert stored["resource"]["name"] == "Apartment 2 with balcony"
    assert stored["resource"]["wifiCode"] == "new-wifi-secret"


def test_a_plan_applied_after_the_snapshot_changed_is_refused(
    clean_sandbox: SandboxHandle, export: Export, tmp_path: Path
) -> None:
    state, plan_path = tmp_path / "state", tmp_path / "plan.json"
    assert pms_sync(clean_sandbox, state, "sync", str(export.mapping)).exit_code == 0
    export.write([unit(1, name="Loft 1"), *UNITS[1:]], BOOKINGS)
    assert pms_sync(clean_sandbox, state, "plan", str(export.mapping), "--out", str(plan_path))
    # Another sync delivers the change (and one more) before the plan is applied.
    export.write([unit(1, name="Loft 1"), unit(2, name="Loft 2"), unit(3)], BOOKINGS)
    assert pms_sync(clean_sandbox, state, "sync", str(export.mapping)).exit_code == 0
    sent = sync_requests(clean_sandbox)

    refused = pms_sync(clean_sandbox, state, "apply", str(plan_path))

    assert refused.exit_code == 1
    assert "changed since the plan was made" in refused.stderr
    assert "Nothing was sent" in refused.stderr
    assert sync_requests(clean_sandbox) == sent


def test_an_edited_plan_file_is_refused(
    clean_sandbox: SandboxHandle, export: Export, tmp_path: Path
) -> None:
    state, plan_path = tmp_path / "state", tmp_path / "plan.json"
    assert pms_sync(clean_sandbox, state, "plan", str(export.mapping), "--out", str(plan_path))
    plan = json.loads(plan_path.read_text())
    plan["payloads"][0]["payload"] = plan["payloads"][0]["payload"].replace("Wien", "Graz")
    plan_path.write_text(json.dumps(plan))

    refused = pms_sync(clean_sandbox, state, "apply", str(plan_path))

    assert refused.exit_code == 1
    assert "was changed after it was written" in refused.stderr
    assert sync_requests(clean_sandbox) == 0

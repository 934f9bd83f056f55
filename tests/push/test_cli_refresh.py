"""`pms-sync plan` and `sync` with the rolling refresh and the reconciliation on the hotel
example, against the sandbox (slow: each CLI run maps the example end to end)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_cli_sync import document, hotel_mapping, run  # noqa: F401 (fixture)

from connector.sandbox.testing import SandboxHandle

pytestmark = pytest.mark.slow


def test_plan_shows_the_refresh_apart_and_sync_heals_units_deleted_at_the_service(
    service: SandboxHandle,
    tmp_path: Path,
    hotel_mapping: Path,  # noqa: F811
) -> None:
    created = document(run(service, tmp_path, "sync", str(hotel_mapping), "--json"))
    # The example's stays are all past (not refreshed by default); its rooms are not.
    deleted = [r["id"] for r in service.records("demo", "accommodation")][:2]
    service.delete_records("demo", "accommodation", deleted)

    plan = run(service, tmp_path, "plan", str(hotel_mapping), "--refresh", "100%", "--json")
    table = run(service, tmp_path, "plan", str(hotel_mapping), "--refresh", "100%")
    healed = run(service, tmp_path, "sync", str(hotel_mapping), "--refresh", "100%", "--json")
    again = run(service, tmp_path, "sync", str(hotel_mapping), "--refresh", "off")

    planned = document(plan)
    assert plan.exit_code == 0 and len(deleted) == 2
    assert planned["counts"]["skip"] == created["counts"]["create"]  # no real change
    assert planned["resend"]["refresh"] == planned["requests"] > 0
    assert planned["resend_policy"]["refresh"]["share"] == 1.0
    assert "refresh" in table.stdout.splitlines()[0]
    assert "re-sends of unchanged records" in table.stdout
    report = document(healed)
    assert healed.exit_code == 0, healed.output
    assert {(d["record_id"], d["kind"]) for d in report["drift"]["sample"]} == {
        (record_id, "changed") for record_id in deleted
    }
    assert (report["drift"]["found"], report["drift"]["healed"], report["drift"]["open"]) == (
        2,
        2,
        0,
    )
    assert report["resend"]["acknowledged"]["refresh"] == planned["resend"]["refresh"]
    stored = {r["id"] for r in service.records("demo", "accommodation")}
    assert set(deleted) <= stored
    assert again.exit_code == 0 and "drift" not in again.stdout


def test_sync_reconcile_within_a_budget_resumes_in_the_next_run(
    service: SandboxHandle,
    tmp_path: Path,
    hotel_mapping: Path,  # noqa: F811
) -> None:
    run(service, tmp_path, "sync", str(hotel_mapping))

    first = run(
        service,
        tmp_path,
        "sync",
        str(hotel_mapping),
        "--reconcile",
        "--max-requests",
        "5",
        "--json",
    )
    second = run(service, tmp_path, "sync", str(hotel_mapping), "--reconcile", "--json")

    assert (first.exit_code, second.exit_code) == (0, 0)
    total = len(service.records())
    assert document(first)["requests"] == 5
    assert document(second)["requests"] == total - 5
    assert document(second)["resend"]["planned"]["reconcile"] == total - 5
    assert json.loads(second.stdout)["status"] == "succeeded"

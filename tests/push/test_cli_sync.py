"""`pms-sync plan` and `pms-sync sync` on the hotel example mapping, against the sandbox.

Each CLI run maps the example end to end, so these tests are few and marked slow."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from connector.cli import main
from connector.sandbox.testing import SandboxHandle
from tests.samples import pinned_hotel


@pytest.fixture
def hotel_mapping(tmp_path: Path) -> Path:
    """A private copy of the hotel example, so a test can edit its export; its stays have all
    ended, so removing a room deactivates it (no guest is staying in it)."""
    return pinned_hotel(tmp_path / "hotel")


def run(
    service: SandboxHandle, tmp_path: Path, *args: str, tokens: dict[str, str] | None = None
) -> Result:
    tokens_file = tmp_path / "tokens.yaml"
    tokens_file.write_text(json.dumps(tokens or {"demo": "demo-token", "hotel-a": "hotel-a-token"}))
    env = {
        "PMS_SYNC_BASE_URL": service.base_url,
        "PMS_SYNC_SNAPSHOT": str(tmp_path / "state" / "snapshot.duckdb"),
        "PMS_SYNC_TOKENS_FILE": str(tokens_file),
        "PMS_SYNC_TOKEN": "",
        "PMS_SYNC_MAX_ATTEMPTS": "2",
        "HOTEL_BER_ACCOUNT": "demo",
        "HOTEL_MUC_ACCOUNT": "hotel-a",
    }
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def document(result: Result) -> dict[str, Any]:
    return json.loads(result.stdout)


@pytest.mark.slow
def test_sync_creates_the_example_plan_then_shows_nothing_to_send_and_only_resends_one(
    service: SandboxHandle, tmp_path: Path, hotel_mapping: Path
) -> None:
    first = run(service, tmp_path, "sync", str(hotel_mapping), "--json")
    plan = run(service, tmp_path, "plan", str(hotel_mapping), "--json")
    some_id = service.records(entity="reservation")[0]["id"]
    before = service.stats()["total"]
    only = run(service, tmp_path, "sync", str(hotel_mapping), "--only", some_id, "--json")

    created = document(first)
    assert first.exit_code == 0, first.output
    assert set(created["counts"]) == {"create", "update", "skip", "deactivate", "cancel"}
    assert set(created["outcomes"]) == {"acknowledged", "dead_lettered", "failed", "pending"}
    assert created["counts"]["create"] == created["outcomes"]["acknowledged"] == created["requests"]
    assert created["counts"]["create"] == len(service.records())
    assert {r["accountId"] for r in service.records()} == {"demo", "hotel-a"}
    assert plan.exit_code == 0
    assert document(plan)["requests"] == 0
    assert document(plan)["counts"]["skip"] == created["counts"]["create"]
    assert (only.exit_code, document(only)["requests"], document(only)["counts"]["update"]) == (
        0,
        1,
        1,
    )
    assert service.stats()["total"] - before == 1


@pytest.mark.slow
def test_a_room_gone_from_the_rooms_export_is_deactivated(
    service: SandboxHandle, tmp_path: Path, hotel_mapping: Path
) -> None:
    run(service, tmp_path, "sync", str(hotel_mapping))
    rooms = hotel_mapping.parent / "data" / "rooms.csv"
    header, first_room, *rest = rooms.read_text(encoding="utf-8").splitlines(keepends=True)
    rooms.write_text(header + "".join(rest), encoding="utf-8")
    hotel, room = first_room.split(",")[:2]

    result = run(service, tmp_path, "sync", str(hotel_mapping), "--json")

    report = document(result)
    assert result.exit_code == 0
    assert (report["counts"]["deactivate"], report["requests"]) == (1, 1)
    stored = {r["id"]: r["resource"] for r in service.records(entity="accommodation")}
    assert stored[f"{hotel}-{room}"]["status"] == "INACTIVE"


@pytest.mark.slow
def test_the_summary_table_and_exit_code_3_when_changes_stay_pending(
    service: SandboxHandle, tmp_path: Path, hotel_mapping: Path
) -> None:
    service.set_faults(error_rate=1.0)

    result = run(service, tmp_path, "sync", str(hotel_mapping))

    assert result.exit_code == 3
    assert result.stdout.splitlines()[0].split()[:3] == ["entity", "create", "update"]
    assert "pending" in result.stdout and "x-request-id" in result.stdout


@pytest.mark.slow
def test_a_refused_token_exits_4_naming_the_account_and_never_the_token(
    service: SandboxHandle, tmp_path: Path, hotel_mapping: Path
) -> None:
    result = run(
        service,
        tmp_path,
        "sync",
        str(hotel_mapping),
        "--json",
        tokens={"demo": "demo-token", "hotel-a": "stale-token-123"},
    )

    report = document(result)
    assert result.exit_code == 4
    assert list(report["stopped_accounts"]) == ["hotel-a"]
    assert "stale-token-123" not in result.output
    assert report["outcomes"]["failed"] == 1
    assert report["outcomes"]["pending"] > 0
    assert {r["accountId"] for r in service.records()} == {"demo"}


@pytest.mark.slow
def test_a_mapping_error_exits_1_with_the_reason_on_stderr(
    service: SandboxHandle, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: broken\ninputs: {}\n")

    result = run(service, tmp_path, "sync", str(broken))

    assert result.exit_code == 1
    assert "error:" in result.stderr and "broken.yaml" in result.stderr


@pytest.mark.slow
def test_a_sync_with_a_request_budget_leaves_the_rest_planned_and_plan_shows_its_eta(
    service: SandboxHandle, tmp_path: Path, hotel_mapping: Path
) -> None:
    budgeted = run(service, tmp_path, "sync", str(hotel_mapping), "--max-requests", "10")
    backlog = run(
        service, tmp_path, "plan", str(hotel_mapping), "--json"
    )  # the local sandbox: no limits
    limited = CliRunner().invoke(
        main,
        ["plan", str(hotel_mapping)],
        env={
            "PMS_SYNC_BASE_URL": service.base_url,
            "PMS_SYNC_SNAPSHOT": str(tmp_path / "state" / "snapshot.duckdb"),
            "PMS_SYNC_RATE_LIMITS": "15/s,5/min",
            "HOTEL_BER_ACCOUNT": "demo",
            "HOTEL_MUC_ACCOUNT": "hotel-a",
        },
        catch_exceptions=False,
    )
    rest = run(service, tmp_path, "sync", str(hotel_mapping), "--json")

    assert budgeted.exit_code == 3, budgeted.output  # incomplete: a backlog is left
    assert "budget reached: " in budgeted.output and "left for the next run" in budgeted.output
    planned = document(backlog)
    assert planned["backlog"]["past"]["eta_s"] is None  # no limit configured
    left = sum(row["requests"] for row in planned["backlog"].values())
    assert left == planned["requests"] > 0
    # 5 a minute: the 30 units after 5 more minutes, all 90 changes after 17.
    assert "unit            30  5.0 min" in limited.output
    assert "past            60  17.0 min" in limited.output
    assert document(rest)["outcomes"]["acknowledged"] == left
    assert document(rest)["requests"] == left  # nothing sent twice


@pytest.mark.slow
def test_a_sync_of_one_account_sends_only_its_records_and_leaves_the_other_account_alone(
    service: SandboxHandle, tmp_path: Path, hotel_mapping: Path
) -> None:
    planned = run(service, tmp_path, "plan", str(hotel_mapping), "--account", "hotel-a", "--json")
    first = run(service, tmp_path, "sync", str(hotel_mapping), "--account", "hotel-a", "--json")
    only_hotel_a = {r["accountId"] for r in service.records()}
    created = len(service.records())
    rest = run(service, tmp_path, "sync", str(hotel_mapping), "--json")
    refused = run(
        service, tmp_path, "plan", str(hotel_mapping), "--account", "demo", "--out", "p.json"
    )

    assert first.exit_code == 0, first.output
    assert only_hotel_a == {"hotel-a"}
    assert document(first)["requests"] == created == document(planned)["requests"] > 0
    # The whole connection next: demo's records are created, hotel-a's are unchanged.
    assert rest.exit_code == 0, rest.output
    assert {r["accountId"] for r in service.records()} == {"demo", "hotel-a"}
    assert document(rest)["counts"]["skip"] == created
    assert refused.exit_code == 2 and "--account" in refused.output

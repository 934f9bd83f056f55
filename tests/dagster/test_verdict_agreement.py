"""The CLI and Dagster come to the verdict of ``connector.pipeline.VERDICTS``: the same export
synced by ``pms-sync sync --json`` and by a Dagster run, against the real sandbox, gives the
verdict's exit code and status word, and the verdict's step failure and check severity."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
from click.testing import CliRunner

from connector.cli import main
from connector.pipeline import RunOutcome, Verdict, verdict_for
from connector.sandbox.testing import SandboxHandle
from pms_sync.resources import ServiceResource, SnapshotResource
from tests.dagster.exports import Export, unit
from tests.dagster.test_safety_rails import check_evaluations, materialize_units

pytestmark = pytest.mark.slow

TOKENS = {"demo": "demo-token", "hotel-a": "hotel-a-token"}


def cli_sync(sandbox: SandboxHandle, export: Export, state: Path, **tokens: str) -> dict:
    """``pms-sync sync --json`` of the export; its JSON document with the process's exit code."""
    tokens_file = state / "tokens.json"
    tokens_file.parent.mkdir(parents=True, exist_ok=True)
    tokens_file.write_text(json.dumps(TOKENS | tokens))
    env = {
        "PMS_SYNC_BASE_URL": sandbox.base_url,
        "PMS_SYNC_SNAPSHOT": str(state / "snapshot.duckdb"),
        "PMS_SYNC_TOKENS_FILE": str(tokens_file),
        "PMS_SYNC_TOKEN": "",
    }
    result = CliRunner().invoke(
        main, ["sync", str(export.mapping), "--json"], env=env, catch_exceptions=False
    )
    document = json.loads(result.stdout)
    assert document["exit_code"] == result.exit_code
    return dict(document)


def assert_agree(verdict: Verdict, cli: dict, dagster: dg.ExecuteInProcessResult) -> None:
    assert (cli["status"], cli["exit_code"]) == (verdict.status, verdict.exit_code)
    assert dagster.success is not verdict.step_fails
    (materialization,) = dagster.asset_materializations_for_node("flats__synced_accommodations")
    assert materialization.metadata["status"].value == verdict.status
    evaluations = check_evaluations(dagster)
    for other in (RunOutcome.AUTHENTICATION, RunOutcome.DEAD_LETTERED, RunOutcome.DISAGREED):
        name = verdict_for(other).check
        assert name is not None
        assert evaluations[name].passed is (other != verdict.outcome)
    if verdict.check is not None:
        assert evaluations[verdict.check].severity == dg.AssetCheckSeverity(str(verdict.severity))


@pytest.fixture
def flats(tmp_path: Path) -> Export:
    return Export(tmp_path / "mappings" / "flats", "flats")


def test_a_record_the_service_refuses_leaves_the_run_incomplete_alike(
    flats: Export, tmp_path: Path, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    # demo-token may not write to hotel-b: the service answers 403, the record is dead-lettered.
    flats.write([unit(1), unit(2, account="hotel-b")], None)

    cli = cli_sync(clean_sandbox, flats, tmp_path / "cli", **{"hotel-b": "demo-token"})
    clean_sandbox.reset()
    dagster = materialize_units(flats.folder.parent, resources)

    assert_agree(verdict_for(RunOutcome.DEAD_LETTERED), cli, dagster)
    assert cli["outcomes"]["dead_lettered"] == 1


def test_a_bad_token_stops_its_account_alike(
    flats: Export,
    tmp_path: Path,
    resources: dict[str, object],
    clean_sandbox: SandboxHandle,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flats.write([unit(1), unit(1, account="hotel-a")], None)
    monkeypatch.setenv("TEST_HOTEL_A_TOKEN", "not-the-token")
    service = ServiceResource(
        base_url=clean_sandbox.base_url,
        token="demo-token",
        account_token_env={"hotel-a": "TEST_HOTEL_A_TOKEN"},
    )

    cli = cli_sync(clean_sandbox, flats, tmp_path / "cli", **{"hotel-a": "not-the-token"})
    clean_sandbox.reset()
    dagster = materialize_units(flats.folder.parent, {**resources, "service": service})

    assert_agree(verdict_for(RunOutcome.AUTHENTICATION), cli, dagster)
    assert list(cli["stopped_accounts"]) == ["hotel-a"]
    assert clean_sandbox.records("hotel-a") == []


def test_a_clean_sync_succeeds_and_an_export_that_lost_half_its_units_is_held_alike(
    flats: Export, tmp_path: Path, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    # The CLI and Dagster share one snapshot: each run is measured against the history of both.
    resources = {
        **resources,
        "snapshot": SnapshotResource(path=str(tmp_path / "cli" / "snapshot.duckdb")),
    }
    flats.write([unit(n) for n in range(1, 11)], None)
    cli = cli_sync(clean_sandbox, flats, tmp_path / "cli")
    flats.write([unit(n) for n in range(1, 12)], None)
    dagster = materialize_units(flats.folder.parent, resources)

    assert_agree(verdict_for(RunOutcome.SUCCEEDED), cli, dagster)
    assert len(clean_sandbox.records("demo", "accommodation")) == 11

    # 6 of 11 units gone, a new one arrives: the export has 45 % fewer rows.
    flats.write([*(unit(n) for n in range(1, 6)), unit(12)], None)
    cli = cli_sync(clean_sandbox, flats, tmp_path / "cli")
    dagster = materialize_units(flats.folder.parent, resources)

    assert_agree(verdict_for(RunOutcome.HELD), cli, dagster)
    assert {held["flag"] for held in cli["awaiting_approval"]} == {"--allow-mass-change"}
    assert {u["resource"]["status"] for u in clean_sandbox.records("demo", "accommodation")} == {
        "ACTIVE"
    }

"""End-to-end runs of a connection's job through Dagster against the real sandbox (slow)."""

from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from connector.sandbox.testing import SandboxHandle
from pms_sync.partitions import range_tags
from pms_sync.resources import IO_MANAGER_KEY, ServiceResource, SyncChecksResource
from pms_sync.storage import MappedRecordsIOManager
from tests.dagster.code_location import code_location
from tests.dagster.exports import Export, booking, unit

pytestmark = pytest.mark.slow


def run(
    defs: dg.Definitions,
    start: str,
    end: str | None = None,
    instance: dg.DagsterInstance | None = None,
) -> dg.ExecuteInProcessResult:
    """One run of the hotel job over the partitions [start, end] (a single-run window)."""
    job = defs.resolve_job_def("hotel_sync")
    window = dg.PartitionKeyRange(start, end or start)
    return job.execute_in_process(tags=range_tags(window), raise_on_error=False, instance=instance)


def metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    """The metadata of the asset's (first) materialization: of a run of one partition."""
    (materialization, *_) = result.asset_materializations_for_node(f"hotel__{asset}")
    return {key: value.value for key, value in materialization.metadata.items()}


def by_partition(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, dict[str, Any]]:
    return {
        str(m.partition): {key: value.value for key, value in m.metadata.items()}
        for m in result.asset_materializations_for_node(f"hotel__{asset}")
    }


def summed(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    """The counts of every partition of the run added up (text: the first partition's)."""
    total: dict[str, Any] = {}
    for values in by_partition(result, asset).values():
        for key, value in values.items():
            if isinstance(value, int) and not key.startswith("run_"):
                total[key] = total.get(key, 0) + value
            else:
                total.setdefault(key, value)
    return total


def checks(result: dg.ExecuteInProcessResult) -> dict[tuple[str, str], bool]:
    """Per check: whether it passed, on every partition it was evaluated for."""
    passed: dict[tuple[str, str], bool] = {}
    for event in result.all_events:
        if event.event_type_value == "ASSET_CHECK_EVALUATION":
            check = event.event_specific_data
            key = (check.asset_key.path[-1], check.check_name)
            passed[key] = passed.get(key, True) and check.passed
    return passed


def sync_requests(sandbox: SandboxHandle) -> int:
    """Requests the sync webhooks received (the admin API's own calls left out)."""
    return sum(
        sum(by_status.values())
        for endpoint, by_status in sandbox.stats()["requests"].items()
        if "_sandbox" not in endpoint
    )


def stays(sandbox: SandboxHandle, account: str = "demo") -> set[str]:
    return {record["id"] for record in sandbox.records(account, "reservation")}


@pytest.fixture
def hotel(tmp_path: Path) -> Export:
    return Export(tmp_path / "mappings" / "hotel", "hotel")


MONTHS = (3, 4, 5, 6)
UNITS = [unit(1), unit(2), unit(3)]
BOOKINGS = [booking(i, date(2025, MONTHS[i % 4], 1 + i), unit_number=1 + i % 3) for i in range(12)]


def test_full_sync_delivers_everything_and_a_second_run_sends_no_request(
    hotel: Export, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    hotel.write(UNITS, BOOKINGS)
    defs = code_location(hotel.folder.parent, resources)

    first = run(defs, "2025-01", "2025-12")

    assert first.success
    assert len(clean_sandbox.records("demo", "accommodation")) == 3
    assert stays(clean_sandbox) == {f"B{i}" for i in range(12)}
    units, stays_sent = (
        metadata(first, "synced_accommodations"),
        summed(first, "synced_reservations"),
    )
    assert (units["create"], units["acknowledged"], units["requests"]) == (3, 3, 3)
    assert (stays_sent["create"], stays_sent["acknowledged"]) == (12, 12)
    for numeric in (
        "update",
        "skip",
        "deactivate",
        "cancel",
        "dead_lettered",
        "pending",
        "run_duration_s",
        "run_records_per_second",
    ):
        assert isinstance(stays_sent[numeric], int | float)
    assert all(checks(first).values())
    sent = sync_requests(clean_sandbox)

    second = run(defs, "2025-01", "2025-12")

    assert second.success
    assert sync_requests(clean_sandbox) == sent
    assert metadata(second, "synced_accommodations")["skip"] == 3
    assert (
        summed(second, "synced_reservations")["skip"],
        summed(second, "synced_reservations")["requests"],
    ) == (12, 0)
    # The second mapping compared the source fingerprints the first run kept: every record's
    # rows are unchanged and the service holds what they map to, so none is mapped again.
    assert metadata(first, "mapped_reservations")["run_validated_before"] == 0
    assert (
        metadata(first, "mapped_reservations")["run_mapped"],
        metadata(first, "mapped_reservations")["run_carried"],
    ) == (12, 0)
    assert (
        metadata(second, "mapped_accommodations")["mapped"],
        metadata(second, "mapped_accommodations")["carried"],
    ) == (0, 3)
    assert (
        metadata(second, "mapped_reservations")["run_mapped"],
        metadata(second, "mapped_reservations")["run_carried"],
    ) == (0, 12)
    assert metadata(second, "mapped_reservations")["run_validated_before"] == 0


def test_a_changed_unit_is_sent_as_one_update_with_secrets_masked_in_the_sample(
    hotel: Export, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    hotel.write(UNITS, BOOKINGS)
    defs = code_location(hotel.folder.parent, resources)
    assert run(defs, "2025-03").success
    sent = sync_requests(clean_sandbox)

    hotel.write([unit(1), unit(2, name="Apartment 2 with balcony"), unit(3)], BOOKINGS)
    result = run(defs, "2025-03")

    assert result.success
    units = metadata(result, "synced_accommodations")
    assert (units["update"], units["skip"], units["requests"]) == (1, 2, 1)
    assert sync_requests(clean_sandbox) == sent + 1
    names = {r["id"]: r["resource"]["name"] for r in clean_sandbox.records("demo", "accommodation")}
    assert names["U2"] == "Apartment 2 with balcony"
    sample = units["changes_sample"]
    assert "U2" in sample and "wifi-secret-2" not in sample and "***" in sample


def test_each_partition_of_a_three_month_backfill_pushes_only_its_own_month(
    hotel: Export, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    hotel.write(UNITS, BOOKINGS)
    defs = code_location(hotel.folder.parent, resources)
    by_month = {m: {f"B{i}" for i in range(12) if MONTHS[i % 4] == m} for m in MONTHS}

    delivered: set[str] = set()
    for month in (3, 4, 5):
        result = run(defs, f"2025-{month:02d}")
        assert result.success
        assert stays(clean_sandbox) - delivered == by_month[month]
        delivered |= by_month[month]
        assert metadata(result, "synced_reservations")["create"] == len(by_month[month])
    assert not stays(clean_sandbox) & by_month[6]


def test_a_single_run_backfill_records_every_partition_and_leaves_other_months_alone(
    hotel: Export, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    hotel.write(UNITS, BOOKINGS)
    defs = code_location(hotel.folder.parent, resources)

    result = run(defs, "2025-03", "2025-05")

    assert result.success
    partitions = {
        m.partition for m in result.asset_materializations_for_node("hotel__synced_reservations")
    }
    assert partitions == {"2025-03", "2025-04", "2025-05"}
    assert stays(clean_sandbox) == {f"B{i}" for i in range(12) if MONTHS[i % 4] != 6}


def test_each_month_of_a_single_run_backfill_carries_its_own_counts_and_check_results(
    hotel: Export, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    hotel.write(UNITS, [*BOOKINGS, booking(99, date(2025, 5, 20), adults="-1")])
    resources = {**resources, "sync_checks": SyncChecksResource(max_quarantine_share=0.5)}
    defs = code_location(hotel.folder.parent, resources)
    instance = dg.DagsterInstance.ephemeral()

    result = run(defs, "2025-01", "2025-12", instance)

    assert result.success
    months = {f"2025-{m:02d}": sum(MONTHS[i % 4] == m for i in range(12)) for m in range(1, 13)}
    synced = by_partition(result, "synced_reservations")
    mapped = by_partition(result, "mapped_reservations")
    assert {month: values["create"] for month, values in synced.items()} == months
    assert {month: values["acknowledged"] for month, values in synced.items()} == months
    assert {month: values["records"] for month, values in mapped.items()} == months
    assert {m: v["quarantined_rows"] for m, v in mapped.items() if v["quarantined_rows"]} == {
        "2025-05": 1
    }
    assert synced["2025-01"]["requests"] == 0 and synced["2025-03"]["requests"] == months["2025-03"]
    assert synced["2025-03"]["window"] == "2025-03-01 .. 2025-04-01"
    assert {values["run_requests"] for values in synced.values()} == {12}
    evaluations = [
        event.event_specific_data
        for event in result.all_events
        if event.event_type_value == "ASSET_CHECK_EVALUATION"
        and event.event_specific_data.asset_key.path[-1] == "synced_reservations"
    ]
    assert {(e.check_name, e.partition) for e in evaluations} == {
        (check, month)
        for check in (
            "no_new_dead_letters",
            "accounts_authenticated",
            "service_answers_agree",
            "count_anomalies",
            "drift_healed",
            "upcoming_arrivals_sent",
        )
        for month in months
    }
    # Run again: each check points at the materialization of its month by this run.
    result = run(defs, "2025-01", "2025-12", instance)
    evaluations = [
        event.event_specific_data
        for event in result.all_events
        if event.event_type_value == "ASSET_CHECK_EVALUATION"
        and event.event_specific_data.asset_key.path[-1] == "synced_reservations"
    ]
    assert len(evaluations) == 6 * len(months)
    materialized = {
        record.partition_key: record.storage_id
        for record in instance.fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=dg.AssetKey(["hotel", "synced_reservations"]), asset_partitions=[*months]
            ),
            limit=100,
        ).records
        if record.run_id == result.run_id
    }
    assert len(materialized) == len(months)
    for evaluation in evaluations:
        target = evaluation.target_materialization_data
        assert target is not None and target.run_id == result.run_id
        assert target.storage_id == materialized[evaluation.partition]
    quarantine = {
        e.partition: e.passed
        for e in (event.event_specific_data for event in result.all_events)
        if getattr(e, "check_name", None) == "quarantine_below_threshold" and e.partition
    }
    assert quarantine == dict.fromkeys(months, True)


def test_count_anomalies_compares_a_month_with_its_own_history(
    hotel: Export, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    many = [booking(i, date(2025, 3 if i < 30 else 4, 1 + i % 28)) for i in range(33)]
    hotel.write(UNITS, many)
    defs = code_location(hotel.folder.parent, resources)
    instance = dg.DagsterInstance.ephemeral()  # the history lives in the instance's event log
    for _ in range(2):  # March holds 30 stays, April 3
        assert run(defs, "2025-03", "2025-04", instance).success

    april = run(defs, "2025-04", instance=instance)

    # Three stays are April's usual count, not a drop against the 33 of the two months.
    assert checks(april)[("synced_reservations", "count_anomalies")]
    hotel.write(UNITS, many[:32])  # one of April's stays left the export
    dropped = run(defs, "2025-04", instance=instance)
    (anomaly,) = [
        e.event_specific_data
        for e in dropped.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
        and e.event_specific_data.check_name == "count_anomalies"
        and e.event_specific_data.asset_key.path[-1] == "synced_reservations"
    ]
    assert (anomaly.partition, anomaly.passed) == ("2025-04", False)
    assert "2 rows extracted, -33% against the median 3" in anomaly.description


def test_reconciling_a_partition_cancels_missing_future_stays_only_in_its_month(
    hotel: Export, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    future = [booking(n, date(2027, month, 10)) for n, month in ((1, 3), (2, 4), (3, 5))]
    hotel.write(UNITS, future, reservations_on_missing="cancel_future")
    defs = code_location(hotel.folder.parent, resources)
    assert run(defs, "2027-03", "2027-05").success

    # March's and April's stays leave the export; the run covers April only, which now holds
    # no stay at all (the account is known from the units export).
    hotel.write(UNITS, future[2:], reservations_on_missing="cancel_future")
    # One of three known stays cancelled: fewer than the guard's min_records, no approval.
    defs = code_location(hotel.folder.parent, resources)
    result = run(defs, "2027-04")

    assert result.success
    assert metadata(result, "synced_reservations")["cancel"] == 1
    status = {
        r["id"]: r["resource"]["status"] for r in clean_sandbox.records("demo", "reservation")
    }
    assert status == {"B1": "CONFIRMED", "B2": "CANCELLED", "B3": "CONFIRMED"}


def test_a_partition_keeps_a_stay_that_broke_or_moved_and_cancels_only_what_left(
    hotel: Export, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    april = [booking(n, date(2027, 4, 2 + n)) for n in (1, 2, 3, 4)]
    hotel.write(UNITS, april, reservations_on_missing="cancel_future")
    defs = code_location(hotel.folder.parent, resources)
    assert run(defs, "2027-04").success

    hotel.write(
        UNITS,
        [
            booking(1, date(2027, 5, 3)),  # moved to May: May's business, not a cancellation
            booking(2, date(2027, 4, 4), adults="-1"),  # broken: kept as acknowledged
            april[3],
        ],  # booking 3 left the export
        reservations_on_missing="cancel_future",
    )
    resources = {
        **resources,
        # One bad row in four is above the blocking check's 1 %: this run accepts it (one
        # cancellation in four is fewer than the guard's min_records: no approval needed).
        "sync_checks": SyncChecksResource(max_quarantine_share=0.5),
    }
    result = run(code_location(hotel.folder.parent, resources), "2027-04")

    assert result.success
    synced = metadata(result, "synced_reservations")
    assert (synced["cancel"], synced["kept_quarantined"], synced["quarantined_records"]) == (
        1,
        1,
        1,
    )
    assert (synced["disagreements"], synced["unconfirmed"]) == (0, 0)
    assert checks(result)[("synced_reservations", "service_answers_agree")]
    status = {
        r["id"]: r["resource"]["status"] for r in clean_sandbox.records("demo", "reservation")
    }
    assert status == {"B1": "CONFIRMED", "B2": "CONFIRMED", "B3": "CANCELLED", "B4": "CONFIRMED"}


def test_an_empty_units_export_fails_its_sync_step_as_unusable_and_sends_nothing(
    hotel: Export, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    hotel.write(UNITS, None)
    defs = code_location(hotel.folder.parent, resources)
    assert defs.resolve_job_def("hotel_sync").execute_in_process(raise_on_error=False).success
    sent = sync_requests(clean_sandbox)
    hotel.write([], None)

    result = defs.resolve_job_def("hotel_sync").execute_in_process(raise_on_error=False)

    assert not result.success
    assert metadata(result, "synced_accommodations")["unusable"] == (
        "the export has no accommodation rows"
    )
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert "nothing usable in the export" in str(failure.event_specific_data.error)
    assert sync_requests(clean_sandbox) == sent
    assert {u["resource"]["status"] for u in clean_sandbox.records("demo", "accommodation")} == {
        "ACTIVE"
    }


def test_blocking_check_stops_the_push_of_a_mapping_with_five_percent_bad_rows(
    hotel: Export, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    bookings = [booking(i, date(2025, 3, 1 + i)) for i in range(19)]
    bookings.append(booking(19, date(2025, 3, 25), adults="two"))  # 1 of 20 rows invalid
    hotel.write(UNITS, bookings)
    defs = code_location(hotel.folder.parent, resources)

    result = run(defs, "2025-03")

    assert not result.success
    assert checks(result)[("mapped_reservations", "quarantine_below_threshold")] is False
    assert not result.asset_materializations_for_node("hotel__synced_reservations")
    assert stays(clean_sandbox) == set()
    assert len(clean_sandbox.records("demo", "accommodation")) == 3  # their own check passed
    mapped = metadata(result, "mapped_reservations")
    assert (mapped["quarantined_rows"], mapped["records"]) == (1, 19)


def test_a_refused_record_fails_the_dead_letter_check_but_not_the_run(
    hotel: Export, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    # demo-token may not write to hotel-b: the service answers 403, the record is dead-lettered.
    hotel.write([unit(1), unit(2, account="hotel-b")], [booking(1, date(2025, 3, 5))])
    defs = code_location(hotel.folder.parent, resources)

    result = run(defs, "2025-03")

    assert result.success
    assert checks(result)[("synced_accommodations", "no_new_dead_letters")] is False
    units = metadata(result, "synced_accommodations")
    assert (units["acknowledged"], units["dead_lettered"]) == (1, 1)
    assert "403" in units["dead_letter_top_reasons"] and units["failed_request_ids"]
    # The failed check says which record and why, not only how many.
    (check,) = (
        event.event_specific_data
        for event in result.all_events
        if event.event_type_value == "ASSET_CHECK_EVALUATION"
        and event.event_specific_data.check_name == "no_new_dead_letters"
        and event.event_specific_data.asset_key.path[-1] == "synced_accommodations"
    )
    assert check.description.startswith("1 record(s) refused by the service: hotel-b/")
    assert "HTTP 403" in check.description and "x-request-id" in check.description
    assert "hotel-b" in check.metadata["dead_letters"].value


def test_one_account_with_a_bad_token_fails_the_run_by_name_and_the_other_account_still_syncs(
    hotel: Export,
    resources: dict[str, object],
    clean_sandbox: SandboxHandle,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hotel.write(
        [unit(1), unit(2), unit(1, account="hotel-a"), unit(2, account="hotel-a")],
        [booking(1, date(2025, 3, 5)), booking(2, date(2025, 3, 6), account="hotel-a")],
    )
    monkeypatch.setenv("TEST_HOTEL_A_TOKEN", "not-the-token")
    service = ServiceResource(
        base_url=clean_sandbox.base_url,
        token="demo-token",
        account_token_env={"hotel-a": "TEST_HOTEL_A_TOKEN"},
    )
    defs = code_location(hotel.folder.parent, {**resources, "service": service})

    result = run(defs, "2025-03")

    assert not result.success
    assert stays(clean_sandbox, "demo") == {"B1"}
    assert len(clean_sandbox.records("demo", "accommodation")) == 2
    assert clean_sandbox.records("hotel-a") == []
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failure.step_key == "hotel__synced_reservations"
    assert "'hotel-a'" in failure.event_specific_data.error.message
    assert checks(result)[("synced_accommodations", "accounts_authenticated")] is False
    assert "not-the-token" not in str(metadata(result, "synced_reservations"))

    monkeypatch.setenv("TEST_HOTEL_A_TOKEN", "hotel-a-token")
    assert run(defs, "2025-03").success
    assert stays(clean_sandbox, "hotel-a") == {"B2"}


def test_a_step_retry_after_a_transient_fault_sends_only_what_is_still_pending(
    hotel: Export,
    resources: dict[str, object],
    clean_sandbox: SandboxHandle,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The production policy waits 30 s and more between attempts; the behaviour is the same.
    monkeypatch.setattr("pms_sync.assets.SYNC_RETRY", dg.RetryPolicy(max_retries=1))
    service = ServiceResource(
        base_url=clean_sandbox.base_url, token="demo-token", max_attempts=1, concurrency=1
    )
    hotel.write(UNITS, [booking(1, date(2025, 3, 5))])
    defs = code_location(hotel.folder.parent, {**resources, "service": service})
    clean_sandbox.set_faults(fail_next=1, fail_next_status=503)

    result = run(defs, "2025-03")

    assert result.success
    retries = [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    assert [e.step_key for e in retries] == ["hotel__synced_accommodations"]
    (first, second) = result.asset_materializations_for_node("hotel__synced_accommodations")
    assert (first.metadata["acknowledged"].value, first.metadata["pending"].value) == (2, 1)
    assert (second.metadata["skip"].value, second.metadata["requests"].value) == (2, 1)
    assert len(clean_sandbox.records("demo", "accommodation")) == 3
    assert sync_requests(clean_sandbox) == 3 + 1 + 1  # 3 units, 1 re-sent, 1 reservation


def test_a_units_only_connection_has_no_partitions_and_its_nightly_run_syncs_the_units(
    hotel: Export, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    hotel.write(UNITS, None)
    defs = code_location(hotel.folder.parent, resources)
    assert {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()} == {
        "hotel/pms/units",
        "hotel/mapped_accommodations",
        "hotel/synced_accommodations",
        "hotel/accounts",
    }
    tick = datetime(2026, 5, 14, 2, 0, tzinfo=UTC)
    with dg.build_schedule_context(scheduled_execution_time=tick) as context:
        (request,) = defs.resolve_schedule_def("hotel_nightly").evaluate_tick(context).run_requests

    result = defs.resolve_job_def("hotel_sync").execute_in_process(tags=request.tags)

    assert result.success
    assert len(clean_sandbox.records("demo", "accommodation")) == 3


def test_a_budgeted_run_warns_of_the_upcoming_arrivals_it_left_unsent_and_shows_the_backlog(
    hotel: Export, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    today = date.today()
    arrivals = [booking(i, date.fromordinal(today.toordinal() + 1 + i)) for i in range(6)]
    hotel.write(UNITS, arrivals)
    # The budget is per sync step: the units' step sends its 3, the reservations' step 4 of 6.
    service = ServiceResource(base_url=clean_sandbox.base_url, token="demo-token", max_requests=4)
    defs = code_location(hotel.folder.parent, {**resources, "service": service})
    months = sorted({row["checkin"][:7] for row in arrivals})

    result = run(defs, months[0], months[-1])

    assert result.success  # a budget leaves work for the next run; it is not a failure
    assert checks(result)[("synced_reservations", "upcoming_arrivals_sent")] is False
    synced = summed(result, "synced_reservations")
    assert (synced["acknowledged"], synced["deferred"], synced["unsent_upcoming"]) == (4, 2, 2)
    assert "| upcoming | 2 |" in metadata(result, "synced_reservations")["run_backlog"]
    assert len(stays(clean_sandbox)) == 4


def test_a_file_landed_in_the_drop_folder_is_what_the_run_syncs_and_is_archived_with_its_run_id(
    hotel: Export, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    soon = [date.fromordinal(date.today().toordinal() + days) for days in (5, 6, 7)]
    hotel.write(UNITS, [booking(1, soon[0])], extra="  drop_folder: inbox\n")
    inbox = hotel.folder / "inbox"
    inbox.mkdir()
    landed = Export(inbox, "hotel")  # writes units.csv and bookings.csv into the inbox
    # The sensor's run covers the nightly window (last month to twelve ahead).
    landed.write(UNITS, [booking(7, soon[1]), booking(8, soon[2])])
    landed.mapping.unlink()
    (inbox / "units.csv").unlink()
    defs = code_location(hotel.folder.parent, resources)
    instance = dg.DagsterInstance.ephemeral()
    with dg.build_sensor_context(cursor=None, definitions=defs, instance=instance) as context:
        (request,) = (
            defs.resolve_sensor_def("hotel_drop_folder").evaluate_tick(context).run_requests
        )

    result = defs.resolve_job_def("hotel_sync").execute_in_process(
        run_config=request.run_config, tags=request.tags, instance=instance
    )

    assert result.success
    assert stays(clean_sandbox) == {"B7", "B8"}  # the landed bookings, not the mapping's own
    (event,) = instance.get_records_for_run(
        result.run_id, of_type=dg.DagsterEventType.RUN_SUCCESS
    ).records
    archive = defs.resolve_sensor_def("hotel_drop_folder_archive")
    with dg.build_run_status_sensor_context(
        sensor_name=archive.name,
        dagster_event=event.event_log_entry.dagster_event,
        dagster_instance=instance,
        dagster_run=result.dagster_run,
    ) as context:
        archive(context)
    assert not (inbox / "bookings.csv").exists()
    assert (inbox / "archive" / result.run_id / "bookings.csv").exists()


def test_the_reservations_alone_sync_on_an_instance_that_never_synced_the_units(
    hotel: Export, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    hotel.write(UNITS, [booking(1, date(2025, 3, 5))])
    defs = code_location(hotel.folder.parent, resources)
    assert run(defs, "2025-03").success  # the service knows the units

    fresh = {**resources, IO_MANAGER_KEY: MappedRecordsIOManager(base_dir=str(hotel.folder / "io"))}
    hotel.write(UNITS, [booking(1, date(2025, 3, 5)), booking(2, date(2025, 3, 9))])
    defs = code_location(hotel.folder.parent, fresh)
    selection = [
        dg.AssetKey(["hotel", "mapped_reservations"]),
        dg.AssetKey(["hotel", "synced_reservations"]),
    ]
    instance = dg.DagsterInstance.ephemeral()
    result = defs.resolve_job_def("hotel_sync").execute_in_process(
        tags=range_tags(dg.PartitionKeyRange("2025-03", "2025-03")),
        asset_selection=selection,
        raise_on_error=False,
        instance=instance,
    )

    assert result.success
    assert stays(clean_sandbox) == {"B1", "B2"}
    assert any(
        "the units were never synced through Dagster" in entry.user_message
        for entry in instance.all_logs(result.run_id)
    )


def test_a_step_that_keeps_failing_stops_retrying_once_its_retry_window_is_over(
    hotel: Export, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    service = ServiceResource(
        base_url=clean_sandbox.base_url, token="demo-token", max_attempts=1, retry_window_s=0
    )
    hotel.write(UNITS, None)
    defs = code_location(hotel.folder.parent, {**resources, "service": service})
    clean_sandbox.set_faults(fail_next=1, fail_next_status=503)

    result = defs.resolve_job_def("hotel_sync").execute_in_process(raise_on_error=False)

    assert not result.success
    assert not [e for e in result.all_events if e.event_type_value == "STEP_UP_FOR_RETRY"]
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert "not retried any more" in failure.event_specific_data.error.message


ASSETS = (
    "mapped_accommodations",
    "mapped_reservations",
    "synced_accommodations",
    "synced_reservations",
)


def test_every_metadata_key_a_run_shows_is_documented(
    hotel: Export, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    # A refused record (403 for hotel-b), a quarantined row and a range of months: most keys.
    hotel.write(
        [unit(1), unit(2), unit(3), unit(4, account="hotel-b")],
        [*BOOKINGS, booking(99, date(2025, 5, 20), adults="-1")],
    )
    resources = {**resources, "sync_checks": SyncChecksResource(max_quarantine_share=0.5)}
    result = run(code_location(hotel.folder.parent, resources), "2025-03", "2025-05")
    guide = (Path(__file__).parents[2] / "docs" / "dagster.md").read_text()

    shown = {
        key
        for node in ASSETS
        for materialization in result.asset_materializations_for_node(f"hotel__{node}")
        for key in materialization.metadata
    }
    shown |= {
        key
        for event in result.all_events
        if event.event_type_value == "ASSET_CHECK_EVALUATION"
        for key in event.event_specific_data.metadata
    }

    assert {"dead_letter_top_reasons", "quarantine_sample", "anomaly_counts"} <= shown
    assert sorted(key for key in shown if f"`{key}`" not in guide) == []


def test_a_unit_with_stays_is_held_under_allow_mass_change_and_released_by_its_own_approval(
    hotel: Export, resources: dict[str, object], clean_sandbox: SandboxHandle
) -> None:
    stay = [booking(1, date(2027, 3, 10), unit_number=3)]
    hotel.write(UNITS, stay)
    assert run(code_location(hotel.folder.parent, resources), "2027-03").success
    # Unit 3 leaves the export, its guest still arrives in March; a new guest books unit 1.
    hotel.write(UNITS[:2], [*stay, booking(2, date(2027, 3, 20), unit_number=1)])
    volume_only = {**resources, "sync_checks": SyncChecksResource(allow_mass_change=True)}

    held = run(code_location(hotel.folder.parent, volume_only), "2027-03")

    assert not held.success
    # The run fails at its end: the new booking was sent before.
    assert stays(clean_sandbox) == {"B1", "B2"}
    failure = next(e for e in held.all_events if e.event_type_value == "STEP_FAILURE")
    assert failure.step_key == "hotel__synced_reservations"
    message = failure.event_specific_data.error.message
    assert "guests still stay in U3" in message
    assert "resources.sync_checks.config.allow_deactivation_with_stays: true" in message
    assert "awaiting_approval" in metadata(held, "synced_accommodations")
    status = {
        r["id"]: r["resource"]["status"] for r in clean_sandbox.records("demo", "accommodation")
    }
    assert status["U3"] == "ACTIVE"

    stays_approved = {
        **resources,
        "sync_checks": SyncChecksResource(allow_deactivation_with_stays=True),
    }
    released = run(code_location(hotel.folder.parent, stays_approved), "2027-03")

    assert released.success
    status = {
        r["id"]: r["resource"]["status"] for r in clean_sandbox.records("demo", "accommodation")
    }
    assert status["U3"] == "INACTIVE"

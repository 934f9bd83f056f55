"""Dagster: a connection whose mapping declares links, events and a webhooks file gets the
assets ``guest_links`` (after the synced reservations), ``webhooks`` and ``service_events``,
and a sensor that materializes the events the receiver stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import httpx
import pandas as pd
import pytest

from connector.sandbox.testing import SandboxHandle
from pms_sync.partitions import nightly_tags, reservation_partitions
from pms_sync.resources import (
    IO_MANAGER_KEY,
    OpenApiResource,
    ServiceResource,
    SnapshotResource,
    SourcesResource,
    SyncChecksResource,
)
from pms_sync.storage import MappedRecordsIOManager
from tests.dagster.code_location import code_location, component
from tests.loop.loop_samples import (
    RECEIVER_SECRET,
    arrivals,
    run_command,
    running_receiver,
    write_connection,
)

EXTRA = """\
links:
  destination: {file: out/links.parquet}
events:
  destination: {file: out/events.csv}
webhooks: webhooks.yaml
"""
HOOKS = """\
webhooks:
  - name: arrivals
    event: reservationCreated
    url: http://127.0.0.1:9/events/hotel
"""


def resources(sandbox: SandboxHandle, state: Path) -> dict[str, object]:
    open_api = OpenApiResource(client_id="demo-client", client_secret="demo-secret")
    return {
        "open_api": open_api,
        "service": ServiceResource(
            base_url=sandbox.base_url, token="demo-token", open_api=open_api
        ),
        "snapshot": SnapshotResource(path=str(state / "snapshot.duckdb"), lock_timeout=10),
        "sources": SourcesResource(),
        "sync_checks": SyncChecksResource(),
        IO_MANAGER_KEY: MappedRecordsIOManager(base_dir=str(state / "io")),
    }


def connection(tmp_path: Path, bookings: list[dict]) -> Path:
    folder = tmp_path / "mappings" / "hotel"
    write_connection(folder, bookings, EXTRA)
    (folder / "webhooks.yaml").write_text(HOOKS)
    return folder.parent


def metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    (materialization, *_) = result.asset_materializations_for_node(f"hotel__{asset}")
    return {key: value.value for key, value in materialization.metadata.items()}


def test_the_loop_assets_exist_only_where_the_mapping_declares_them(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    folder = connection(tmp_path, arrivals([1]))
    write_connection(tmp_path / "mappings" / "plain", arrivals([1]), name="plain")

    defs = code_location(folder, resources(clean_sandbox, tmp_path))

    graph = defs.resolve_asset_graph()
    keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    assert {"hotel/guest_links", "hotel/webhooks", "hotel/service_events"} <= keys
    assert not {
        k
        for k in keys
        if k.startswith("plain/")
        and k.split("/")[1] in ("guest_links", "webhooks", "service_events")
    }
    links = graph.get(dg.AssetKey(["hotel", "guest_links"]))
    assert links.parent_keys == {dg.AssetKey(["hotel", "synced_reservations"])}
    assert defs.resolve_sensor_def("hotel_service_events") is not None
    assert defs.resolve_job_def("hotel_events") is not None


@pytest.mark.slow
def test_the_nightly_job_applies_the_webhooks_and_writes_the_links_back(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    folder = connection(tmp_path, arrivals([1, 2, 40]))
    defs = code_location(folder, resources(clean_sandbox, tmp_path))
    partitions = reservation_partitions("2025-01", "Europe/Vienna")

    result = defs.resolve_job_def("hotel_sync").execute_in_process(
        tags=nightly_tags(partitions), raise_on_error=False
    )

    assert result.success
    links = metadata(result, "guest_links")
    assert (links["fetched"], links["written"], links["pending"]) == (2, 2, 0)
    written = pd.read_parquet(folder / "hotel" / "out" / "links.parquet")
    assert written["reservation_id"].tolist() == ["B0", "B1"]
    hooks = metadata(result, "webhooks")
    assert (hooks["created"], hooks["unchanged"]) == (1, 0)


def post_events(store: Path, *numbers: int) -> None:
    with running_receiver(store) as receiver:
        for n in numbers:
            httpx.post(
                f"{receiver.base_url}/events/hotel",
                json={
                    "accountId": "demo",
                    "event": "guestLinkOpenedCheckIn",
                    "resource": {"externalId": f"B{n}"},
                },
                headers={"X-Receiver-Secret": RECEIVER_SECRET},
            ).raise_for_status()


def test_the_sensor_materializes_new_events_once_and_writes_them_back(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    folder = connection(tmp_path, arrivals([1]))
    given = resources(clean_sandbox, tmp_path)
    defs = code_location(folder, given)
    sensor = defs.resolve_sensor_def("hotel_service_events")
    instance = dg.DagsterInstance.ephemeral()
    post_events(tmp_path / "events.duckdb", 1, 2)

    snapshot = {"snapshot": given["snapshot"]}
    tick = sensor(dg.build_sensor_context(instance=instance, resources=snapshot))
    (request,) = tick.run_requests
    result = defs.resolve_job_def("hotel_events").execute_in_process(
        instance=instance, tags=request.tags
    )
    rerun = defs.resolve_job_def("hotel_events").execute_in_process(instance=instance)
    quiet = sensor(
        dg.build_sensor_context(instance=instance, cursor=tick.cursor, resources=snapshot)
    )

    found = metadata(result, "service_events")
    assert (found["received"], found["upto_seq"], found["written"]) == (2, 2, 2)
    assert "guestLinkOpenedCheckIn" in found["by_event"]
    written = pd.read_csv(folder / "hotel" / "out" / "events.csv")
    assert sorted(written["event_key"]) == sorted(set(written["event_key"]))
    assert len(written) == 2
    assert isinstance(quiet, dg.SkipReason)
    assert (
        metadata(rerun, "service_events")["received"],
        len(pd.read_csv(folder / "hotel" / "out" / "events.csv")),
    ) == (0, 2)


def test_the_command_and_the_asset_share_what_each_destination_holds(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    folder = connection(tmp_path, arrivals([1]))
    given = resources(clean_sandbox, tmp_path)
    defs = code_location(folder, given)
    sensor = defs.resolve_sensor_def("hotel_service_events")
    job = defs.resolve_job_def("hotel_events")
    instance = dg.DagsterInstance.ephemeral()
    store = tmp_path / "events.duckdb"
    command = ("events", "write", str(folder / "hotel" / "mapping.yaml"))
    snapshot = ("--snapshot", str(tmp_path / "snapshot.duckdb"))  # the store lies beside it
    post_events(store, 1, 2)

    by_cron = run_command(*command, *snapshot)
    after_cron = job.execute_in_process(instance=instance)
    post_events(store, 3)
    tick = sensor(
        dg.build_sensor_context(instance=instance, resources={"snapshot": given["snapshot"]})
    )
    by_sensor = job.execute_in_process(instance=instance, tags=tick.run_requests[0].tags)
    after_sensor = run_command(*command, *snapshot)

    assert (by_cron[0], by_cron[1]["written"], by_cron[1]["upto_seq"]) == (0, 2, 2)
    quiet = metadata(after_cron, "service_events")
    assert (quiet["received"], quiet["written"], quiet["destination"]) == (
        0,
        0,
        "nothing new to write",
    )
    found = metadata(by_sensor, "service_events")
    # The file is rewritten with every event; the one new since the command's write.
    assert (found["received"], found["after_seq"], found["upto_seq"]) == (1, 2, 3)
    assert found["written"] == 3
    assert (after_sensor[0], after_sensor[1]["received"], after_sensor[1]["written"]) == (0, 0, 0)
    written = pd.read_csv(folder / "hotel" / "out" / "events.csv")
    assert sorted(written["seq"]) == [1, 2, 3]


def test_a_destination_that_cannot_be_written_fails_the_run_and_keeps_its_events(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    folder = connection(tmp_path, arrivals([1]))
    job = code_location(folder, resources(clean_sandbox, tmp_path)).resolve_job_def("hotel_events")
    instance = dg.DagsterInstance.ephemeral()
    post_events(tmp_path / "events.duckdb", 1, 2)
    blocked = folder / "hotel" / "out" / "events.csv"
    blocked.mkdir(parents=True)  # a folder where the file goes

    failed = job.execute_in_process(instance=instance, raise_on_error=False)
    blocked.rmdir()
    fixed = job.execute_in_process(instance=instance)

    assert not failed.success
    failure = failed.failure_data_for_node("hotel__service_events")
    assert failure is not None and failure.user_failure_data is not None
    assert f"cannot write {blocked}" in (failure.user_failure_data.description or "")
    found = metadata(fixed, "service_events")
    assert (found["received"], found["written"], found["after_seq"]) == (2, 2, 0)
    assert len(pd.read_csv(blocked)) == 2


def test_a_component_with_its_own_snapshot_senses_the_events_stored_next_to_it(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    # The receiver stores events next to the snapshot: a component's own snapshot (a value,
    # no resource key) has its own store, which its sensor reads with no resource given.
    folder = connection(tmp_path, arrivals([1]))
    own = tmp_path / "own"
    own.mkdir()
    hotel = component(
        {"mapping": str(folder / "hotel" / "mapping.yaml"), "snapshot": {"path": "own/s.duckdb"}}
    )
    defs = hotel.definitions(
        folder / "hotel" / "mapping.yaml", tmp_path, resources(clean_sandbox, tmp_path)
    )
    sensor = defs.resolve_sensor_def("hotel_service_events")
    instance = dg.DagsterInstance.ephemeral()
    post_events(own / "events.duckdb", 1, 2, 3)
    post_events(tmp_path / "events.duckdb", 1)

    tick = sensor(dg.build_sensor_context(instance=instance))
    (request,) = tick.run_requests
    result = defs.resolve_job_def("hotel_events").execute_in_process(
        instance=instance, tags=request.tags
    )

    assert sensor.required_resource_keys == set()
    assert tick.cursor == "3"
    assert metadata(result, "service_events")["received"] == 3

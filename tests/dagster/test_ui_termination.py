"""A launched run terminated as the UI terminates it, or as an evicted pod is: the run's
process stops its push gracefully, the run fails naming what it committed and left, and a
later run converges without re-sending or disagreeing (slow).

The run is launched the way the webserver launches it (a workspace with its code server, the
default run launcher, a run process started by the code server); the UI's *Terminate* calls
``run_launcher.terminate``, which has the code server interrupt the run's process.
"""

from __future__ import annotations

import os
import re
import signal
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster._cli.job import _create_run
from dagster._cli.workspace.cli_target import (
    get_code_location_from_workspace,
    get_remote_job_from_remote_repo,
    get_remote_repository_from_code_location,
)
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import WorkspaceFileTarget

from connector.sandbox.testing import SandboxHandle
from pms_sync.partitions import range_tags
from tests.dagster.exports import Export, booking, unit

pytestmark = pytest.mark.slow

UNITS = 40
DEFINITIONS = textwrap.dedent(
    """
    from pathlib import Path

    from pms_sync.component import folder_definitions

    here = Path(__file__).parent
    defs = folder_definitions(here / "mappings", here)
    """
)
# Launched at once (no daemon dequeues a run here), by the default run launcher.
INSTANCE = """\
run_coordinator:
  module: dagster._core.run_coordinator.default_run_coordinator
  class: DefaultRunCoordinator
telemetry:
  enabled: false
"""
WORKSPACE = """\
load_from:
  - python_file:
      relative_path: definitions.py
      working_directory: {root}
      location_name: terminated
"""


@dataclass
class Launched:
    instance: dg.DagsterInstance
    run_id: str

    def wait(self, timeout: float = 120) -> dg.DagsterRun:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.instance.get_run_by_id(self.run_id)
            assert run is not None
            if run.is_finished:
                return run
            time.sleep(0.2)
        raise AssertionError(f"run {self.run_id} did not end within {timeout} s")

    def events(self, kind: str) -> list[Any]:
        records = self.instance.get_records_for_run(self.run_id).records
        return [
            record.event_log_entry
            for record in records
            if record.event_log_entry.dagster_event is not None
            and record.event_log_entry.dagster_event.event_type_value == kind
        ]

    def process_id(self) -> int:
        """The run process's pid, from the engine event that announces it."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for entry in self.events("ENGINE_EVENT"):
                found = re.search(r"Started process for run \(pid: (\d+)\)", entry.message)
                if found:
                    return int(found.group(1))
            time.sleep(0.1)
        raise AssertionError("the run's process never started")


@pytest.fixture
def deployment(
    tmp_path: Path, clean_sandbox: SandboxHandle, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Path, Any]]:
    """A project folder with one connection of 40 units, and its workspace loaded."""
    (tmp_path / "definitions.py").write_text(DEFINITIONS)
    (tmp_path / "workspace.yaml").write_text(WORKSPACE.format(root=tmp_path))
    hotel = Export(tmp_path / "mappings" / "hotel", "hotel")
    hotel.write([unit(n) for n in range(1, UNITS + 1)], [booking(0, date(2025, 3, 1))])
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(INSTANCE)
    for name, value in {
        "DAGSTER_HOME": str(home),
        "PMS_SYNC_BASE_URL": clean_sandbox.base_url,
        "PMS_SYNC_TOKEN": "demo-token",
        "PMS_SYNC_SNAPSHOT": str(tmp_path / "snapshot.duckdb"),
        "PMS_SYNC_CONCURRENCY": "2",
        "PMS_SYNC_TIMEOUT": "5",
    }.items():
        monkeypatch.setenv(name, value)
    with (
        dg.DagsterInstance.get() as instance,
        WorkspaceProcessContext(
            instance, WorkspaceFileTarget([str(tmp_path / "workspace.yaml")])
        ) as workspace,
    ):
        yield tmp_path, (instance, workspace)


@contextmanager
def _launched(instance: dg.DagsterInstance, workspace: Any) -> Iterator[Launched]:
    request = workspace.create_request_context()
    location = get_code_location_from_workspace(request, "terminated")
    repository = get_remote_repository_from_code_location(location, None)
    job = get_remote_job_from_remote_repo(repository, "hotel_sync")
    run = _create_run(
        instance=instance,
        code_location=location,
        remote_repo=repository,
        remote_job=job,
        run_config={},
        tags=range_tags(dg.PartitionKeyRange("2025-01", "2025-12")),
        op_selection=None,
        run_id=None,
    )
    instance.submit_run(run.run_id, request)
    yield Launched(instance, run.run_id)


def _wait_for_requests(sandbox: SandboxHandle, launched: Launched, count: int) -> None:
    deadline = time.monotonic() + 120
    while sandbox.count() < count and time.monotonic() < deadline:
        run = launched.instance.get_run_by_id(launched.run_id)
        assert run is not None and not run.is_finished, "the run ended before its push"
        time.sleep(0.05)
    run = launched.instance.get_run_by_id(launched.run_id)
    messages = [
        record.event_log_entry.message
        for record in launched.instance.get_records_for_run(launched.run_id).records
    ]
    assert sandbox.count() >= count, f"the push never started: {run and run.status} {messages}"


def _stopped_and_converges(
    launched: Launched, sandbox: SandboxHandle, signal_name: str, rerun: Launched | None
) -> None:
    run = launched.wait()
    # Canceled or failed, as the run process's end and the termination's record race; either
    # way the sync step failed, not retried, with what its push committed and left.
    assert run.status in (dg.DagsterRunStatus.CANCELED, dg.DagsterRunStatus.FAILURE)
    failures = [entry.dagster_event for entry in launched.events("STEP_FAILURE")]
    messages = [event.event_specific_data.error.message for event in failures]
    (message,) = [m for m in messages if "push stopped" in m]
    found = re.search(
        rf"push stopped \({signal_name}\): (\d+) acknowledged and committed, (\d+) pending",
        message,
    )
    assert found is not None, message
    acknowledged, pending = int(found.group(1)), int(found.group(2))
    # Nothing acknowledged is lost: what the service stored is what the step committed.
    assert 0 < acknowledged < UNITS
    assert acknowledged + pending == UNITS
    assert sandbox.count("demo", "accommodation") == acknowledged

    assert rerun is not None
    later = rerun.wait()
    assert later.status == dg.DagsterRunStatus.SUCCESS
    records = sandbox.records("demo", "accommodation")
    # Nothing in flight forgotten, nothing sent twice.
    assert len(records) == UNITS
    assert {record["writes"] for record in records} == {1}
    assert sandbox.count("demo", "reservation") == 1


def test_terminating_a_launched_run_as_the_ui_does_stops_its_push_gracefully(
    deployment: tuple[Path, Any], clean_sandbox: SandboxHandle
) -> None:
    _, (instance, workspace) = deployment
    clean_sandbox.set_faults(latency_ms=300)  # 40 units at concurrency 2: about 6 s of pushing
    with _launched(instance, workspace) as launched:
        _wait_for_requests(clean_sandbox, launched, 6)
        assert instance.run_launcher.terminate(launched.run_id)
        launched.wait()
    clean_sandbox.set_faults()
    with _launched(instance, workspace) as rerun:
        _stopped_and_converges(launched, clean_sandbox, "SIGINT", rerun)


def test_a_sigterm_to_the_runs_process_as_when_its_pod_is_evicted_stops_it_gracefully(
    deployment: tuple[Path, Any], clean_sandbox: SandboxHandle
) -> None:
    _, (instance, workspace) = deployment
    clean_sandbox.set_faults(latency_ms=300)
    with _launched(instance, workspace) as launched:
        pid = launched.process_id()
        _wait_for_requests(clean_sandbox, launched, 6)
        os.kill(pid, signal.SIGTERM)
        launched.wait()
    clean_sandbox.set_faults()
    with _launched(instance, workspace) as rerun:
        _stopped_and_converges(launched, clean_sandbox, "SIGTERM", rerun)

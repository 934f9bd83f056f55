"""A component's own service and snapshot (``service:``, ``snapshot:`` in its ``defs.yaml``):
each connection pushes to its own service, the others keep the project's, and the approvals
are still given in the run config (real sandboxes on their own ports, real snapshots)."""

from collections.abc import Iterator
from datetime import date
from pathlib import Path

import dagster as dg
import pytest
import yaml

from connector.config import DEFAULT_BASE_URL
from connector.sandbox.testing import SandboxHandle, multi_account_config, running_sandbox
from pms_sync.partitions import range_tags
from pms_sync.resources import ServiceResource, SnapshotResource, default_resources
from tests.dagster.code_location import component
from tests.dagster.exports import Export, booking, unit

pytestmark = pytest.mark.slow

MARCH = range_tags(dg.PartitionKeyRange("2025-03", "2025-03"))


@pytest.fixture
def other_sandboxes(tmp_path: Path) -> Iterator[tuple[SandboxHandle, SandboxHandle]]:
    """Two more sandboxes, each on a port of its own."""
    with (
        running_sandbox(tmp_path / "sandbox-a", multi_account_config()) as first,
        running_sandbox(tmp_path / "sandbox-b", multi_account_config()) as second,
    ):
        yield first, second


def test_two_components_push_to_their_own_services_and_the_project_keeps_its_own(
    tmp_path: Path,
    resources: dict[str, object],
    clean_sandbox: SandboxHandle,
    other_sandboxes: tuple[SandboxHandle, SandboxHandle],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first, second = other_sandboxes
    assert len({first.base_url, second.base_url, clean_sandbox.base_url}) == 3
    monkeypatch.setenv("BERLIN_SYNC_TOKEN", "demo-token")
    berlin = Export(tmp_path / "pms" / "berlin", "berlin")
    berlin.write([unit(1), unit(2)], [booking(1, date(2025, 3, 2))])
    munich = Export(tmp_path / "pms" / "munich", "munich")
    munich.write(
        [unit(1), unit(2), unit(3)], [booking(1, date(2025, 3, 5)), booking(2, date(2025, 3, 6))]
    )
    vienna = Export(tmp_path / "pms" / "vienna", "vienna")
    vienna.write([unit(7)], [booking(7, date(2025, 3, 7), unit_number=7)])
    own_snapshot = tmp_path / "munich.duckdb"
    components = [
        (
            berlin,
            component(
                {
                    "mapping": str(berlin.mapping),
                    "service": {"base_url": first.base_url, "token": "{{ env.BERLIN_SYNC_TOKEN }}"},
                }
            ),
        ),
        (
            munich,
            component(
                {
                    "mapping": str(munich.mapping),
                    "service": {
                        "base_url": second.base_url,
                        "token": "demo-token",
                        "concurrency": 2,
                    },
                    "snapshot": {"path": "munich.duckdb"},  # relative to the project root
                }
            ),
        ),
        (vienna, component({"mapping": str(vienna.mapping)})),  # the project's service
    ]
    defs = dg.Definitions.merge(
        *(c.definitions(export.mapping, tmp_path, resources) for export, c in components)
    )

    for job in ("berlin_sync", "munich_sync", "vienna_sync"):
        result = defs.resolve_job_def(job).execute_in_process(tags=MARCH, raise_on_error=False)
        assert result.success, job

    assert (first.count("demo", "accommodation"), first.count("demo", "reservation")) == (2, 1)
    assert (second.count("demo", "accommodation"), second.count("demo", "reservation")) == (3, 2)
    assert clean_sandbox.count("demo", "accommodation") == 1
    assert clean_sandbox.count("demo", "reservation") == 1
    # munich's acknowledgements are in its own snapshot, the others' in the project's.
    assert connections_of(own_snapshot) == {"munich"}
    shared = resources["snapshot"]
    assert isinstance(shared, SnapshotResource)
    assert connections_of(Path(shared.path)) == {"berlin", "vienna"}


def test_a_component_with_its_own_service_takes_no_shared_resource_key(tmp_path: Path) -> None:
    hotel = Export(tmp_path / "pms" / "hotel", "hotel")
    hotel.write([unit(1)], [booking(1, date(2025, 3, 2))])
    own = component(
        {
            "mapping": str(hotel.mapping),
            "service": {"base_url": "https://hotel.example", "token": "t"},
            "snapshot": {"path": str(tmp_path / "hotel.duckdb")},
        }
    )

    defs = own.definitions(hotel.mapping, tmp_path)

    required = {
        key
        for asset in defs.resolve_all_asset_specs()
        for key in defs.resolve_assets_def(asset.key).required_resource_keys
    }
    assert "service" not in required and "snapshot" not in required
    assert {"sources", "sync_checks"} <= required


def test_an_own_service_takes_the_members_it_sets_over_the_projects(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("PMS_SYNC_BASE_URL", "PMS_SYNC_TOKEN", "PMS_SYNC_CLIENT_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PMS_SYNC_CONCURRENCY", "3")
    monkeypatch.setenv("PMS_SYNC_TIMEOUT", "12")
    project = default_resources(tmp_path)["service"]
    assert isinstance(project, ServiceResource) and project.base_url == DEFAULT_BASE_URL

    slower = component({"mapping": "m.yaml", "service": {"concurrency": 1}})
    elsewhere = component({"mapping": "m.yaml", "service": {"base_url": "https://x.example"}})
    same = slower.own_resources(tmp_path).service
    other = elsewhere.own_resources(tmp_path).service

    # Same service: the project's members and credentials, the one member set here.
    assert same is not None and (same.concurrency, same.timeout) == (1, 12.0)
    assert same.token == project.token == "demo-token" and same.open_api is not None
    # Another service: the project's members, none of its credentials.
    assert other is not None and (other.concurrency, other.timeout) == (3, 12.0)
    assert other.token is None and other.open_api is None
    assert slower.own_resources(tmp_path).snapshot is None


def test_an_own_snapshot_is_a_file_under_the_project_root_or_a_database(tmp_path: Path) -> None:
    def own(path: str) -> str:
        attributes = {"mapping": "m.yaml", "snapshot": {"path": path, "lock_timeout": 5}}
        snapshot = component(attributes).own_resources(tmp_path).snapshot
        assert snapshot is not None and snapshot.lock_timeout == 5
        return snapshot.path

    assert own("state/berlin.duckdb") == str(tmp_path / "state" / "berlin.duckdb")
    assert own("/srv/berlin.duckdb") == "/srv/berlin.duckdb"
    assert own("postgresql://sync@db:5432/pms") == "postgresql://sync@db:5432/pms"


def test_the_mass_change_approval_is_still_given_in_the_run_config(
    tmp_path: Path,
    resources: dict[str, object],
    other_sandboxes: tuple[SandboxHandle, SandboxHandle],
) -> None:
    first, _ = other_sandboxes
    flats = Export(tmp_path / "pms" / "flats", "flats")
    flats.write([unit(n) for n in range(1, 11)], None)
    own = component(
        {
            "mapping": str(flats.mapping),
            "service": {"base_url": first.base_url, "token": "demo-token"},
            "snapshot": {"path": str(tmp_path / "flats.duckdb")},
        }
    )
    job = own.definitions(flats.mapping, tmp_path, resources).resolve_job_def("flats_sync")
    assert job.execute_in_process(raise_on_error=False).success
    flats.write([unit(n) for n in range(1, 6)], None)  # half the units gone

    held = job.execute_in_process(raise_on_error=False)
    approved = job.execute_in_process(
        run_config={"resources": {"sync_checks": {"config": {"allow_mass_change": True}}}},
        raise_on_error=False,
    )

    assert not held.success
    assert approved.success
    statuses = [u["resource"]["status"] for u in first.records("demo", "accommodation")]
    assert sorted(statuses) == ["ACTIVE"] * 5 + ["INACTIVE"] * 5


def connections_of(snapshot: Path) -> set[str]:
    """The connections (their mapping files' folders) whose runs a snapshot records."""
    with SnapshotResource(path=str(snapshot)).read() as store:
        return {Path(mapping).parent.name for mapping in store.runs()["mapping"]}


def test_every_defs_yaml_of_the_docs_is_a_valid_component() -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "dagster.md").read_text()
    blocks = [b.split("```", 1)[0] for b in page.split("```yaml\n")[1:]]
    examples = [yaml.safe_load(b) for b in blocks if "type: pms_sync.PmsSyncComponent" in b]

    resolved = [component(example["attributes"]) for example in examples]

    assert len(resolved) >= 4
    assert any(c.service is not None and c.snapshot is not None for c in resolved)

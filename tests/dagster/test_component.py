"""``PmsSyncComponent`` in a data engineer's own ``dg`` project, through the real ``dg`` CLI.

The throwaway project is written by hand (what ``create-dagster project`` writes, minus its
virtual environment) and uses the environment pms-sync is installed in, so nothing is fetched.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from connector.sandbox.testing import SandboxHandle, multi_account_config, running_sandbox
from tests.dagster.exports import BOOKING_COLUMNS, UNIT_COLUMNS

pytestmark = pytest.mark.slow

CHECKOUT = Path(__file__).resolve().parents[2]
"""The pms-sync under test: ahead of any pms-sync the environment has installed (an editable
install of another checkout would stand in for it in the ``dg`` subprocesses)."""

PYPROJECT = """\
[project]
name = "guest-sync"
version = "0.1.0"
requires-python = ">=3.11"
dependencies = ["pms-sync"]

[tool.dg]
directory_type = "project"

[tool.dg.project]
root_module = "guest_sync"
"""

DEFINITIONS = """\
from pathlib import Path

import dagster as dg


@dg.definitions
def defs() -> dg.Definitions:
    return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """An empty dg project: pyproject.toml, src/guest_sync/{definitions.py, defs/}."""
    root = tmp_path / "guest-sync"
    package = root / "src" / "guest_sync"
    (package / "defs").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT)
    (package / "__init__.py").write_text("")
    (package / "defs" / "__init__.py").write_text("")
    (package / "definitions.py").write_text(DEFINITIONS)
    return root


def dg(
    project: Path, *arguments: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    bin_dir = Path(sys.executable).parent
    environment = {
        **os.environ,
        **(env or {}),
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "VIRTUAL_ENV": str(bin_dir.parent),
        "PYTHONPATH": os.pathsep.join([str(project / "src"), str(CHECKOUT)]),
        "DAGSTER_HOME": str(project / ".dagster_home"),
        "NO_COLOR": "1",
    }
    (project / ".dagster_home").mkdir(exist_ok=True)
    return subprocess.run(
        [str(bin_dir / "dg"), *arguments],
        cwd=project,
        env=environment,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_a_dg_project_adds_connections_with_the_component_and_loads_their_definitions(
    project: Path,
) -> None:
    defs = project / "src" / "guest_sync" / "defs"
    scaffolded = dg(project, "scaffold", "defs", "pms_sync.PmsSyncComponent", "hotel")
    assert scaffolded.returncode == 0, scaffolded.stderr
    for name, columns in (("units.csv", UNIT_COLUMNS), ("bookings.csv", BOOKING_COLUMNS)):
        (defs / "hotel" / name).write_text(",".join(columns) + "\n")
    # A second connection names a mapping file kept elsewhere in the project.
    (project / "mappings").mkdir()
    starter = (defs / "hotel" / "mapping.yaml").read_text()
    (project / "mappings" / "flats.yaml").write_text(starter.replace("name: hotel", "name: flats"))
    named = dg(
        project,
        "scaffold",
        "defs",
        "pms_sync.PmsSyncComponent",
        "flats",
        "--json-params",
        json.dumps({"mapping": "../../../../mappings/flats.yaml"}),
    )
    assert named.returncode == 0, named.stderr

    listed = dg(project, "list", "defs", "--json")
    checked = dg(project, "check", "defs")

    assert (defs / "hotel" / "defs.yaml").read_text().startswith("type: pms_sync.PmsSyncComponent")
    assert "mapping: mapping.yaml" in (defs / "hotel" / "defs.yaml").read_text()
    assert listed.returncode == 0, listed.stderr
    found = json.loads(listed.stdout)
    assert {asset["asset_key"] for asset in found["assets"]} == {
        f"{name}/{asset}"
        for name in ("hotel", "flats")
        for asset in (
            "pms/units",
            "pms/bookings",
            "mapped_accommodations",
            "mapped_reservations",
            "synced_accommodations",
            "synced_reservations",
            "accounts",
        )
    }
    assert {job["name"] for job in found["jobs"]} == {"hotel_sync", "flats_sync"}
    assert checked.returncode == 0, checked.stderr


def test_two_components_with_mappings_of_one_name_in_other_folders_do_not_collide(
    project: Path,
) -> None:
    # Two hotels of one chain: each mapping file, kept in its own folder outside defs/, was
    # copied from the same starter and still says `name: hotel`. The keys come from each
    # component's own name (its folder); `name:` in defs.yaml sets another.
    defs = project / "src" / "guest_sync" / "defs"
    first = dg(project, "scaffold", "defs", "pms_sync.PmsSyncComponent", "hotel")
    assert first.returncode == 0, first.stderr
    starter = (defs / "hotel" / "mapping.yaml").read_text()
    (defs / "hotel" / "mapping.yaml").unlink()
    (defs / "hotel" / "defs.yaml").unlink()
    (defs / "hotel").rmdir()
    for city in ("berlin", "munich"):
        folder = project / "pms" / city
        folder.mkdir(parents=True)
        (folder / "mapping.yaml").write_text(starter)
        for name, columns in (("units.csv", UNIT_COLUMNS), ("bookings.csv", BOOKING_COLUMNS)):
            (folder / name).write_text(",".join(columns) + "\n")
        mapping = str(folder / "mapping.yaml")
        scaffolded = dg(
            project,
            "scaffold",
            "defs",
            "pms_sync.PmsSyncComponent",
            city,
            "--json-params",
            json.dumps({"mapping": mapping}),
        )
        assert scaffolded.returncode == 0, scaffolded.stderr
    munich = defs / "munich" / "defs.yaml"
    munich.write_text(
        munich.read_text().replace(
            "attributes:\n", "attributes:\n  name: muc\n  key_prefix: [pms]\n"
        )
    )

    checked = dg(project, "check", "defs")
    listed = dg(project, "list", "defs", "--json")

    assert checked.returncode == 0, checked.stderr
    assert "Duplicate" not in checked.stderr + checked.stdout
    assert listed.returncode == 0, listed.stderr
    found = json.loads(listed.stdout)
    keys = {asset["asset_key"] for asset in found["assets"]}
    assert {"berlin/synced_reservations", "pms/muc/synced_reservations"} <= keys
    assert {"pms/muc/pms/bookings", "pms/muc/accounts"} <= keys
    assert not any(key.startswith(("hotel/", "muc/")) for key in keys)
    assert {job["name"] for job in found["jobs"]} == {"berlin_sync", "muc_sync"}
    assert "pms/muc/synced_reservations" in job_assets(project, "muc_sync")


STARTER_UNITS = """\
unit_id,name,street,street_number,country,city,wifi_name,wifi_code,door_code
U1,Apartment 1,Hauptstrasse,1,AT,Wien,guest,wifi-secret-1,1001
U2,Apartment 2,Hauptstrasse,2,AT,Wien,guest,wifi-secret-2,1002
"""
STARTER_BOOKINGS = """\
booking_id,created,first_name,email,unit_id,checkin,checkout,adults
B1,2025-01-02T10:00:00Z,Anna,anna@example.com,U1,2025-03-01,2025-03-03,2
B2,2025-01-02T10:00:00Z,Ben,ben@example.com,U2,2025-05-10,2025-05-12,1
"""


def test_dg_launch_runs_the_connections_job_in_one_process_and_syncs_it(
    project: Path, clean_sandbox: SandboxHandle
) -> None:
    import dagster as dg_api

    defs = project / "src" / "guest_sync" / "defs"
    assert dg(project, "scaffold", "defs", "pms_sync.PmsSyncComponent", "hotel").returncode == 0
    (defs / "hotel" / "units.csv").write_text(STARTER_UNITS)
    (defs / "hotel" / "bookings.csv").write_text(STARTER_BOOKINGS)
    service = {
        "PMS_SYNC_BASE_URL": clean_sandbox.base_url,
        "PMS_SYNC_TOKEN": "demo-token",
        "PMS_SYNC_SNAPSHOT": str(project / "snapshot.duckdb"),
    }

    launched = dg(
        project,
        *("launch", "--job", "hotel_sync", "--partition-range", "2025-01...2025-12"),
        env=service,
    )

    assert launched.returncode == 0, launched.stderr[-3000:]
    assert clean_sandbox.count("demo", "accommodation") == 2
    assert clean_sandbox.count("demo", "reservation") == 2
    with dg_api.DagsterInstance.from_config(str(project / ".dagster_home")) as instance:
        (run,) = instance.get_runs()
        assert run.status == dg_api.DagsterRunStatus.SUCCESS
        records = instance.get_records_for_run(run.run_id).records
        events = [r.event_log_entry.dagster_event for r in records]
        starts = [e for e in events if e is not None and e.event_type_value == "STEP_START"]
        months = {
            e.partition
            for e in events
            if e is not None
            and e.event_type_value == "ASSET_MATERIALIZATION"
            and e.asset_key == dg_api.AssetKey(["hotel", "synced_reservations"])
        }
    # Every step (mapping, checks, syncs) ran in the run's one process, and each month of
    # the range still has its own materialization.
    assert len(starts) >= 4
    assert len({event.pid for event in starts}) == 1
    assert months == {f"2025-{month:02d}" for month in range(1, 13)}


def test_two_components_with_their_own_services_each_push_to_theirs(
    project: Path, tmp_path: Path
) -> None:
    # Two connections of one project, each with `service:` in its defs.yaml naming a service
    # of its own (two sandboxes on their own ports); munich keeps its own snapshot too. The
    # project's service is an address nobody answers on: nothing may be sent there.
    defs = project / "src" / "guest_sync" / "defs"
    own = {
        "berlin": '  service:\n    base_url: {url}\n    token: "{{{{ env.BERLIN_SYNC_TOKEN }}}}"\n',
        "munich": (
            "  service:\n    base_url: {url}\n    token: demo-token\n    concurrency: 2\n"
            "  snapshot:\n    path: munich.duckdb\n"
        ),
    }
    env = {
        "BERLIN_SYNC_TOKEN": "demo-token",
        "PMS_SYNC_BASE_URL": "http://127.0.0.1:9",
        "PMS_SYNC_SNAPSHOT": str(project / "snapshot.duckdb"),
    }
    with (
        running_sandbox(tmp_path / "berlin-service", multi_account_config()) as berlin,
        running_sandbox(tmp_path / "munich-service", multi_account_config()) as munich,
    ):
        services = {"berlin": berlin, "munich": munich}
        for name, sandbox in services.items():
            scaffolded = dg(project, "scaffold", "defs", "pms_sync.PmsSyncComponent", name)
            assert scaffolded.returncode == 0, scaffolded.stderr
            (defs / name / "units.csv").write_text(STARTER_UNITS)
            (defs / name / "bookings.csv").write_text(STARTER_BOOKINGS)
            with (defs / name / "defs.yaml").open("a") as file:
                file.write(own[name].format(url=sandbox.base_url))

        checked = dg(project, "check", "defs", env=env)
        listed = dg(project, "list", "defs", "--json", env=env)
        launched = {
            name: dg(
                project,
                *("launch", "--job", f"{name}_sync", "--partition-range", "2025-01...2025-12"),
                env=env,
            )
            for name in services
        }

        assert checked.returncode == 0, checked.stdout[-3000:]
        assert listed.returncode == 0, listed.stderr[-3000:]
        keys = {asset["asset_key"] for asset in json.loads(listed.stdout)["assets"]}
        assert {"berlin/synced_reservations", "munich/synced_reservations"} <= keys
        for result in launched.values():
            assert result.returncode == 0, result.stderr[-3000:]
        # Each service holds its own connection's units and stays, once.
        for sandbox in services.values():
            assert sandbox.count("demo", "accommodation") == 2
            assert sandbox.count("demo", "reservation") == 2
    assert (project / "munich.duckdb").is_file()
    assert (project / "snapshot.duckdb").is_file()


def test_post_processing_in_defs_yaml_sets_groups_tags_and_owners(project: Path) -> None:
    # Dagster's own asset post-processors (`post_processing:` beside `attributes:`), as
    # dagster-sling's and dagster-dlt's components take them: here every asset of the
    # connection moves to the team's group with its owner and a tag, the exports stay put.
    defs = project / "src" / "guest_sync" / "defs"
    assert dg(project, "scaffold", "defs", "pms_sync.PmsSyncComponent", "hotel").returncode == 0
    for name, columns in (("units.csv", UNIT_COLUMNS), ("bookings.csv", BOOKING_COLUMNS)):
        (defs / "hotel" / name).write_text(",".join(columns) + "\n")
    with (defs / "hotel" / "defs.yaml").open("a") as file:
        file.write(
            "post_processing:\n"
            "  assets:\n"
            '    - target: "key:hotel/synced_*"\n'
            "      attributes:\n"
            "        group_name: guest_experience\n"
            "        owners: [team:data]\n"
            "        tags: {tier: gold}\n"
        )

    checked = dg(project, "check", "defs")
    listed = dg(project, "list", "defs", "--json")

    assert checked.returncode == 0, checked.stdout[-3000:]
    assert listed.returncode == 0, listed.stderr
    assets = {asset["asset_key"]: asset for asset in json.loads(listed.stdout)["assets"]}
    for key in ("hotel/synced_reservations", "hotel/synced_accommodations"):
        assert assets[key]["group_name"] == "guest_experience", assets[key]
        assert assets[key]["owners"] == [{"team": "data"}], assets[key]
        assert {"key": "tier", "value": "gold"} in assets[key]["tags"], assets[key]
    assert assets["hotel/mapped_reservations"]["group_name"] == "hotel"
    # The connection's job still holds every asset it syncs, whatever their groups.
    assert job_assets(project, "hotel_sync") == {
        f"hotel/{name}"
        for name in (
            "mapped_accommodations",
            "mapped_reservations",
            "synced_accommodations",
            "synced_reservations",
            "accounts",
        )
    }


JOB_ASSETS = """
import sys
from guest_sync.definitions import defs
job = defs().resolve_job_def(sys.argv[1])
print(*sorted(key.to_user_string() for key in job.asset_layer.executable_asset_keys))
"""


def job_assets(project: Path, job: str) -> set[str]:
    """The asset keys a job of the project materializes, as its code location loads them."""
    listed = subprocess.run(
        [sys.executable, "-c", JOB_ASSETS, job],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(project / "src"), str(CHECKOUT)])},
        capture_output=True,
        text=True,
        check=True,
    )
    return set(listed.stdout.split())

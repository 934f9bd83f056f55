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

from tests.dagster.exports import BOOKING_COLUMNS, UNIT_COLUMNS

pytestmark = pytest.mark.slow

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


def dg(project: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    bin_dir = Path(sys.executable).parent
    environment = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "VIRTUAL_ENV": str(bin_dir.parent),
        "PYTHONPATH": str(project / "src"),
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
    munich.write_text(munich.read_text().replace("attributes:\n", "attributes:\n  name: muc\n"))

    checked = dg(project, "check", "defs")
    listed = dg(project, "list", "defs", "--json")

    assert checked.returncode == 0, checked.stderr
    assert "Duplicate" not in checked.stderr + checked.stdout
    assert listed.returncode == 0, listed.stderr
    found = json.loads(listed.stdout)
    keys = {asset["asset_key"] for asset in found["assets"]}
    assert {"berlin/synced_reservations", "muc/synced_reservations"} <= keys
    assert not any(key.startswith("hotel/") for key in keys)
    assert {job["name"] for job in found["jobs"]} == {"berlin_sync", "muc_sync"}

"""pms-sync installs from a built wheel, and `dg` finds its Component there (docs/dagster.md,
"Installing pms-sync"): the package is on no package index."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What the distribution is built from (pyproject.toml's packages and readme).
SOURCES = ("pyproject.toml", "README.md", "connector", "pms_sync")


def _pip(*arguments: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pip", *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.slow
def test_a_built_wheel_installs_into_a_fresh_venv_and_dg_finds_the_component(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A PYTHONPATH naming a checkout would stand in for the wheel: pip would find pms-sync
    # installed already, and the fresh venv would import the checkout.
    monkeypatch.delenv("PYTHONPATH", raising=False)
    source = tmp_path / "src"
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            source.mkdir(exist_ok=True)
            shutil.copy2(path, source / name)
    built = _pip(
        "wheel", "--no-deps", "--wheel-dir", str(tmp_path / "dist"), str(source), cwd=tmp_path
    )
    if built.returncode and "No matching distribution found for setuptools" in built.stderr:
        pytest.skip("the build backend (setuptools>=77) cannot be installed: no package index")
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("pms_sync-*.whl")

    fresh = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(fresh)], check=True)
    python = fresh / "bin" / "python"
    installed = _pip(
        "--python", str(python), "install", "--no-deps", "--no-index", str(wheel), cwd=tmp_path
    )
    assert installed.returncode == 0, installed.stderr
    # Its dependencies come from the test's own environment (already installed, no index
    # needed); a .pth of a path runs no other .pth, so the checkout's editable install stays out.
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(purelib) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    where = subprocess.run(
        [
            str(python),
            "-c",
            "import pms_sync, pms_sync.component as c; print(pms_sync.__file__); print(c._TEMPLATE.is_file())",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert where == [str(Path(purelib) / "pms_sync" / "__init__.py"), "True"]
    assert (fresh / "bin" / "pms-sync").exists()

    dg = Path(sys.executable).with_name("dg")
    listed = subprocess.run(
        [str(python), str(dg), "list", "components", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert listed.returncode == 0, listed.stderr
    keys = {item["key"] for item in json.loads(listed.stdout[listed.stdout.index("{") :])["items"]}
    assert "pms_sync.PmsSyncComponent" in keys

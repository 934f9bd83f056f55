"""Where pms-sync's own project keeps things: the checkout's mappings and its state folder.

``make demo`` and ``make dev`` share ``DAGSTER_HOME`` (under the state folder), so the demo's
runs, plots and check results are there when the UI opens.
"""

from __future__ import annotations

from pathlib import Path

from pms_sync.resources import STATE_DIR_NAME

PROJECT_ROOT = Path(__file__).resolve().parent.parent
STATE_DIR = PROJECT_ROOT / STATE_DIR_NAME
DAGSTER_HOME = STATE_DIR / "dagster_home"
MAPPINGS_DIR = PROJECT_ROOT / "mappings"
INSTANCE_SETTINGS = Path(__file__).resolve().parent / "dagster.yaml"


def prepare_dagster_home() -> Path:
    """DAGSTER_HOME with the project's instance settings (copied from assets/dagster.yaml)."""
    DAGSTER_HOME.mkdir(parents=True, exist_ok=True)
    settings = DAGSTER_HOME / "dagster.yaml"
    if not settings.exists() or settings.read_bytes() != INSTANCE_SETTINGS.read_bytes():
        settings.write_bytes(INSTANCE_SETTINGS.read_bytes())
    return DAGSTER_HOME

"""An on/off setting means the same in the CLI's settings and in Dagster's default resources."""

from __future__ import annotations

from pathlib import Path

import pytest

from connector.client import DEFAULT_BASE_URL
from connector.errors import ConfigError
from connector.settings import load_settings
from pms_sync.resources import default_open_api

SETTINGS = ("PMS_SYNC_OFFBOARD_PROPERTIES", "PMS_SYNC_UPDATE_SUB_UNITS")


@pytest.mark.parametrize("variable", SETTINGS)
@pytest.mark.parametrize("value", ["disabled", "nein", "2"])
def test_a_value_the_cli_refuses_is_refused_by_dagster_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=variable):
        load_settings(snapshot=tmp_path / "snapshot.duckdb", token="t", env={variable: value})
    with pytest.raises(ConfigError, match=variable):
        default_open_api(DEFAULT_BASE_URL)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("off ", False), (" OFF", False), ("0", False), ("on", True), ("", True)],
)
def test_offboarding_switch_reads_alike(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str, expected: bool
) -> None:
    monkeypatch.setenv("PMS_SYNC_OFFBOARD_PROPERTIES", value)
    cli = load_settings(
        snapshot=tmp_path / "snapshot.duckdb",
        token="t",
        env={"PMS_SYNC_OFFBOARD_PROPERTIES": value},
    )
    assert cli.properties.offboard is expected
    assert default_open_api(DEFAULT_BASE_URL).offboard_properties is expected

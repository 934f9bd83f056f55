"""One configuration: a setting means the same in the CLI and in Dagster. Both surfaces take
their variables and defaults from connector.config, and parse a value alike."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from connector.cli import main
from connector.cli.setting_options import SettingOption
from connector.client import DEFAULT_BASE_URL
from connector.config import SECTIONS, Section
from connector.errors import ConfigError
from connector.settings import load_settings
from pms_sync.component import PmsSyncComponent
from pms_sync.resources import (
    OpenApiResource,
    ServiceResource,
    SnapshotResource,
    SourcesResource,
    SyncChecksResource,
    default_open_api,
    default_resources,
)

SETTINGS = ("PMS_SYNC_OFFBOARD_PROPERTIES", "PMS_SYNC_UPDATE_SUB_UNITS")
RESOURCES: dict[str, Any] = {
    "service": ServiceResource,
    "open_api": OpenApiResource,
    "snapshot": SnapshotResource,
    "sources": SourcesResource,
    "sync_checks": SyncChecksResource,
}
SETTINGS_BY_VARIABLE = {
    section.variable(field): (section, field)
    for section in SECTIONS.values()
    for field in section.model_fields
}


def setting_options() -> Iterator[tuple[str, click.Option]]:
    """Every option of every command that projects a setting, with its command's path."""

    def walk(command: click.Command, path: str) -> Iterator[tuple[str, click.Option]]:
        for param in command.params:
            if isinstance(param, SettingOption):
                yield path, param
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                yield from walk(sub, f"{path} {name}")

    yield from walk(main, "pms-sync")


@pytest.mark.parametrize("variable", SETTINGS)
@pytest.mark.parametrize("value", ["nein", "2", "offf"])
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
    [
        ("off ", False),
        (" OFF", False),
        ("0", False),
        ("disabled", False),
        (" Disabled ", False),
        ("enabled", True),
        ("on", True),
        ("", True),
    ],
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


@pytest.mark.parametrize(
    ("value", "refused"), [("disabled", False), ("off ", False), ("nope", True)]
)
def test_the_cli_command_reads_the_offboarding_switch_as_the_model_does(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str, refused: bool
) -> None:
    # `accounts` without an Open API client stops at its settings: refused, the variable is
    # named; accepted, the command goes on to say no client is configured.
    for name in ("PMS_SYNC_CLIENT_ID", "PMS_SYNC_CLIENT_SECRET"):
        monkeypatch.delenv(name, raising=False)
    env = {
        "PMS_SYNC_OFFBOARD_PROPERTIES": value,
        "PMS_SYNC_BASE_URL": "https://service.example",
        "PMS_SYNC_SNAPSHOT": str(tmp_path / "snapshot.duckdb"),
    }
    result = CliRunner().invoke(main, ["accounts", "--json"], env=env, catch_exceptions=False)

    document = json.loads(result.stdout)
    assert result.exit_code == 1
    assert ("PMS_SYNC_OFFBOARD_PROPERTIES" in document["error"]) is refused
    assert ("no Open API client is configured" in document["error"]) is not refused


def test_every_cli_option_of_a_setting_takes_its_variable_and_default_from_the_model() -> None:
    projected: set[str] = set()
    for path, option in setting_options():
        assert isinstance(option.envvar, str), f"{path} {option.opts}"
        section, field = SETTINGS_BY_VARIABLE[option.envvar]
        assert section.flag(field) in option.opts, f"{path}: {option.opts} for {option.envvar}"
        assert option.show_envvar, f"{path} {option.opts}"
        default = section.default(field)
        expected = None if default in (None, ()) else default
        assert option.default == expected, f"{path} {option.opts}"
        projected.add(option.envvar)
    with_flags = {
        section.variable(field)
        for section in SECTIONS.values()
        for field in section.model_fields
        if section.flag(field)
    }
    assert with_flags - projected == set(), "settings whose flag no command has"


def _members() -> Iterator[tuple[type[Section], str, Any, str]]:
    for section in SECTIONS.values():
        for field in section.model_fields:
            member = section.dagster(field)
            if member:
                resource, _, name = member.partition(".")
                yield section, field, RESOURCES[resource], name


@pytest.mark.parametrize(
    ("section", "field", "resource", "member"),
    list(_members()),
    ids=[f"{r.__name__}.{m}" for _, _, r, m in _members()],
)
def test_every_dagster_member_of_a_setting_takes_the_models_default(
    section: type[Section], field: str, resource: Any, member: str
) -> None:
    assert member in resource.model_fields
    assert resource.model_fields[member].default == section.default(field)


def test_the_variables_mean_the_same_in_the_cli_and_in_dagster(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = {
        "PMS_SYNC_BASE_URL": "https://service.example",
        "PMS_SYNC_SNAPSHOT": str(tmp_path / "snapshot.duckdb"),
        "PMS_SYNC_CONCURRENCY": " 3",
        "PMS_SYNC_RATE_LIMIT": "4.5",
        "PMS_SYNC_RATE_LIMITS": "off",
        "PMS_SYNC_MAX_ATTEMPTS": "2",
        "PMS_SYNC_TIMEOUT": "12",
        "PMS_SYNC_MAX_DURATION": "off",
        "PMS_SYNC_URGENT_DAYS": "5",
        "PMS_SYNC_REFRESH": "10%",
        "PMS_SYNC_REFRESH_MAX": "50",
        "PMS_SYNC_MAX_QUARANTINE_SHARE": "0.2",
        "PMS_SYNC_UPDATE_SUB_UNITS": "no",
    }
    # Credentials reach Dagster as EnvVars, resolved when Dagster loads the resources.
    for name in (
        "PMS_SYNC_CLIENT_ID",
        "PMS_SYNC_CLIENT_SECRET",
        "PMS_SYNC_TOKEN",
        "PMS_SYNC_TOKENS_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    cli = load_settings(env=env)
    resources = default_resources(tmp_path)
    service = resources["service"]
    snapshot = resources["snapshot"]
    assert isinstance(service, ServiceResource) and isinstance(snapshot, SnapshotResource)
    dagster = service.settings(snapshot)

    assert dagster.client.base_url == cli.client.base_url == "https://service.example"
    assert dagster.snapshot_path == cli.snapshot_path
    assert dagster.push.concurrency == cli.push.concurrency == 3
    assert dagster.client.rate_limit == cli.client.rate_limit == 4.5
    assert dagster.client.rate_windows == cli.client.rate_windows == ()
    assert dagster.client.retry.max_attempts == cli.client.retry.max_attempts == 2
    assert dagster.client.read_timeout == cli.client.read_timeout == 12.0
    assert dagster.push.budget.max_duration_s is cli.push.budget.max_duration_s is None
    assert dagster.urgency.horizon_days == cli.urgency.horizon_days == 5
    assert dagster.refresh.share == cli.refresh.share == pytest.approx(0.1)
    assert dagster.refresh.max_requests == cli.refresh.max_requests == 50
    assert dagster.properties.update_sub_units is cli.properties.update_sub_units is False
    checks = resources["sync_checks"]
    assert isinstance(checks, SyncChecksResource) and checks.max_quarantine_share == 0.2


def test_a_flag_is_checked_by_its_settings_validation_and_named(tmp_path: Path) -> None:
    mapping = tmp_path / "mapping.yaml"
    mapping.write_text("{}\n")
    result = CliRunner().invoke(main, ["sync", str(mapping), "--concurrency", "0"])

    assert result.exit_code == 2
    assert "--concurrency" in result.output and "greater than or equal to 1" in result.output


@pytest.mark.parametrize("command", ["plan", "sync", "apply"])
def test_the_lock_wait_is_also_spelled_as_the_snapshot_resources_member(command: str) -> None:
    options = [p for p in main.commands[command].params if "--wait" in p.opts]

    assert len(options) == 1 and "--lock-timeout" in options[0].opts
    assert "lock_timeout" in SnapshotResource.model_fields


def test_a_setting_without_a_member_is_read_by_a_step_as_by_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Settings no resource member projects come from the step's environment; a variable of a
    # projected setting does not override the resource a deployment defined.
    monkeypatch.setenv("PMS_SYNC_TRANSPORT", "httpx")
    monkeypatch.setenv("PMS_SYNC_INSECURE_TLS_FOR", "https://pms.internal:8443")
    monkeypatch.setenv("PMS_SYNC_CONCURRENCY", "3")
    cli = load_settings()
    service = ServiceResource(concurrency=7)
    dagster = service.settings(SnapshotResource(path=str(tmp_path / "snapshot.duckdb")))

    assert dagster.client.transport == cli.client.transport == "httpx"
    assert dagster.client.insecure_tls_hosts == cli.client.insecure_tls_hosts
    assert cli.client.insecure_tls_hosts and dagster.client.transport.value == "httpx"
    assert cli.push.concurrency == 3 and dagster.push.concurrency == 7


def test_a_members_former_name_is_still_read_and_a_conflict_refused(tmp_path: Path) -> None:
    snapshot = SnapshotResource(path=str(tmp_path / "snapshot.duckdb"))
    with pytest.warns(DeprecationWarning, match="service.max_duration_s is deprecated"):
        settings = ServiceResource(max_duration_s=60).settings(snapshot)
    assert settings.push.budget.max_duration_s == 60
    with pytest.warns(DeprecationWarning, match="use service.refresh_max"):
        settings = ServiceResource(refresh="10%", refresh_max_requests=5).settings(snapshot)
    assert settings.refresh.max_requests == 5
    assert ServiceResource(max_duration=90).settings(snapshot).push.budget.max_duration_s == 90

    with pytest.warns(DeprecationWarning), pytest.raises(ConfigError, match="disagree"):
        ServiceResource(max_duration=90, max_duration_s=60).settings(snapshot)


def test_the_components_own_service_and_snapshot_take_the_resources_members_and_defaults() -> None:
    # defs.yaml's `service:` and `snapshot:` are the resources themselves: no member or
    # default of their own, so what the settings model declares is what dg validates.
    schema = PmsSyncComponent.model().model_json_schema()
    for attribute, resource in (("service", ServiceResource), ("snapshot", SnapshotResource)):
        options = schema["properties"][attribute]["anyOf"]
        assert {"$ref": f"#/$defs/{resource.__name__}"} in options
        assert set(schema["$defs"][resource.__name__]["properties"]) == set(resource.model_fields)
    for section, field, resource, member in _members():
        if resource in (ServiceResource, SnapshotResource):
            documented = schema["$defs"][resource.__name__]["properties"][member]
            assert documented.get("default") == section.default(field), member

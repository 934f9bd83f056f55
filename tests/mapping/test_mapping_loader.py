"""Reading mapping files: errors name the file, the line and the member."""

from __future__ import annotations

from pathlib import Path

import pytest
from mapping_helpers import dedent

from connector.contract import Entity
from connector.errors import MappingError
from connector.mapping import load_mapping

MINIMAL = """\
account: {constant: demo}
inputs:
  units: {type: csv, path: units.csv}
entities:
  accommodation:
    input: units
    fields:
      id: unit_id
      name: name
      street: street
      streetNumber: no
      country: country
      city: city
      wifiName: wifi
      wifiCode: wifi_code
      doorCode: door
"""


def write(tmp_path: Path, text: str, name: str = "units.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_minimal_mapping_loads_with_documented_defaults(tmp_path: Path) -> None:
    mapping = load_mapping(write(tmp_path, MINIMAL))
    assert mapping.name == "units"
    accommodation = mapping.entities[Entity.ACCOMMODATION]
    assert accommodation.on_missing == "deactivate"
    assert accommodation.full_export is True
    assert Entity.RESERVATION not in mapping.entities
    assert mapping.dagster.schedule == "0 2 * * *"
    assert mapping.dagster.timezone == "UTC"
    assert mapping.dagster.drop_folder is None


def test_an_unknown_member_is_named_with_its_line(tmp_path: Path) -> None:
    text = MINIMAL.replace("      city: city\n", "      city: city\n      citty: town\n")
    with pytest.raises(MappingError) as raised:
        load_mapping(write(tmp_path, text))
    error = raised.value
    assert error.line == 14
    assert error.member == "entities.accommodation.fields.citty"
    assert "unknown member 'citty'" in str(error)
    assert str(error).startswith(f"{tmp_path / 'units.yaml'}:14: ")


def test_a_missing_required_field_names_the_member(tmp_path: Path) -> None:
    text = MINIMAL.replace("      doorCode: door\n", "")
    with pytest.raises(MappingError) as raised:
        load_mapping(write(tmp_path, text))
    assert raised.value.member == "entities.accommodation.fields.doorCode"
    assert raised.value.line == 7  # the fields: line, where the member belongs
    assert "required member 'doorCode' is missing" in str(raised.value)


def test_an_invalid_expression_points_at_its_line(tmp_path: Path) -> None:
    text = MINIMAL.replace("      city: city\n", "      city: {column: city, constant: x}\n")
    with pytest.raises(MappingError) as raised:
        load_mapping(write(tmp_path, text))
    assert raised.value.line == 13
    assert raised.value.member == "entities.accommodation.fields.city"
    assert "exactly one of" in str(raised.value)


def test_invalid_yaml_is_reported_with_its_line(tmp_path: Path) -> None:
    with pytest.raises(MappingError) as raised:
        load_mapping(write(tmp_path, "inputs:\n  a: [unclosed\nentities: {}\n"))
    assert raised.value.line is not None
    assert "invalid YAML" in str(raised.value)


def test_environment_references_are_resolved_and_defaults_apply(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PMS_TEST_ACCOUNT", "hotel-7")
    text = MINIMAL.replace("{constant: demo}", "{constant: '${PMS_TEST_ACCOUNT}'}")
    text += "dagster:\n  timezone: ${PMS_TEST_TZ:-Europe/Berlin}\n"
    mapping = load_mapping(write(tmp_path, text))
    assert mapping.account.constant == "hotel-7"
    assert mapping.dagster.timezone == "Europe/Berlin"


def test_a_missing_environment_variable_is_named(tmp_path: Path) -> None:
    text = MINIMAL.replace("{constant: demo}", "{constant: '${PMS_TEST_UNSET_VARIABLE}'}")
    with pytest.raises(MappingError) as raised:
        load_mapping(write(tmp_path, text))
    assert "PMS_TEST_UNSET_VARIABLE" in str(raised.value)
    assert raised.value.line == 1


def test_an_alias_bomb_is_rejected(tmp_path: Path) -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, 8):
        previous = f"*a{level - 1}"
        lines.append(f"a{level}: &a{level} [{', '.join([previous] * 10)}]")
    with pytest.raises(MappingError, match="aliases"):
        load_mapping(write(tmp_path, "\n".join(lines) + "\n"))


def test_yaml_words_like_on_and_yes_stay_text(tmp_path: Path) -> None:
    text = MINIMAL.replace(
        "    input: units\n",
        "    input: units\n    filter:\n      - {column: active, equals: yes}\n",
    )
    mapping = load_mapping(write(tmp_path, text))
    assert mapping.entities[Entity.ACCOMMODATION].filter[0].equals == "yes"


def test_dagster_settings_pass_through_and_drop_folder_is_relative_to_the_file(
    tmp_path: Path,
) -> None:
    text = MINIMAL + dedent(
        """
        name: berlin-flats
        dagster:
          schedule: "30 3 * * *"
          timezone: Europe/Berlin
          drop_folder: drops
          partitions_start: "2025-01"
        """
    )
    mapping = load_mapping(write(tmp_path, text))
    assert mapping.name == "berlin-flats"
    assert mapping.dagster.schedule == "30 3 * * *"
    assert mapping.dagster.drop_folder == str((tmp_path / "drops").resolve())
    assert mapping.dagster.partitions_start == "2025-01"


def test_a_malformed_partitions_start_is_rejected(tmp_path: Path) -> None:
    text = MINIMAL + "dagster:\n  partitions_start: 2025-13\n"
    with pytest.raises(MappingError) as raised:
        load_mapping(write(tmp_path, text))
    assert raised.value.member == "dagster.partitions_start"


def test_an_entity_without_account_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(MappingError, match="no account"):
        load_mapping(write(tmp_path, MINIMAL.replace("account: {constant: demo}\n", "")))


def test_an_entity_reading_an_undeclared_input_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(MappingError, match="not among the inputs"):
        load_mapping(write(tmp_path, MINIMAL.replace("input: units", "input: rooms")))


def test_reservation_policies_are_exposed(tmp_path: Path) -> None:
    mapping = load_mapping(Path(__file__).parents[2] / "mappings" / "hotel" / "mapping.yaml")
    reservation = mapping.entities[Entity.RESERVATION]
    assert reservation.on_missing == "ignore"
    assert reservation.full_export is True
    assert reservation.volatile_paths == ["updatedAt"]
    assert mapping.name == "hotel"


def test_an_unknown_on_missing_policy_is_rejected(tmp_path: Path) -> None:
    text = MINIMAL.replace(
        "    input: units\n", "    input: units\n    on_missing: cancel_future\n"
    )
    with pytest.raises(MappingError) as raised:
        load_mapping(write(tmp_path, text))
    assert raised.value.member == "entities.accommodation.on_missing"

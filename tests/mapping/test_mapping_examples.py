"""The bundled example mappings, the JSON Schema of the format, and the CLI on them."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest
from click.testing import CliRunner

from connector.cli import main
from connector.contract import Entity
from connector.mapping import load_mapping, map_records
from connector.mapping.schema import render
from connector.records import DateWindow

ROOT = Path(__file__).parents[2]
EXAMPLES = ["hotel", "vacation_rental", "sql_pms"]


@pytest.mark.parametrize("example", EXAMPLES)
def test_each_example_maps_every_record_without_quarantine(example: str) -> None:
    mapping = load_mapping(ROOT / "mappings" / example / "mapping.yaml")
    batches = map_records(mapping)
    assert set(batches) == {Entity.ACCOMMODATION, Entity.RESERVATION}
    for batch in batches.values():
        assert batch.quarantine.empty, batch.quarantine.to_string()
        assert len(batch.records) >= 10


@pytest.mark.parametrize("example", EXAMPLES)
def test_each_example_starts_with_the_schema_line(example: str) -> None:
    first = (ROOT / "mappings" / example / "mapping.yaml").read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=../schema.json"


@pytest.mark.parametrize("example", EXAMPLES)
def test_each_example_generator_reproduces_the_committed_sample(
    example: str, tmp_path: Path
) -> None:
    folder = ROOT / "mappings" / example
    data = folder if example == "sql_pms" else folder / "data"
    # The sample is generated around a day (its anchor): the committed one names its own.
    anchor = json.loads((data / "sample.json").read_text())["anchor"]
    command = [sys.executable, str(folder / "generate.py"), "--out", str(tmp_path)]
    subprocess.run([*command, "--anchor", anchor], check=True)
    if example == "sql_pms":
        assert (tmp_path / "pms.sql").read_text() == (folder / "pms.sql").read_text()
        return
    for generated in sorted(tmp_path.iterdir()):
        assert generated.read_bytes() == (folder / "data" / generated.name).read_bytes()


@pytest.mark.parametrize("example", EXAMPLES)
def test_each_example_generated_today_has_arrivals_in_the_nightly_window(
    example: str, tmp_path: Path
) -> None:
    folder = ROOT / "mappings" / example
    subprocess.run(
        [
            sys.executable,
            str(folder / "generate.py"),
            "--out",
            str(tmp_path),
            "--anchor",
            "2031-05-01",
        ],
        check=True,
    )
    mapping = load_mapping(folder / "mapping.yaml")
    for name, source in mapping.inputs.items():  # read the generated files instead
        if hasattr(source, "path"):
            mapping.inputs[name] = source.model_copy(
                update={"path": str(tmp_path / Path(source.path).name)}
            )
        else:
            mapping.inputs[name] = source.model_copy(
                update={"url": f"sqlite:///{tmp_path / 'pms.sqlite'}"}
            )
    window = DateWindow(date(2031, 4, 1), date(2032, 6, 1))  # last month to twelve ahead

    batches = map_records(mapping, entities=[Entity.RESERVATION], window=window)

    assert len(batches[Entity.RESERVATION].records) >= 10


def test_the_committed_json_schema_is_current() -> None:
    committed = (ROOT / "mappings" / "schema.json").read_text(encoding="utf-8")
    assert committed == render(), (
        "regenerate with: python -m connector.mapping.schema mappings/schema.json"
    )


def test_the_json_schema_describes_entities_and_expressions() -> None:
    schema = json.loads(render())
    assert set(schema["properties"]) >= {"inputs", "entities", "account", "lookups", "dagster"}
    assert "Expression" in schema["$defs"]
    assert "wifiCode" in schema["$defs"]["AccommodationFields"]["required"]


def test_validate_reports_counts_and_exits_zero_on_a_clean_example() -> None:
    result = CliRunner().invoke(
        main, ["validate", str(ROOT / "mappings" / "hotel" / "mapping.yaml")]
    )
    assert result.exit_code == 0, result.output
    assert "reservation: 60 valid, 0 quarantined" in result.output
    assert "accounts: demo, demo-2" in result.output


def test_validate_lists_problems_and_exits_non_zero(tmp_path: Path) -> None:
    (tmp_path / "units.csv").write_text("id,land\nu1,Atlantis\nu2,Italy\n")
    mapping = tmp_path / "units.yaml"
    mapping.write_text(
        "account: {constant: demo}\n"
        "inputs: {units: {path: units.csv}}\n"
        "entities:\n"
        "  accommodation:\n"
        "    input: units\n"
        "    fields: {id: id, name: id, street: id, streetNumber: id, country: land,\n"
        "             city: id, wifiName: id, wifiCode: id, doorCode: id}\n"
    )
    result = CliRunner().invoke(main, ["validate", str(mapping)])
    assert result.exit_code != 0
    assert "accommodation: 1 valid, 1 quarantined" in result.output
    assert "units.csv:1 country: unknown country, got 'Atlantis'" in result.output


def test_validate_names_the_line_of_a_broken_mapping(tmp_path: Path) -> None:
    mapping = tmp_path / "broken.yaml"
    mapping.write_text("account: {constant: demo}\ninputs: {}\nentities: {}\n")
    result = CliRunner().invoke(main, ["validate", str(mapping)])
    assert result.exit_code != 0
    assert "broken.yaml:2" in result.output


def test_preview_shows_mapped_json_with_codes_and_contacts_masked() -> None:
    path = ROOT / "mappings" / "vacation_rental" / "mapping.yaml"
    result = CliRunner().invoke(main, ["preview", str(path), "--entity", "reservation", "-n", "2"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert list(shown) == ["reservation"] and len(shown["reservation"]) == 2
    guest = shown["reservation"][0]["resource"]["primaryGuest"]
    assert guest["email"] == "***" and guest["phone"] == "***"
    assert "@example.org" not in result.output

    units = CliRunner().invoke(main, ["preview", str(path), "--entity", "accommodation", "-n", "3"])
    for record in json.loads(units.output)["accommodation"]:
        assert record["resource"]["doorCode"] == "***"
        assert record["resource"]["wifiCode"] == "***"
    assert "Schlüsselbox" not in units.output

"""Reservation statuses that mean "cancelled" in the PMS's words but are not CANCELLED (spec
§2.8): `validate` names them with their records and the `map:` to add, a mapping can declare
values that are no cancellation, and `pms-sync init` drafts the map from the export."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner, Result

from connector.cli import main
from connector.contract import Entity
from connector.mapping import load_mapping, map_records
from tests.mapping.status_exports import (
    CANCELLATION_LIKE,
    STATUSES,
    sent_statuses,
    status_lines,
    validate,
    write_export,
    write_mapping,
)


def test_validate_names_each_status_that_means_cancelled_its_records_and_the_map_to_add(
    tmp_path: Path,
) -> None:
    mapping = write_mapping(tmp_path, "Status")

    result = validate(mapping)

    assert result.exit_code != 0
    assert "4 reservation status value(s) may mean cancelled but are not CANCELLED" in result.output
    assert "'Cancelled' 2, 'Canceled by guest' 1, 'annulé' 1, 'storniert' 1" in result.output
    assert "their 5 record(s) are quarantined, not sent as live stays" in result.output
    assert "mapping.yaml line 9 (entities.reservation.fields.status)" in result.output
    (advice,) = status_lines(result.output)
    assert yaml.safe_load(advice) == {
        "status": {"column": "Status", "map": dict.fromkeys(CANCELLATION_LIKE, "CANCELLED")}
    }
    batch = map_records(load_mapping(mapping))[Entity.RESERVATION]
    assert sorted(batch.records["record_id"]) == ["B1", "B7", "B8"]
    records = batch.quarantine.drop_duplicates("record_id")
    assert records.groupby("value").size().to_dict() == CANCELLATION_LIKE
    rows = batch.quarantine.loc[batch.quarantine["record_id"] == "B6"]
    assert (rows["input"].tolist(), rows["rows"].tolist(), rows["field"].tolist()) == (
        ["bookings.csv", "bookings.csv"],
        ["6", "7"],
        ["status", "status"],
    )


def test_the_map_validate_prints_sends_them_as_cancelled(tmp_path: Path) -> None:
    advice = status_lines(validate(write_mapping(tmp_path / "first", "Status")).output)[0]
    fixed = write_mapping(tmp_path / "fixed", advice.removeprefix("status: "))

    result = validate(fixed)

    assert result.exit_code == 0, result.output
    assert sent_statuses(fixed) == {
        **STATUSES,
        **{booking: "CANCELLED" for booking in ("B2", "B3", "B4", "B5", "B6")},
    }


def test_a_value_declared_not_cancelled_is_sent_as_it_is(tmp_path: Path) -> None:
    statuses = {**STATUSES, "B9": "Cancellation requested"}
    flagged = validate(write_mapping(tmp_path / "first", "Status", statuses))
    mapped = "{column: Status, map: {Cancelled: CANCELLED, Canceled by guest: CANCELLED, storniert: CANCELLED, annulé: CANCELLED}"  # fmt: skip
    declared = write_mapping(
        tmp_path / "declared", mapped + ", not_cancelled: [cancellation REQUESTED]}", statuses
    )

    result = validate(declared)

    assert "'Cancellation requested' 1" in flagged.output
    assert result.exit_code == 0, result.output
    assert sent_statuses(declared)["B9"] == "Cancellation requested"


def test_not_cancelled_belongs_to_the_reservation_status_only(tmp_path: Path) -> None:
    mapping = write_mapping(tmp_path, "Status")
    text = mapping.read_text(encoding="utf-8").replace(
        "unitName: room", "unitName: {column: room, not_cancelled: [x]}"
    )
    mapping.write_text(text, encoding="utf-8")

    result = validate(mapping)

    assert result.exit_code != 0
    assert "not_cancelled" in result.output and "unitName" in result.output


def test_numeric_status_codes_are_caught_and_the_advice_cannot_pass_as_pasted(
    tmp_path: Path,
) -> None:
    codes = {"B1": "1", "B2": "3", "B3": "1", "B4": "2"}
    result = validate(write_mapping(tmp_path / "codes", "Status", codes))
    (advice,) = status_lines(result.output)
    pasted = validate(write_mapping(tmp_path / "pasted", advice.removeprefix("status: "), codes))
    answered = write_mapping(
        tmp_path / "answered",
        "{column: Status, map: {'3': CANCELLED}, not_cancelled: [1, 2]}",
        codes,
    )

    assert result.exit_code != 0
    assert "'1' 2, '2' 1, '3' 1" in result.output
    assert "numeric codes (1, 2, 3): only the PMS knows which mean cancelled" in result.output
    assert pasted.exit_code != 0  # the placeholders are no answer
    assert validate(answered).exit_code == 0
    assert sent_statuses(answered) == {"B1": "1", "B2": "CANCELLED", "B3": "1", "B4": "2"}


def test_a_map_default_or_lookup_that_gives_a_cancellation_word_is_caught(tmp_path: Path) -> None:
    by_default = write_mapping(
        tmp_path / "default",
        "{column: Status, map: {Confirmed: CONFIRMED}, map_default: Storniert}",
    )

    result = validate(by_default)

    assert result.exit_code != 0
    assert "'Storniert' 7" in result.output
    assert "'Storniert' is the member's map_default or default: change that" in result.output


# ------------------------------------------------------------------------------- pms-sync init


def init(export: Path, out: Path, *extra: str) -> Result:
    return CliRunner().invoke(
        main, ["init", str(export), "--out", str(out), "--account", "demo", *extra]
    )


def test_init_drafts_a_status_map_sending_cancellations_to_cancelled(tmp_path: Path) -> None:
    # A cancellation far down the export, beyond the rows init samples for the layout.
    many = {f"B{n}": "Confirmed" for n in range(10, 400)} | STATUSES | {"B999": "annulée"}
    export = write_export(tmp_path / "export", many)
    out = tmp_path / "draft" / "mapping.yaml"

    result = init(export, out, "--json")

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    drafted = yaml.safe_load(out.read_text(encoding="utf-8"))
    status = drafted["entities"]["reservation"]["fields"]["status"]
    assert status == {
        "column": "Status",
        "map": dict.fromkeys(["Cancelled", *list(CANCELLATION_LIKE)[1:], "annulée"], "CANCELLED"),
    }
    (note,) = [text for text in document["notes"] if text.startswith("status:")]
    assert "'Cancelled' (3), 'Canceled by guest' (1)" in note and "'annulée' (1)" in note
    assert "'Confirmed' (391), 'Checked in' (1) sent as they are" in note
    batch = map_records(load_mapping(out))[Entity.RESERVATION]
    assert batch.quarantine.empty and len(batch.records) == len(many)


def test_init_asks_which_numeric_codes_mean_cancelled(tmp_path: Path) -> None:
    export = write_export(tmp_path / "export", {"B1": "1", "B2": "3", "B3": "2"})
    out = tmp_path / "mapping.yaml"

    result = init(export, out)

    assert result.exit_code == 0, result.output
    drafted = yaml.safe_load(out.read_text(encoding="utf-8"))
    placeholder = drafted["entities"]["reservation"]["fields"]["status"]["fill_in"]
    assert "column Status holds the codes 1, 2, 3" in placeholder
    assert "reservation.status" in result.output  # among the members to fill in

"""Hostile and broken exports through the mapping engine and the CLI: each bad row becomes a
quarantine entry naming its row and field while the rest of the run completes; an input that
cannot be read at all stops the run before anything is sent, with its file and row named.

Why a broken *file* stops the run instead of being skipped: inputs are full exports by default,
and a file cut off at row 5 would otherwise read as "every later stay was deleted", and the
reconciliation would deactivate units and cancel future stays that still exist.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from connector.cli import main as pms_sync
from connector.contract import Entity
from connector.errors import MappingError, SourceError
from connector.pipeline import load_batches
from connector.sandbox.testing import SandboxHandle
from connector.sources.limits import MIB
from tests.reliability.campaign import ACCOUNT, TOKEN, Source
from tests.sources.workbooks import inflating_workbook

MEGA = "A" * 1_000_000
CONTROL = "Ann\x07\x1b[31m"  # a bell and a terminal escape: refused by default
ODD = "Ann \u202e😀🏨 Zoë"  # a bidi override, emoji, accents: visible text, sent as it is
FORMULA = '=HYPERLINK("http://evil.example","click")'

# (stay id, first_name, arrival, adults) → expected: a passed-through value, or the quarantined field
ROWS = {
    "S-MEGA": (MEGA, "2027-02-01", "2"),
    "S-CONTROL": (CONTROL, "2027-02-01", "2"),
    "S-ODD": (ODD, "2027-02-01", "2"),
    "S-FORMULA": (FORMULA, "2027-02-01", "2"),
    "S-EXP": ("Exp", "2027-02-01", "2e0"),
    "S-ZERO-DATE": ("Zero", "0000-00-00", "2"),
    "S-FEB31": ("Feb", "31.02.2025", "2"),
    "S-YEAR-2925": ("Typo", "2925-02-01", "2"),  # crashed the whole mapping run before
    "S-NEGATIVE": ("Neg", "2027-02-01", "-2"),
    "S-FRACTION": ("Frac", "2027-02-01", "2.5"),
}
QUARANTINED = {
    "S-CONTROL": "firstName",
    "S-ZERO-DATE": "checkin",
    "S-FEB31": "checkin",
    "S-YEAR-2925": "checkin",
    "S-NEGATIVE": "adults",
    "S-FRACTION": "adults",
}


def hostile_export(folder: Path) -> Path:
    source = Source.generate(random.Random(8), units=3, stays=5)
    for stay_id, (first_name, arrival, adults) in ROWS.items():
        source.stays[stay_id] = {
            "stay_id": stay_id,
            "first_name": first_name,
            "email": "guest@example.org",
            "unit_id": "U1",
            "arrival": arrival,
            "departure": "2927-02-04" if arrival.startswith("2925") else "2027-02-04",
            "adults": adults,
        }
    # The same id twice with different content: neither row wins, both are quarantined. (Rows
    # of a stay are its booked units: two rows of S-DUP are two units with the same id.)
    source.stays["S-DUP"] = dict(source.stays["S-EXP"], stay_id="S-DUP", adults="1")
    mapping = source.write(folder)
    stays = folder / "stays.csv"
    duplicate = dict(source.stays["S-DUP"], adults="3")
    stays.write_text(stays.read_text() + ",".join(duplicate.values()) + "\n")
    units = folder / "units.csv"
    units.write_text(units.read_text() + "U-DUP,Flat A,wifi-1,111111\nU-DUP,Flat B,wifi-2,222222\n")
    return mapping


def test_bad_rows_are_quarantined_by_row_and_field_and_odd_but_valid_values_pass(
    tmp_path: Path,
) -> None:
    batches, _ = load_batches(hostile_export(tmp_path / "export"))

    stays = batches[Entity.RESERVATION]
    quarantine = {row.record_id: row for row in stays.quarantine.itertuples()}
    sent = {row.record_id: json.loads(row.payload) for row in stays.records.itertuples()}
    assert set(quarantine) == {*QUARANTINED, "S-DUP"}
    for stay_id, field in QUARANTINED.items():
        assert field in quarantine[stay_id].field and quarantine[stay_id].rows
    assert "S-DUP-1" in quarantine["S-DUP"].reason
    assert len(quarantine["S-DUP"].rows.split(",")) == 2  # both rows named
    (unit,) = batches[Entity.ACCOMMODATION].quarantine.itertuples()
    assert (unit.record_id, unit.rows) == ("U-DUP", "4,5")
    assert "duplicate key with conflicting content" in unit.reason
    assert "111111" not in unit.value and "222222" not in unit.value  # door codes masked
    # Passed through as data: the service is not a spreadsheet, nothing here evaluates them.
    assert sent["S-FORMULA"]["primaryGuest"]["firstName"] == FORMULA
    assert "U+0007" in quarantine["S-CONTROL"].reason
    assert sent["S-ODD"]["primaryGuest"]["firstName"] == ODD
    assert sent["S-MEGA"]["primaryGuest"]["firstName"] == MEGA
    assert sent["S-EXP"]["unitReservations"][0]["adults"] == 2
    assert len(sent) == 5 + 4  # the generated stays and the four valid odd ones


@pytest.mark.slow
def test_a_sync_of_a_hostile_export_delivers_every_valid_record_exactly(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    mapping = hostile_export(tmp_path / "export")

    result = CliRunner().invoke(
        pms_sync,
        ["sync", str(mapping), "--json", *_service_options(clean_sandbox, tmp_path)],
        env={"PMS_SYNC_TOKEN": TOKEN},
    )

    report = json.loads(result.output)
    assert result.exit_code == 0, result.output
    assert report["quarantine"] == {"accommodation": 1, "reservation": 7}
    held = {r["id"]: r["resource"] for r in clean_sandbox.records(ACCOUNT, "reservation")}
    assert held["S-FORMULA"]["primaryGuest"]["firstName"] == FORMULA
    assert held["S-ODD"]["primaryGuest"]["firstName"] == ODD
    assert held["S-MEGA"]["primaryGuest"]["firstName"] == MEGA
    assert not set(held) & {*QUARANTINED, "S-DUP"}
    assert len(held) == 9


def _service_options(sandbox: SandboxHandle, tmp_path: Path) -> list[str]:
    return ["--base-url", sandbox.base_url, "--snapshot", str(tmp_path / "snapshot.duckdb")]


def _export_with(tmp_path: Path, edit) -> Path:
    mapping = Source.generate(random.Random(9), units=3, stays=6).write(tmp_path / "export")
    edit(tmp_path / "export" / "stays.csv")
    return mapping


@pytest.mark.parametrize(
    ("name", "edit", "expected"),
    [
        (
            "unterminated quote at the end",
            lambda p: p.write_text(p.read_text() + 'S99,"Ann,a@example.org,U1,2027-0\n'),
            r"stays.csv is not well-formed CSV at line 8: .*\(input stays, row 7\)",
        ),
        (
            "last row cut short",
            lambda p: p.write_text(p.read_text()[:-20] + "\n"),
            r"stays.csv is not well-formed CSV at line 7: \d fields where the header has 7 "
            r".*\(input stays, row 6\)",
        ),
        (
            # Without a final newline the export-stability guard stops it before parsing.
            "cut mid-row, no final newline",
            lambda p: p.write_text(p.read_text()[:-20]),
            r"stays.csv does not end with a newline: its last row looks partly written; "
            r"nothing was read or sent",
        ),
        (
            "a stray carriage return inside an unquoted value",
            lambda p: p.write_bytes(_replace_in_row(p.read_bytes(), 2, b",", b"\r,", count=1)),
            r"stays.csv is not well-formed CSV at line 3: a carriage return \(\\r\) inside the "
            r"unquoted value of column 'stay_id' splits the row \(1 fields where the header has "
            r"7\)\. Remove the stray \\r .*\(input stays, row 2\)",
        ),
        (
            "a 3 MB cell, over the default row limit",
            lambda p: p.write_bytes(
                _replace_in_row(p.read_bytes(), 3, b",", b"," + b"x" * 3_000_000 + b",", count=1)
            ),
            r"stays.csv line 4 starts a .* the limit of 2 MiB \(the default\) for one row; .*"
            r"`max_line_mb:` on the input .*\(input stays, row 3\)",
        ),
        (
            "latin-1 bytes in a UTF-8 export",
            lambda p: p.write_bytes(
                p.read_bytes()
                + "S98,Jürgen,j@example.org,U1,2027-01-01,2027-01-03,2\n".encode("latin-1")
            ),
            r"stays.csv line 8 is not valid utf_8 .*`encoding:`.*\(input stays, row 7\)",
        ),
    ],
)
def test_an_unreadable_export_names_file_and_row_and_nothing_is_sent(
    tmp_path: Path, clean_sandbox: SandboxHandle, name: str, edit, expected: str
) -> None:
    mapping = _export_with(tmp_path, edit)

    with pytest.raises(SourceError, match=expected):
        load_batches(mapping)
    result = CliRunner().invoke(
        pms_sync,
        ["sync", str(mapping), *_service_options(clean_sandbox, tmp_path)],
        env={"PMS_SYNC_TOKEN": TOKEN},
    )
    assert result.exit_code == 1 and "stays.csv" in result.output, name
    assert clean_sandbox.count() == 0


def _replace_in_row(data: bytes, row: int, old: bytes, new: bytes, count: int) -> bytes:
    """``data`` with ``old`` replaced in its data row ``row`` (1 = the first after the header)."""
    lines = data.split(b"\n")
    lines[row] = lines[row].replace(old, new, count)
    return b"\n".join(lines)


def test_an_export_with_mixed_line_endings_is_synced_like_a_clean_one(
    tmp_path: Path, clean_sandbox: SandboxHandle
) -> None:
    clean = _export_with(tmp_path / "clean", lambda p: None)
    mixed = _export_with(tmp_path / "mixed", lambda p: None)
    stays = mixed.parent / "stays.csv"
    lines = stays.read_bytes().replace(b"\r\n", b"\n").split(b"\n")
    # A BOM, CRLF on the header, a lone CR after row 2, LF elsewhere: as a hand edit leaves it.
    stays.write_bytes(
        b"\xef\xbb\xbf"
        + lines[0]
        + b"\r\n"
        + lines[1]
        + b"\n"
        + lines[2]
        + b"\r"
        + b"\n".join(lines[3:])
    )

    result = CliRunner().invoke(
        pms_sync,
        ["sync", str(mixed), "--json", *_service_options(clean_sandbox, tmp_path)],
        env={"PMS_SYNC_TOKEN": TOKEN},
    )

    assert result.exit_code == 0, result.output
    expected, _ = load_batches(clean)
    held = {r["id"]: r["resource"] for r in clean_sandbox.records(ACCOUNT, "reservation")}
    assert held == {
        row.record_id: json.loads(row.payload)
        for row in expected[Entity.RESERVATION].records.itertuples()
    }
    assert len(held) == 6


def test_a_zip_bomb_workbook_is_refused_before_parsing_and_nothing_is_sent(
    tmp_path: Path, clean_sandbox: SandboxHandle
) -> None:
    mapping = _export_with(tmp_path, lambda p: None)
    inflating_workbook(mapping.parent / "units.xlsx", 3 * MIB)
    mapping.write_text(
        mapping.read_text().replace(
            "units: {type: csv, path: units.csv}", "units: {type: xlsx, path: units.xlsx}"
        )
    )

    result = CliRunner().invoke(
        pms_sync,
        ["sync", str(mapping), *_service_options(clean_sandbox, tmp_path)],
        env={"PMS_SYNC_TOKEN": TOKEN},
    )

    assert result.exit_code == 1
    assert "units.xlsx was not opened: its member xl/worksheets/sheet1.xml expands" in result.output
    assert "beyond the limit of 100:1 (the default)" in result.output
    assert clean_sandbox.count() == 0


def test_a_header_without_a_mapped_column_names_the_mapping_line_and_the_columns(
    tmp_path: Path,
) -> None:
    mapping = _export_with(
        tmp_path, lambda p: p.write_text(p.read_text().replace("adults", "guests", 1))
    )

    with pytest.raises(MappingError, match=r"mapping.yaml:\d+: unknown column 'adults' in input"):
        load_batches(mapping)


def test_a_yaml_alias_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    mapping = _export_with(tmp_path, lambda p: None)
    lines = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]'] + [
        f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)
    ]
    mapping.write_text("\n".join(lines) + "\n" + mapping.read_text())

    with pytest.raises(MappingError, match="expands to more than"):
        load_batches(mapping)


def test_an_unknown_mapping_key_is_refused_with_its_line(tmp_path: Path) -> None:
    mapping = _export_with(tmp_path, lambda p: None)
    text = mapping.read_text().replace(
        "    on_missing: deactivate\n", "    on_missing: deactivate\n    on_misisng: ignore\n"
    )
    mapping.write_text(text)

    with pytest.raises(MappingError, match=r"mapping.yaml:\d+: unknown member 'on_misisng'"):
        load_batches(mapping)

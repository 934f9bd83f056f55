"""`pms-sync init` on same-shaped exports (a channel manager's yearly files): one input whose
path is a glob reading all of them, its values read across every file, and the records of
each file mapped once the placeholders are filled in."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from connector.cli import main
from connector.contract import Entity
from connector.mapping import load_mapping, map_records

HEADER = "Booking ID,Guest Name,Villa,Arrival,Departure,Adults,Created,Status\n"


def _yearly(folder: Path, years: range) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for year in years:
        path = folder / f"all_{year}.csv"
        path.write_text(
            HEADER
            + f"B{year}1,Ann Lee,Villa Kemuning,{year}-03-01,{year}-03-05,2,{year}-01-02,confirmed\n"
            + f"B{year}2,Bo Chen,Villa Kemuning,{year}-07-10,{year}-07-12,1,{year}-01-03,"
            + ("storniert\n" if year == years[-1] else "confirmed\n")
        )
        paths.append(path)
    return paths


def _init(out: Path, *exports: Path) -> dict:
    result = CliRunner().invoke(
        main, ["init", *map(str, exports), "--out", str(out), "--account", "demo", "--json"]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.splitlines()[0])


def test_yearly_exports_become_one_glob_input_read_whole(tmp_path: Path) -> None:
    exports = _yearly(tmp_path / "exports", range(2022, 2025))
    (tmp_path / "exports" / "villas.csv").write_text("Villa,Bedrooms\nVilla Kemuning,3\n")
    out = tmp_path / "mapping.yaml"

    document = _init(out, *exports, tmp_path / "exports" / "villas.csv")

    mapping = load_mapping(out)
    assert sorted(mapping.inputs) == ["all", "villas"]
    assert mapping.inputs["all"].path == "exports/all_*.csv"
    assert document["unused_inputs"] == ["villas"]
    assert "3 files of the same columns" in document["inputs"]["all"]
    # The status values were read from every file: the last year's cancellation is mapped.
    assert "storniert" in out.read_text()


def test_the_glob_reads_every_file_once_the_mapping_is_filled_in(tmp_path: Path) -> None:
    exports = _yearly(tmp_path / "exports", range(2022, 2025))
    out = tmp_path / "mapping.yaml"
    _init(out, *exports)
    text = out.read_text()
    # What a newcomer writes in the placeholders init leaves.
    text = "\n".join(
        line.split(":", 1)[0] + ": {constant: V1}" if "fill_in" in line else line
        for line in text.splitlines()
    )
    out.write_text(text + "\n")

    records = map_records(load_mapping(out))[Entity.RESERVATION]

    assert records.quarantine.empty, records.quarantine.to_dict("records")
    assert sorted(records.records["record_id"]) == [
        f"B{year}{n}" for year in range(2022, 2025) for n in (1, 2)
    ]


def test_files_of_other_columns_or_a_glob_matching_more_stay_apart(tmp_path: Path) -> None:
    exports = _yearly(tmp_path / "exports", range(2022, 2024))
    other = tmp_path / "exports" / "all_2024.csv"
    other.write_text("Booking ID,Guest Name\nB1,Ann Lee\n")  # other columns: not one input
    out = tmp_path / "mapping.yaml"

    _init(out, *exports, other)

    paths = sorted(spec.path for spec in load_mapping(out).inputs.values())
    # all_2022 and all_2023 only: all_* would read all_2024 too, all_202* as well; each alone.
    assert paths == ["exports/all_2022.csv", "exports/all_2023.csv", "exports/all_2024.csv"]

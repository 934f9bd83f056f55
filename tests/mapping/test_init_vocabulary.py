"""`pms-sync init` reads the vocabulary of PMS and channel exports: members named as the
contract names them (RatePlan, CancellationPolicyCode), the channel managers' column names
(No_of_adult, StayDateFrom/StayDateTo, BookedDate, Total_inclusive_rate), German and French
headers, and exports with one row per guest whose main guest a flag column marks."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from connector.cli import main
from connector.contract import Entity
from connector.mapping import load_mapping, map_records

CHANNEL = (
    "BookingId,BookedDate,StayDateFrom,StayDateTo,Room,No_of_adult,No_of_child,"
    "Total_inclusive_rate,RatePlan,CancellationPolicyCode,Guest_First_Name,Guest_Last_Name,"
    "Main_Guest\n"
    "B1,2026-01-02,2026-03-01,2026-03-04,Villa A,2,1,300.00,BAR,NR,Ann,Lee,Y\n"
    "B1,2026-01-02,2026-03-01,2026-03-04,Villa A,2,1,300.00,BAR,NR,Bo,Lee,N\n"
    "B2,2026-01-05,2026-04-10,2026-04-12,Villa B,3,0,150.00,PROMO,FLEX,Cy,Chen,Y\n"
)
GERMAN = "Buchungsnr,Anreise,Abreise,Zimmer,Erw.,Kinder,Vorname,Nachname\nB7,01.03.2026,04.03.2026,12,2,1,Eva,Maier\n"


def _init(tmp_path: Path, name: str, text: str) -> tuple[dict, Path]:
    export = tmp_path / name
    export.write_text(text, encoding="utf-8")
    out = tmp_path / "mapping.yaml"
    result = CliRunner().invoke(
        main, ["init", str(export), "--out", str(out), "--account", "demo", "--json"]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.splitlines()[0]), out


def test_a_channel_managers_columns_and_its_main_guest_flag_are_drafted(tmp_path: Path) -> None:
    document, out = _init(tmp_path, "channel.csv", CHANNEL)

    matched = document["matched"]["reservation"]
    assert matched["createdAt"] == "BookedDate"
    assert matched["unitReservations.checkin"] == "StayDateFrom"
    assert matched["unitReservations.checkout"] == "StayDateTo"
    assert matched["unitReservations.adults"] == "No_of_adult"
    assert matched["unitReservations.children"] == "No_of_child"
    assert matched["unitReservations.price"].startswith("Total_inclusive_rate")
    assert (matched["ratePlan"], matched["cancellationPolicyCode"]) == (
        "RatePlan",
        "CancellationPolicyCode",
    )
    # The booking from its main guest's row, the other rows its guests.
    assert "Main_Guest" in matched["unitReservations.guests"]
    text = out.read_text()
    text = "\n".join(
        line.split(":", 1)[0] + ": {constant: CONFIRMED}" if "fill_in" in line else line
        for line in text.splitlines()
    )
    out.write_text(text + "\n")
    batch = map_records(load_mapping(out))[Entity.RESERVATION]

    assert batch.quarantine.empty, batch.quarantine.to_dict("records")
    payloads = {
        record: json.loads(payload)
        for record, payload in zip(
            batch.records["record_id"], batch.records["payload"], strict=True
        )
    }
    assert payloads["B1"]["primaryGuest"]["firstName"] == "Ann"
    assert [g["firstName"] for g in payloads["B1"]["unitReservations"][0]["guests"]] == ["Bo"]
    assert payloads["B2"]["ratePlan"] == "PROMO"


def test_german_headers_with_abbreviations_are_drafted(tmp_path: Path) -> None:
    document, _ = _init(tmp_path, "export.csv", GERMAN)

    matched = document["matched"]["reservation"]
    assert matched["unitReservations.adults"] == "Erw."
    assert matched["unitReservations.children"] == "Kinder"
    assert matched["unitReservations.checkin"].startswith("{column: Anreise")

"""The status vocabulary (connector.mapping.status_vocabulary): which values look like a
cancellation, in seven languages and PMS codes, and which statuses need a check on every row."""

from __future__ import annotations

from pathlib import Path

import pytest

from connector.contract import Entity
from connector.mapping import load_mapping
from connector.mapping.engine import prepare
from connector.mapping.status_vocabulary import WORDS_PATTERN, classify
from tests.mapping.status_exports import write_mapping


@pytest.mark.parametrize(
    ("status", "checked_on_every_row"),
    [
        ("Status", True),
        ("{column: Status, map: {Cancelled: CANCELLED}}", True),
        ("{constant: CONFIRMED}", False),
        ("{column: Status, map: {Cancelled: CANCELLED}, map_default: CONFIRMED}", False),
        ("{column: Status, map: {Cancelled: CANCELLED}, map_default: '4'}", True),
    ],
)
def test_a_status_whose_values_the_file_tells_costs_no_check_per_row(
    tmp_path: Path, status: str, checked_on_every_row: bool
) -> None:
    prepared = prepare(load_mapping(write_mapping(tmp_path, status)))

    assert (WORDS_PATTERN.replace("'", "''") in prepared.queries[Entity.RESERVATION].sql) is (
        checked_on_every_row
    )


@pytest.mark.parametrize(
    "value",
    [
        "Cancelled", "canceled", "CANCELED", "Cancellation", "Canceled by guest",
        "CANCELLED_BY_HOST", "GuestCancelled", "cancelled-by-owner", "Cxl", "CNX", "canx",
        "VOID", "voided", "storniert", "Storno", "Storniert (Gast)", "Stornierung", "annulliert",
        "abgesagt", "gecancelt", "annulé", "ANNULÉE", "Annulation", "cancelada", "cancelado",
        "anulada", "Anulación", "cancellata", "annullata", "disdetta", "geannuleerd",
        "Annulering", "afgezegd", "cancelamento", "anulação", "res_cxl", "Booking cancelled",
    ],
)  # fmt: skip
def test_the_vocabulary_knows_cancellations_in_seven_languages_and_pms_codes(value: str) -> None:
    assert classify([value]) == {value: "cancellation"}


@pytest.mark.parametrize(
    "value",
    [
        "CANCELLED", "Confirmed", "CONFIRMED", "New", "Modified", "Checked in", "Checked-out",
        "No-Show", "NS", "X", "C", "Tentative", "Option", "Anfrage", "bestätigt", "confirmé",
        "In house", "Excellent", "Ancillary", "Canada", "Storage",
    ],
)  # fmt: skip
def test_live_statuses_are_not_taken_for_cancellations(value: str) -> None:
    assert classify([value]) == {}


def test_bare_numbers_are_codes() -> None:
    assert classify(["3", " 12 ", "3a", "1.0", "1.5"]) == {
        "3": "code",
        " 12 ": "code",
        "1.0": "code",
    }

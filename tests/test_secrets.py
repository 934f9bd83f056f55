"""Masking keeps credentials and guest contact data out of anything shown or stored."""

from __future__ import annotations

import json

from connector.contract.examples import EXAMPLE_ACCOMMODATION, EXAMPLE_RESERVATION
from connector.secrets import MASK, is_sensitive, mask_payload


def test_masked_payload_contains_no_secret_value() -> None:
    text = json.dumps(mask_payload({"a": EXAMPLE_ACCOMMODATION, "r": [EXAMPLE_RESERVATION]}))
    for secret in ("wifi-secret-101", "4711#", "ada@example.org", "+44 20 7946 0000"):
        assert secret not in text
    assert "Harbour View 101" in text


def test_masking_keeps_structure_and_marks_presence() -> None:
    masked = mask_payload(EXAMPLE_ACCOMMODATION)
    assert masked["doorCode"] == MASK
    assert masked["wifiName"] == EXAMPLE_ACCOMMODATION["wifiName"]
    assert mask_payload({"doorCode": ""}) == {"doorCode": ""}


def test_header_names_are_matched_case_insensitively() -> None:
    assert is_sensitive("Authorization")
    assert is_sensitive("X-Wishbox-Auth-Token")
    assert not is_sensitive("name")

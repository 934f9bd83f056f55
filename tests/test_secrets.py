"""Masking keeps credentials and guest contact data out of anything shown or stored."""

from __future__ import annotations

import html
import json
import logging
import re
import urllib.parse
from collections.abc import Callable

import pytest
import yaml

from connector.contract.examples import EXAMPLE_ACCOMMODATION, EXAMPLE_RESERVATION
from connector.secrets import (
    MASK,
    is_secret_variable,
    is_sensitive,
    known_secrets,
    mask_payload,
    mask_text,
    parse_error_position,
    redact_url,
    register_environment_value,
    register_secret,
)


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


# -- every encoding a secret can come back in -------------------------------------------------

ECHOED = 'Wlän/Zugang-7731 "x"&<y>😀'
"""A Wi-Fi code with an umlaut, a slash, quotes, markup characters and one beyond the BMP."""


def _upper_hex(text: str) -> str:
    return re.sub(r"\\u([0-9a-f]{4})", lambda m: "\\u" + m.group(1).upper(), text)


def _lower_percent(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), text)


ENCODINGS: dict[str, Callable[[str], str]] = {
    "raw": lambda s: s,
    "JSON, ensure_ascii": lambda s: json.dumps(s)[1:-1],
    "JSON, ensure_ascii, upper-case hex": lambda s: _upper_hex(json.dumps(s)[1:-1]),
    "JSON, UTF-8": lambda s: json.dumps(s, ensure_ascii=False)[1:-1],
    "JSON, escaped slash": lambda s: json.dumps(s)[1:-1].replace("/", "\\/"),
    "JSON quoted inside JSON": lambda s: json.dumps(json.dumps(s))[3:-3],
    "URL, quote": lambda s: urllib.parse.quote(s),
    "URL, quote safe=''": lambda s: urllib.parse.quote(s, safe=""),
    "URL, quote_plus": lambda s: urllib.parse.quote_plus(s),
    "URL, lower-case hex": lambda s: _lower_percent(urllib.parse.quote_plus(s)),
    "HTML, html.escape": lambda s: html.escape(s),
    "HTML, named references": lambda s: html.escape(s).replace("ä", "&auml;"),
    "HTML, decimal references": lambda s: "".join(f"&#{ord(c)};" for c in s),
    "HTML, hex references": lambda s: "".join(f"&#x{ord(c):X};" for c in s),
}


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_secret_is_masked_in_every_encoding_a_service_may_echo_it_in(encoding: str) -> None:
    echoed = ENCODINGS[encoding](ECHOED)

    masked = mask_text(f"refused: wifi code {echoed} is not accepted", also=[ECHOED])

    assert masked == f"refused: wifi code {MASK} is not accepted"


def test_registered_secrets_are_masked_without_being_named_again() -> None:
    register_secret("tok-registry-5531-unit")

    masked = mask_text('{"detail": "token tok-registry-5531-unit\\/ refused"}')

    assert "tok-registry-5531-unit" in known_secrets()
    assert masked == '{"detail": "token ***\\/ refused"}'


def test_members_written_in_text_lose_their_values() -> None:
    text = (
        '{"doorCode": "4711", "email": "ada@example.org", "name": "Room 1"} '
        '\\"wifiCode\\":\\"abc\\" client_secret=s3cr3t&grant_type=client_credentials '
        "Authorization: Bearer eyJhbGciOi.x"
    )

    assert mask_text(text) == (
        '{"doorCode": "***", "email": "***", "name": "Room 1"} '
        '\\"wifiCode\\":\\"***\\" client_secret=***&grant_type=client_credentials '
        "Authorization: Bearer ***"
    )


def test_values_too_short_to_be_secrets_are_not_masked_by_value() -> None:
    assert mask_text("HTTP 400 at 12:00", also=["12", "400"]) == "HTTP *** at 12:00"


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("PMS_SYNC_TOKEN", True),
        ("API_KEYS", True),
        ("DB_PASSWORD", True),
        ("DB_PASS", True),
        ("HOTEL_DOORCODE", True),
        ("SENTRY_DSN", True),
        ("OAUTH_CREDENTIALS", True),
        ("HOTEL_BER_ACCOUNT", False),
        ("HOTEL_COUNTRY_CODE", False),
        ("POSTCODE", False),
        ("PMS_DB_URL", False),
        ("AUTHOR_NAME", False),
    ],
)
def test_the_name_of_an_environment_variable_says_whether_its_value_is_secret(
    name: str, secret: bool
) -> None:
    assert is_secret_variable(name) is secret


def test_only_secret_environment_values_and_url_passwords_are_registered() -> None:
    register_environment_value("HOTEL_BER_ACCOUNT", "acct-not-secret-0042")
    register_environment_value("HOTEL_WIFI_CODE", "wifi-env-secret-0042")
    register_environment_value("PMS_DB_URL", "postgresql://pms:p%40ss-0042@db.internal/pms")

    assert "acct-not-secret-0042" not in known_secrets()
    assert "wifi-env-secret-0042" in known_secrets()
    assert "p@ss-0042" in known_secrets()
    assert "pms" not in known_secrets()  # the user name is not a secret


def test_urls_are_printed_without_user_info() -> None:
    url = "https://ops:s3cret@service.example:8443/path?q=1"

    assert redact_url(url) == "https://service.example:8443/path?q=1"
    assert redact_url(url, show_user=True) == "https://ops:***@service.example:8443/path?q=1"
    assert redact_url("https://tok-as-user@service.example", show_user=True) == (
        "https://***@service.example"
    )
    assert redact_url("http://service.example/a@b") == "http://service.example/a@b"


def test_log_records_of_any_logger_are_masked_when_created(
    caplog: pytest.LogCaptureFixture,
) -> None:
    register_secret("tok-logged-8812-unit")
    caplog.set_level(logging.DEBUG)

    try:
        raise ValueError("refused tok-logged-8812-unit")
    except ValueError:
        logging.getLogger("connector.push._push.deep").debug(
            "sent %s to %s", "tok-logged-8812-unit", "T%C3%B6k", exc_info=True
        )
    logging.getLogger("httpx").info("GET /?token=%s", urllib.parse.quote("tok-logged-8812-unit"))

    text = caplog.text + "".join(str(record.__dict__) for record in caplog.records)
    assert "tok-logged-8812-unit" not in text
    assert "sent *** to T%C3%B6k" in caplog.text
    assert "refused ***" in caplog.text  # the traceback is kept, masked


def test_parse_errors_are_placed_by_line_and_column_without_quoting_the_text() -> None:
    with pytest.raises(yaml.YAMLError) as yaml_error:
        yaml.safe_load("acc-1: ok\nacc-2: [tok-quoted-3399\n")
    with pytest.raises(json.JSONDecodeError) as json_error:
        json.loads('{"acc-1": "tok-quoted-3399"')

    assert "tok-quoted-3399" in str(yaml_error.value)  # what the parser itself would print
    assert parse_error_position(yaml_error.value) == "line 3, column 1"
    assert parse_error_position(json_error.value) == "line 1, column 28"

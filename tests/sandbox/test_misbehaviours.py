"""The sandbox's misbehaviour mode over real sockets: answers that are no acknowledgement,
which of them store the record, and how they are configured and counted."""

from __future__ import annotations

import json
import socket
import urllib.parse
from pathlib import Path
from typing import Any

import httpx
import pytest

from connector.sandbox.testing import SandboxHandle, sandbox_process
from tests.sandbox import payloads

SYNC = "/api/v1/hooks/reservation/connect"
UNITS = "/api/v1/hooks/accommodation/connect"
DEMO_TOKEN = {"X-Wishbox-Auth-Token": "demo-token"}


@pytest.fixture
def sandbox(clean_sandbox: SandboxHandle) -> SandboxHandle:
    return clean_sandbox


def _reservation(reservation_id: str = "res-1") -> dict[str, Any]:
    return payloads.envelope("reservation", payloads.reservation(reservation_id))


def _post_reservation(sandbox: SandboxHandle, reservation_id: str = "res-1") -> httpx.Response:
    return sandbox.http.post(SYNC, json=_reservation(reservation_id), headers=DEMO_TOKEN)


def test_html_200_answers_a_captive_portal_page_and_stores_nothing(sandbox: SandboxHandle) -> None:
    sandbox.set_faults(misbehave_next=1, misbehaviour="html_200")

    response = _post_reservation(sandbox)

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.text.startswith("<!DOCTYPE html>")
    assert response.headers["x-request-id"]
    assert sandbox.records() == []


def test_empty_200_answers_nothing_at_all_and_stores_nothing(sandbox: SandboxHandle) -> None:
    sandbox.set_faults(misbehave_next=1, misbehaviour="empty_200")

    response = _post_reservation(sandbox)

    assert (response.status_code, response.content) == (200, b"")
    assert sandbox.records() == []


def test_error_json_200_answers_an_error_object_and_stores_nothing(sandbox: SandboxHandle) -> None:
    sandbox.set_faults(misbehave_next=1, misbehaviour="error_json_200")

    response = _post_reservation(sandbox)

    assert response.status_code == 200
    assert set(response.json()) == {"error"}
    assert sandbox.records() == []


@pytest.mark.parametrize(
    ("path", "envelope", "counts"),
    [
        (
            SYNC,
            _reservation(),
            {"newReservations": 0, "updatedReservations": 0, "skippedReservations": 0},
        ),
        (
            UNITS,
            payloads.envelope("accommodation", payloads.accommodation()),
            {"savedProperties": 0, "skippedProperties": 0},
        ),
    ],
    ids=["reservation", "accommodation"],
)
def test_zero_counts_200_answers_the_documented_object_with_every_count_0_and_stores_nothing(
    sandbox: SandboxHandle, path: str, envelope: dict[str, Any], counts: dict[str, int]
) -> None:
    sandbox.set_faults(misbehave_next=1, misbehaviour="zero_counts_200")

    response = sandbox.http.post(path, json=envelope, headers=DEMO_TOKEN)

    assert response.status_code == 200
    assert counts.items() <= response.json().items()
    assert sandbox.records() == []


def test_wrong_types_200_stores_the_record_and_answers_its_counts_as_strings(
    sandbox: SandboxHandle,
) -> None:
    sandbox.set_faults(misbehave_next=1, misbehaviour="wrong_types_200")

    response = _post_reservation(sandbox)

    assert response.status_code == 200
    answer = response.json()
    assert (answer["newReservations"], answer["skippedReservations"]) == ("1", "0")
    assert answer["reservationIds"] == ["res-1-u1", "res-1-u2"]
    assert [record["id"] for record in sandbox.records()] == ["res-1"]


def test_empty_object_200_stores_the_record_and_answers_an_empty_object(
    sandbox: SandboxHandle,
) -> None:
    sandbox.set_faults(misbehave_next=1, misbehaviour="empty_object_200")

    response = _post_reservation(sandbox)

    assert (response.status_code, response.json()) == (200, {})
    assert [record["id"] for record in sandbox.records()] == ["res-1"]


@pytest.mark.parametrize("misbehaviour", ["wrong_types_200", "empty_object_200"])
def test_a_misbehaviour_that_processes_the_request_passes_a_refusal_through(
    sandbox: SandboxHandle, misbehaviour: str
) -> None:
    sandbox.set_faults(misbehave_next=1, misbehaviour=misbehaviour)

    response = sandbox.http.post(SYNC, json=_reservation(), headers={"X-Wishbox-Auth-Token": "x"})

    assert response.status_code == 401
    assert response.text == "Invalid authorization token"


def test_redirect_302_points_at_a_login_page_and_stores_nothing(sandbox: SandboxHandle) -> None:
    sandbox.set_faults(misbehave_next=1, misbehaviour="redirect_302")

    response = _post_reservation(sandbox)

    assert response.status_code == 302
    location = urllib.parse.urlsplit(response.headers["location"])
    assert location.path == "/portal/login"
    assert response.headers["x-request-id"]
    assert sandbox.records() == []


def test_reset_after_headers_stores_the_record_sends_the_headers_then_resets(
    sandbox: SandboxHandle,
) -> None:
    sandbox.set_faults(misbehave_next=1, misbehaviour="reset_after_headers")
    host, port = urllib.parse.urlsplit(sandbox.base_url).netloc.split(":")
    content = json.dumps(_reservation()).encode()
    request = (
        f"POST {SYNC} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"X-Wishbox-Auth-Token: demo-token\r\nContent-Length: {len(content)}\r\n\r\n"
    ).encode() + content

    with socket.create_connection((host, int(port)), timeout=5) as connection:
        connection.sendall(request)
        head = b""
        while b"\r\n\r\n" not in head:
            head += connection.recv(4096)
        with pytest.raises(ConnectionResetError):
            while connection.recv(4096):
                pass

    status_line, *header_lines = head.split(b"\r\n\r\n")[0].decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in header_lines)
    assert status_line == "HTTP/1.1 200 OK"
    assert len(headers["x-request-id"]) == 32
    assert int(headers["content-length"]) > 0  # announced, never sent
    assert [record["id"] for record in sandbox.records()] == ["res-1"]


def test_misbehave_next_answers_exactly_the_next_sync_requests(sandbox: SandboxHandle) -> None:
    sandbox.set_faults(misbehave_next=2, misbehaviour="empty_200")

    answers = [_post_reservation(sandbox, f"r{n}").content for n in range(3)]

    assert answers[:2] == [b"", b""]
    assert json.loads(answers[2])["newReservations"] == 1
    assert [record["id"] for record in sandbox.records()] == ["r2"]
    assert sandbox.set_faults()["misbehave_next"] == 0


def test_fail_next_is_served_before_misbehave_next(sandbox: SandboxHandle) -> None:
    sandbox.set_faults(fail_next=1, misbehave_next=1, misbehaviour="html_200")

    statuses = [
        (response.status_code, response.headers["content-type"].split(";")[0])
        for response in (_post_reservation(sandbox) for _ in range(3))
    ]

    assert statuses == [(500, "text/plain"), (200, "text/html"), (200, "application/json")]


def test_misbehaviours_never_touch_the_open_api(sandbox: SandboxHandle) -> None:
    sandbox.set_faults(
        misbehaviour_rates={"html_200": 1.0}, misbehave_next=1, misbehaviour="html_200"
    )

    token = sandbox.http.post(
        "/openapi/v1/oauth2/token",
        data={
            "grant_type": "client_credentials",
            "client_id": "demo-client",
            "client_secret": "demo-secret",
        },
    )
    sync = _post_reservation(sandbox)

    assert token.status_code == 200 and token.json()["access_token"]
    assert sync.headers["content-type"].startswith("text/html")
    assert sandbox.stats()["injected"] == {"html_200": 1}


def test_misbehaviour_rates_share_the_one_seeded_draw_with_the_other_faults(
    sandbox: SandboxHandle,
) -> None:
    def answers() -> list[tuple[int, str]]:
        sandbox.set_faults(
            error_rate=0.2,
            misbehaviour_rates={"html_200": 0.2, "redirect_302": 0.2, "zero_counts_200": 0.2},
            seed=5,
        )
        return [
            (response.status_code, response.headers.get("content-type", "").split(";")[0])
            for response in (_post_reservation(sandbox, f"r{n}") for n in range(40))
        ]

    first, second = answers(), answers()

    assert first == second
    assert {(500, "text/plain"), (200, "text/html"), (302, "")} <= set(first)
    assert (200, "application/json") in first


def test_stats_count_every_injected_misbehaviour_by_kind(sandbox: SandboxHandle) -> None:
    sandbox.set_faults(misbehave_next=2, misbehaviour="html_200")
    for n in range(3):
        _post_reservation(sandbox, f"r{n}")
    sandbox.set_faults(misbehave_next=1, misbehaviour="redirect_302")
    _post_reservation(sandbox, "r9")

    stats = sandbox.stats()

    assert stats["injected"] == {"html_200": 2, "redirect_302": 1}
    assert stats["requests"][f"POST {SYNC}"] == {"200": 3, "302": 1}


@pytest.mark.parametrize(
    "faults",
    [
        {"misbehaviour_rates": {"html_200": 0.6}, "error_rate": 0.6},
        {"misbehaviour_rates": {"html_200": 0.5, "empty_200": 0.6}},
        {"misbehaviour_rates": {"teapot_418": 0.1}},
        {"misbehaviour_rates": {"html_200": 1.5}},
        {"misbehave_next": 1},
        {"misbehave_next": -1, "misbehaviour": "html_200"},
    ],
    ids=[
        "sum-with-error-rate-above-1",
        "misbehaviours-above-1",
        "unknown-kind",
        "rate-above-1",
        "next-without-kind",
        "negative-next",
    ],
)
def test_invalid_misbehaviour_settings_are_refused(
    sandbox: SandboxHandle, faults: dict[str, Any]
) -> None:
    response = sandbox.http.post("/_sandbox/faults", json=faults)

    assert response.status_code == 400
    assert sandbox.http.get("/_sandbox/faults").json()["faults"]["misbehaviour_rates"] == {}


def test_misbehaviour_flags_of_the_command_line_apply_from_the_start(tmp_path: Path) -> None:
    flags = ("--misbehave-next", "1", "--misbehaviour", "redirect_302")
    flags += ("--misbehaviour-rate", "empty_200=0.0")
    with sandbox_process(tmp_path, extra_args=flags) as sandbox:
        statuses = [_post_reservation(sandbox).status_code for _ in range(2)]
        faults = sandbox.http.get("/_sandbox/faults").json()["faults"]

    assert statuses == [302, 200]
    assert faults["misbehaviour_rates"] == {"empty_200": 0.0}

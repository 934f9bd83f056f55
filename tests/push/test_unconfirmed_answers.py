"""Only a documented answer acknowledges a record: syncs against a misbehaving sandbox over
real sockets, and what the snapshot, the report and the next run make of it."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from push_samples import (
    FAST_RETRY,
    batches_of,
    expected_state,
    hotel,
    reservation,
    sandbox_state,
    settings_for,
)

from connector.client import AcknowledgementPolicy
from connector.contract import SYNC_PATHS, Entity
from connector.pipeline import SyncReport, sync_batches
from connector.push import Outcome
from connector.sandbox.faults import STORED_BY, Misbehaviour
from connector.sandbox.testing import SandboxHandle
from connector.snapshot import Snapshot

EVERY_ATTEMPT = FAST_RETRY.max_attempts
UNIT_SYNC = SYNC_PATHS[Entity.ACCOMMODATION]

# What the report says of a unit whose every attempt was answered with the misbehaviour.
UNCONFIRMED_MESSAGES = {
    Misbehaviour.HTML_200: "unconfirmed: HTTP 200 with a text/html body, not the JSON object of "
    "spec §4.1",
    Misbehaviour.EMPTY_200: "unconfirmed: HTTP 200 with an empty body, not the JSON object of "
    "spec §4.1",
    Misbehaviour.ERROR_JSON_200: "unconfirmed: HTTP 200 with an error object (error: ",
    Misbehaviour.ZERO_COUNTS_200: "unconfirmed: HTTP 200 whose counts say nothing was stored "
    "(savedProperties=0, skippedProperties=0)",
    Misbehaviour.WRONG_TYPES_200: "unconfirmed: HTTP 200 whose member savedProperties is a JSON "
    "string, not an integer",
    Misbehaviour.EMPTY_OBJECT_200: "unconfirmed: HTTP 200 with a JSON object without any count",
    Misbehaviour.RESET_AFTER_HEADERS: "the connection broke after the HTTP 200 status line and "
    "headers, before the body",
}


def acknowledged_ids(snapshot_file: Path) -> list[str]:
    with Snapshot.open(snapshot_file) as snapshot:
        return snapshot.acknowledged()["record_id"].tolist()


@pytest.mark.parametrize("misbehaviour", list(UNCONFIRMED_MESSAGES))
def test_an_answer_that_is_no_acknowledgement_leaves_the_record_pending_for_the_next_run(
    service: SandboxHandle, snapshot_file: Path, misbehaviour: Misbehaviour
) -> None:
    source = hotel(units=1, reservations=0)
    settings = settings_for(service.base_url, snapshot_file)
    service.set_faults(misbehave_next=EVERY_ATTEMPT, misbehaviour=misbehaviour)

    first = sync_batches(batches_of(source), settings)
    recorded_by_first = acknowledged_ids(snapshot_file)
    service.set_faults()
    second = sync_batches(batches_of(source), settings)

    assert first.outcomes == {"acknowledged": 0, "dead_lettered": 0, "failed": 0, "pending": 1}
    assert recorded_by_first == []
    [problem] = first.push.problems
    assert (problem.record_id, problem.outcome) == ("U0", Outcome.PENDING)
    assert problem.message.startswith(UNCONFIRMED_MESSAGES[misbehaviour])
    assert problem.attempts == EVERY_ATTEMPT
    assert len(set(problem.request_ids)) == EVERY_ATTEMPT and all(problem.request_ids)
    answered_200 = misbehaviour is not Misbehaviour.RESET_AFTER_HEADERS
    assert first.push.to_json_dict()["unconfirmed"] == int(answered_200)
    assert first.push.unconfirmed_answers == EVERY_ATTEMPT * answered_200
    assert second.outcomes["acknowledged"] == 1
    assert acknowledged_ids(snapshot_file) == ["U0"]
    assert sandbox_state(service.records()) == expected_state(source)
    # A record stored while its answer was unreadable comes back "skipped" in the next run:
    # the snapshot remembered that the service may hold it, so that is no disagreement.
    stored_before = misbehaviour in STORED_BY
    assert second.push.disagreements == []
    assert second.push.resent_after_lost_answer == int(stored_before)


def test_an_html_page_answered_to_a_reservation_names_spec_4_2_and_keeps_the_last_version(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    source = hotel(units=1, reservations=1)
    settings = settings_for(service.base_url, snapshot_file)
    sync_batches(batches_of(source), settings)
    account, booked = source[Entity.RESERVATION][0]
    source[Entity.RESERVATION][0] = (account, {**booked, "channelName": "Airbnb"})
    service.set_faults(misbehave_next=EVERY_ATTEMPT, misbehaviour="html_200")

    report = sync_batches(batches_of(source), settings)

    [problem] = report.push.problems
    assert (problem.action, problem.outcome, problem.http_status) == ("update", "pending", 200)
    assert problem.message == (
        "unconfirmed: HTTP 200 with a text/html body, not the JSON object of spec §4.2"
    )
    [stored] = service.records(entity="reservation")
    assert "channelName" not in stored["resource"]
    with Snapshot.open(snapshot_file) as snapshot:
        [payload] = snapshot.acknowledged(Entity.RESERVATION)["payload"].tolist()
    assert "Airbnb" not in payload


def test_an_unconfirmed_answer_is_retried_and_a_later_documented_answer_acknowledges(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    service.set_faults(misbehave_next=2, misbehaviour="error_json_200")

    report = sync_batches(
        batches_of(hotel(units=1, reservations=0)), settings_for(service.base_url, snapshot_file)
    )

    assert (report.outcomes["acknowledged"], report.requests) == (1, 3)
    assert (report.push.unconfirmed, report.push.unconfirmed_answers) == (0, 2)
    assert report.push.problems == [] and report.push.disagreements == []
    assert acknowledged_ids(snapshot_file) == ["U0"]


def test_counts_of_nothing_leave_the_record_pending_and_are_listed_as_a_disagreement(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    source = hotel(units=1, reservations=1)
    settings = settings_for(service.base_url, snapshot_file)
    sync_batches(batches_of({Entity.ACCOMMODATION: source[Entity.ACCOMMODATION]}), settings)
    service.set_faults(misbehave_next=EVERY_ATTEMPT, misbehaviour="zero_counts_200")

    report = sync_batches(batches_of(source), settings)

    assert report.outcomes["pending"] == 1
    [disagreement] = report.push.disagreements
    assert (disagreement.record_id, disagreement.action) == ("R0", "create")
    assert disagreement.detail.startswith(
        "service reported no new, no updated and no skipped reservation"
    )
    assert disagreement.request_id == report.push.problems[0].request_ids[-1]
    assert service.records(entity="reservation") == []
    assert acknowledged_ids(snapshot_file) == ["U0"]


def test_a_redirect_fails_the_record_naming_where_it_points_and_what_to_check(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    service.set_faults(misbehave_next=1, misbehaviour="redirect_302")

    report = sync_batches(
        batches_of(hotel(units=1, reservations=0)), settings_for(service.base_url, snapshot_file)
    )

    [problem] = report.push.problems
    assert (problem.outcome, problem.http_status, problem.attempts) == ("failed", 302, 1)
    assert problem.message == (
        f"HTTP 302 redirect to {service.base_url}/portal/login?continue={UNIT_SYNC} "
        f"(redirects are not followed: check PMS_SYNC_BASE_URL)"
    )
    assert problem.request_ids[0]
    assert acknowledged_ids(snapshot_file) == []


@pytest.mark.parametrize("misbehaviour", ["reset_after_headers", "wrong_types_200"])
def test_a_retry_answered_skipped_after_a_stored_but_lost_answer_is_no_disagreement(
    service: SandboxHandle, snapshot_file: Path, misbehaviour: str
) -> None:
    service.set_faults(misbehave_next=1, misbehaviour=misbehaviour)

    report = sync_batches(
        batches_of(hotel(units=1, reservations=0)), settings_for(service.base_url, snapshot_file)
    )

    assert (report.outcomes["acknowledged"], report.requests) == (1, 2)
    assert report.push.disagreements == []
    assert report.push.resent_after_lost_answer == 1
    assert [record["writes"] for record in service.records()] == [1]
    assert acknowledged_ids(snapshot_file) == ["U0"]


def test_a_create_the_service_already_knew_is_acknowledged_and_listed_as_a_disagreement(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    source = hotel(units=1, reservations=1)
    account, booked = source[Entity.RESERVATION][0]
    # Another writer (or a snapshot restored from an old backup) put an older version there.
    older = reservation(booked["id"], "U0", 3, channelName="Phone")
    service.http.post(
        SYNC_PATHS[Entity.RESERVATION],
        json={"accountId": account, "entity": "reservation", "event": "create", "resource": older},
        headers={"X-Wishbox-Auth-Token": "demo-token"},
    ).raise_for_status()

    report = sync_batches(batches_of(source), settings_for(service.base_url, snapshot_file))

    assert report.outcomes["acknowledged"] == 2
    [disagreement] = report.push.disagreements
    assert (disagreement.record_id, disagreement.action) == ("R0", "create")
    assert disagreement.detail == "sent as create, service already knew it (updatedReservations=1)"
    assert sorted(acknowledged_ids(snapshot_file)) == ["R0", "U0"]
    assert sandbox_state(service.records()) == expected_state(source)


def test_the_documented_policy_acknowledges_an_empty_object(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    source = hotel(units=1, reservations=0)
    settings = settings_for(
        service.base_url, snapshot_file, acknowledgement=AcknowledgementPolicy.DOCUMENTED
    )
    service.set_faults(misbehave_next=1, misbehaviour="empty_object_200")

    report = sync_batches(batches_of(source), settings)

    assert (report.outcomes["acknowledged"], report.requests) == (1, 1)
    assert report.push.disagreements == [] and report.push.unconfirmed_answers == 0
    assert acknowledged_ids(snapshot_file) == ["U0"]
    assert sandbox_state(service.records()) == expected_state(source)


class _EmptyAnswers(http.server.BaseHTTPRequestHandler):
    """A proxy in front of the service answering 503 with no body at all."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(503)
        self.send_header("content-length", "0")
        self.send_header("x-request-id", "proxy-1")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def empty_answering_proxy() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _EmptyAnswers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_non_2xx_answer_with_an_empty_body_says_so(
    empty_answering_proxy: str, snapshot_file: Path
) -> None:
    report: SyncReport = sync_batches(
        batches_of(hotel(units=1, reservations=0)),
        settings_for(empty_answering_proxy, snapshot_file),
    )

    [problem] = report.push.problems
    assert (problem.outcome, problem.http_status) == ("pending", 503)
    assert problem.message == "HTTP 503 with an empty body"
    assert problem.request_ids == ("proxy-1",) * EVERY_ATTEMPT

"""The sandbox drifts on request: stored records edited, deleted or reverted as staff or a
restore would (POST /_sandbox/drift), over real sockets."""

from __future__ import annotations

from typing import Any

import pytest

from connector.sandbox.testing import SandboxHandle
from tests.sandbox import payloads

SYNC = "/api/v1/hooks/reservation/connect"
UNITS = "/api/v1/hooks/accommodation/connect"
DEMO_TOKEN = {"X-Wishbox-Auth-Token": "demo-token"}


@pytest.fixture
def sandbox(clean_sandbox: SandboxHandle) -> SandboxHandle:
    return clean_sandbox


def _post(sandbox: SandboxHandle, resource: dict[str, Any], event: str = "update") -> Any:
    response = sandbox.http.post(
        SYNC,
        json=payloads.envelope("reservation", resource, event=event),
        headers=DEMO_TOKEN,
    )
    assert response.status_code == 200, response.text
    return response.json()


def _stored(sandbox: SandboxHandle) -> dict[str, dict[str, Any]]:
    return {record["id"]: record for record in sandbox.records("demo", "reservation")}


def test_an_edit_merges_into_the_stored_resource_and_leaves_the_sync_bookkeeping(
    sandbox: SandboxHandle,
) -> None:
    _post(sandbox, payloads.reservation("res-1"), event="create")
    before = _stored(sandbox)["res-1"]

    edited = sandbox.edit_records(
        "demo",
        "reservation",
        ["res-1", "res-9"],
        {"channelName": "Desk", "primaryGuest": {"lastName": None}},
    )

    after = _stored(sandbox)["res-1"]
    assert edited == ["res-1"]
    assert after["resource"]["channelName"] == "Desk"
    assert after["resource"]["primaryGuest"] == {"firstName": "Ada", "country": "GB"}
    assert (after["writes"], after["lastSeq"]) == (before["writes"], before["lastSeq"])
    # The original content is news to the service again.
    assert _post(sandbox, payloads.reservation("res-1"))["updatedReservations"] == 1


def test_a_deleted_record_is_new_to_the_service_again(sandbox: SandboxHandle) -> None:
    _post(sandbox, payloads.reservation("res-1"), event="create")

    deleted = sandbox.delete_records("demo", "reservation", ["res-1"])

    assert deleted == ["res-1"] and _stored(sandbox) == {}
    assert _post(sandbox, payloads.reservation("res-1"))["newReservations"] == 1


def test_a_revert_undoes_the_last_sync_write_as_a_restore_from_an_older_backup_would(
    sandbox: SandboxHandle,
) -> None:
    first = payloads.reservation("res-1")
    _post(sandbox, first, event="create")
    _post(sandbox, payloads.reservation("res-1", channelName="Phone"))
    _post(sandbox, payloads.reservation("res-2"), event="create")

    reverted = sandbox.revert_records("demo", "reservation", ["res-1", "res-2"])

    assert reverted == ["res-1", "res-2"]
    stored = _stored(sandbox)
    assert list(stored) == ["res-1"]  # res-2 did not exist before its only write
    assert "channelName" not in stored["res-1"]["resource"]
    assert _post(sandbox, first)["skippedReservations"] == 1


def test_a_revert_since_a_sequence_number_restores_every_record_written_after_it(
    sandbox: SandboxHandle,
) -> None:
    _post(sandbox, payloads.reservation("res-1"), event="create")
    _post(sandbox, payloads.reservation("res-2"), event="create")
    backup = max(record["lastSeq"] for record in sandbox.records())
    _post(sandbox, payloads.reservation("res-1", channelName="Phone"))
    _post(sandbox, payloads.reservation("res-3"), event="create")

    reverted = sandbox.revert_records("demo", "reservation", since_seq=backup)

    assert reverted == ["res-1", "res-3"]
    stored = _stored(sandbox)
    assert sorted(stored) == ["res-1", "res-2"]
    assert "channelName" not in stored["res-1"]["resource"]


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"action": "edit", "accountId": "demo", "entity": "reservation", "ids": ["r"]}, "changes"),
        ({"action": "delete", "accountId": "demo", "entity": "reservation"}, "ids"),
        (
            {
                "action": "edit",
                "accountId": "demo",
                "entity": "reservation",
                "ids": ["r"],
                "changes": {"id": "other"},
            },
            "id",
        ),
        ({"action": "drop", "accountId": "demo", "entity": "reservation", "ids": []}, "action"),
        (
            {
                "action": "delete",
                "accountId": "demo",
                "entity": "reservation",
                "ids": ["r"],
                "sinceSeq": 3,
            },
            "sinceSeq",
        ),
    ],
    ids=["edit without changes", "no ids", "id changed", "unknown action", "sinceSeq on delete"],
)
def test_an_invalid_drift_request_is_refused_400_naming_the_problem(
    sandbox: SandboxHandle, body: dict[str, Any], problem: str
) -> None:
    _post(sandbox, payloads.reservation("r"), event="create")

    response = sandbox.http.post("/_sandbox/drift", json=body)

    assert response.status_code == 400
    assert problem in response.json()["message"]
    assert list(_stored(sandbox)) == ["r"]


def test_an_edit_of_a_unit_changes_what_its_next_sync_is_answered(
    sandbox: SandboxHandle,
) -> None:
    unit = payloads.accommodation("unit-1")
    sent = sandbox.http.post(
        UNITS, json=payloads.envelope("accommodation", unit), headers=DEMO_TOKEN
    )
    assert sent.json()["savedProperties"] == 1

    sandbox.edit_records("demo", "accommodation", ["unit-1"], {"doorCode": "changed-by-staff"})
    again = sandbox.http.post(
        UNITS, json=payloads.envelope("accommodation", unit, event="update"), headers=DEMO_TOKEN
    )

    assert (again.json()["savedProperties"], again.json()["skippedProperties"]) == (1, 0)

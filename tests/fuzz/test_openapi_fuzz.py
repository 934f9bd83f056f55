"""API fuzzing of the sandbox from docs/openapi.json with schemathesis.

Every operation of the document gets schema-valid and schema-invalid requests, with auth
supplied, against the real sandbox over a real socket. schemathesis's checks then require: no
5xx, status codes, content types, bodies and headers as the document says, valid requests
accepted and invalid ones rejected, auth enforced, wrong methods answered 405.

Bounded for ``make test`` (a fixed derandomised seed and ``PMS_SYNC_FUZZ_EXAMPLES`` examples per
operation, 25 by default); ``make soak`` runs it with a large budget.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from schemathesis import Case, GenerationMode

from connector.sandbox.config import DEMO_SYNC_TOKEN
from connector.sandbox.testing import MULTI_CLIENT_ID, MULTI_CLIENT_SECRET, SandboxHandle
from tests.sandbox import payloads

OPENAPI_DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
EXAMPLES = int(os.environ.get("PMS_SYNC_FUZZ_EXAMPLES", "25"))
# A large budget outlasts the suite's 300 s per-test timeout: allow a second per example.
pytestmark = pytest.mark.timeout(max(300, EXAMPLES))
SYNC_PREFIX = "/api/v1/hooks/"
TOKEN_PATH = "/openapi/v1/oauth2/token"

# Known ids, so that some generated requests reach the stored-resource paths, not only 404s.
KNOWN_UNIT = "fuzz-unit"
KNOWN_RESERVATION = "fuzz-res"

schema = schemathesis.openapi.from_path(OPENAPI_DOCUMENT)
# Auth is supplied by the test (below), not generated: a negative case must not count a
# missing Authorization header among its violations when the test then adds one.
schema.config.generation.update(
    max_examples=EXAMPLES,
    deterministic=True,
    database="none",
    with_security_parameters=False,
)


@pytest.fixture(scope="module")
def fuzz_target(sandbox: SandboxHandle) -> Iterator[tuple[SandboxHandle, str, str]]:
    """The shared sandbox, emptied, holding one unit, one reservation and one webhook
    configuration; with an access token of the multi-account client and a webhook id."""
    sandbox.reset()
    auth = {"X-Wishbox-Auth-Token": DEMO_SYNC_TOKEN}
    for entity, resource in (
        ("accommodation", payloads.accommodation(KNOWN_UNIT)),
        ("reservation", payloads.reservation(KNOWN_RESERVATION)),
    ):
        response = sandbox.http.post(
            f"{SYNC_PREFIX}{entity}/connect",
            json=payloads.envelope(entity, resource),
            headers=auth,
        )
        assert response.status_code == 200, response.text
    token_response = sandbox.http.post(
        TOKEN_PATH,
        data={
            "grant_type": "client_credentials",
            "client_id": MULTI_CLIENT_ID,
            "client_secret": MULTI_CLIENT_SECRET,
        },
    )
    assert token_response.status_code == 200, token_response.text
    access_token = token_response.json()["access_token"]
    created = sandbox.http.post(
        "/api/openapi/v1/webhooks",
        json={"name": "fuzz", "event": "reservationCreated", "url": "https://example.invalid/x"},
        headers={"Authorization": f"Bearer {access_token}"},
    )
    assert created.status_code == 201, created.text
    yield sandbox, access_token, created.json()["_id"]
    sandbox.reset()


def _auth_headers(case: Case, access_token: str) -> dict[str, str]:
    if case.path.startswith(SYNC_PREFIX):
        return {"X-Wishbox-Auth-Token": DEMO_SYNC_TOKEN}
    if case.path == TOKEN_PATH:
        return {}
    return {"Authorization": f"Bearer {access_token}"}


def _pick(generated: str, known: str) -> str:
    # Half of the generated ids (chosen by a stable hash, so runs repeat) become a known one.
    return known if zlib.crc32(generated.encode("utf-8", "surrogatepass")) % 2 else generated


def _keep_unit_reservations_consistent(resource: dict[str, Any]) -> None:
    """Apply the two rules JSON Schema cannot state (and the document's descriptions do):
    checkout after checkin, unit reservation ids unique within a reservation."""
    units = resource.get("unitReservations")
    if not isinstance(units, list):
        return
    for index, unit in enumerate(units):
        if not isinstance(unit, dict):
            continue
        unit["id"] = f"{unit.get('id', 'u')}-{index}"
        checkin = date.fromisoformat(unit["checkin"])
        if date.fromisoformat(unit["checkout"]) <= checkin:
            if checkin == date.max:
                unit["checkin"] = (checkin - timedelta(days=1)).isoformat()
                checkin = date.fromisoformat(unit["checkin"])
            unit["checkout"] = (checkin + timedelta(days=1)).isoformat()


def _steer_valid_case(case: Case, webhook_id: str) -> None:
    """Point schema-valid requests at data the sandbox holds, so that they exercise success
    paths as well as 403 and 404: the demo account, the known unit, reservation and webhook.
    Negative cases are sent exactly as generated."""
    if case.meta is None or case.meta.generation.mode is not GenerationMode.POSITIVE:
        return
    if case.path.startswith(SYNC_PREFIX) and isinstance(case.body, dict):
        case.body["accountId"] = "demo"
        resource = case.body.get("resource")
        if isinstance(resource, dict):
            _keep_unit_reservations_consistent(resource)
    if case.path == "/properties/{id}" and case.path_parameters:
        case.path_parameters["id"] = _pick(case.path_parameters["id"], KNOWN_UNIT)
    if case.path == "/api/openapi/v1/webhooks/{id}" and case.path_parameters:
        case.path_parameters["id"] = _pick(case.path_parameters["id"], webhook_id)
    if case.path == "/openapi/v1/reservations/links" and case.query:
        external_id = case.query.get("externalId")
        if isinstance(external_id, str):
            case.query["externalId"] = _pick(external_id, KNOWN_RESERVATION)


@schema.parametrize()
def test_every_operation_answers_as_the_openapi_document_says(
    case: Case, fuzz_target: tuple[SandboxHandle, str, str]
) -> None:
    sandbox, access_token, webhook_id = fuzz_target
    _steer_valid_case(case, webhook_id)
    response = case.call_and_validate(
        base_url=sandbox.base_url, headers=_auth_headers(case, access_token), timeout=30
    )
    # call_and_validate already fails on any 5xx; this states it where a reader looks first.
    assert response.status_code < 500

"""The inbound sync webhooks (spec §4.1, §4.2): validate, authorise, upsert, count.

Order of checks: the token (401), the body (400), then whether the token may write to the
envelope's accountId (403). Every error body is a plain string (spec §7).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from connector.canonical import canonical_json
from connector.contract import ENVELOPES, SYNC_PATHS, Entity, Reservation
from connector.sandbox.responses import plain_error
from connector.sandbox.state import SandboxState
from connector.sandbox.store import WriteOutcome
from connector.sandbox.validation_messages import describe_validation_error

TOKEN_HEADER = "x-wishbox-auth-token"


def _header_token(request: Request) -> str | None:
    token = request.headers.get(TOKEN_HEADER)
    if token:
        return token
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return None


def _body_token(body: bytes) -> str | None:
    # Only read when no header carries a token: the spec's sample puts one in the body.
    try:
        document = json.loads(body)
    except ValueError:
        return None
    token = document.get("apiToken") if isinstance(document, dict) else None
    return token if isinstance(token, str) and token else None


def _accommodation_response(outcome: WriteOutcome) -> dict[str, object]:
    saved = int(outcome is not WriteOutcome.SKIPPED)
    return {
        "savedProperties": saved,
        "skippedProperties": 1 - saved,
        "summary": f"{saved} property saved, {1 - saved} skipped",
    }


def _reservation_response(outcome: WriteOutcome, reservation: Reservation) -> dict[str, object]:
    new = int(outcome is WriteOutcome.CREATED)
    updated = int(outcome is WriteOutcome.UPDATED)
    skipped = int(outcome is WriteOutcome.SKIPPED)
    return {
        "newReservations": new,
        "updatedReservations": updated,
        "skippedReservations": skipped,
        "summary": f"{new} new, {updated} updated, {skipped} skipped reservation(s)",
        "reservationIds": [f"{reservation.id}-{unit.id}" for unit in reservation.unitReservations],
    }


def sync_endpoint(entity: Entity, state: SandboxState) -> Callable[[Request], Awaitable[Response]]:
    envelope_model = ENVELOPES[entity]

    async def handle(request: Request) -> Response:
        body = await request.body()
        token = _header_token(request) or _body_token(body)
        if token is None:
            return plain_error(
                401,
                "Missing authorization token: send it in the X-Wishbox-Auth-Token header, as "
                "Authorization: Bearer <token>, or as the apiToken member",
            )
        allowed_accounts = state.sync_token_accounts.get(token)
        if allowed_accounts is None:
            return plain_error(401, "Invalid authorization token")
        limit = state.rate_limiter.check(token)
        if not limit.allowed:
            return plain_error(
                429, f"Too many requests: retry after {limit.retry_after_s} s", limit.headers
            )
        try:
            envelope = envelope_model.model_validate_json(body)
        except ValidationError as error:
            return plain_error(400, describe_validation_error(error), limit.headers)
        if envelope.accountId not in allowed_accounts:
            return plain_error(
                403,
                f"This token is not allowed to write to account {envelope.accountId!r}",
                limit.headers,
            )
        resource = envelope.resource
        outcome = state.store.upsert(
            envelope.accountId,
            entity.value,
            resource.id,
            canonical_json(resource.to_json_dict()),
            envelope.event.value,
        )
        if isinstance(resource, Reservation):
            content = _reservation_response(outcome, resource)
        else:
            content = _accommodation_response(outcome)
        return JSONResponse(content, headers=limit.headers)

    return handle


def sync_routes(state: SandboxState) -> list[Route]:
    return [
        Route(SYNC_PATHS[entity], sync_endpoint(entity, state), methods=["POST"])
        for entity in Entity
    ]

"""The inbound sync webhooks (spec §4.1, §4.2): validate, authorise, upsert, count.

Order of checks: the token (401), the body (400), then whether the token may write to the
envelope's accountId (403). Every error body is a plain string (spec §7). A token is a sync
token of the config, or an account-level access token from the Open API's accounts lookup
(spec §5.4), valid for its one account until it expires. A reservation the request creates
emits ``reservationCreated`` to the matching webhook configurations (``events.py``), in the
background: the answer never waits for a receiver.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from connector.canonical import canonical_json
from connector.contract import (
    ENVELOPES,
    SYNC_PATHS,
    Entity,
    OutgoingEventName,
    Reservation,
    validate_json_body,
)
from connector.sandbox.events import StoredReservation
from connector.sandbox.openapi_routes import unknown_query_parameters
from connector.sandbox.responses import plain_error
from connector.sandbox.state import SandboxState
from connector.sandbox.store import WriteOutcome, service_id_of
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
    except (ValueError, RecursionError):
        # Not JSON, or nested too deeply for the standard library: no token, so a 401.
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


def _account_token_scope(state: SandboxState, token: str) -> tuple[frozenset[str], str | None]:
    """The account an account-level access token (from the accounts lookup, spec §5.4) may
    write to, or why it may not: unknown, expired, or not an account's token."""
    access = state.store.access_token(token)
    if access is None or not access.account_level:
        return frozenset(), "Invalid authorization token"
    if access.expires_at <= time.time():
        return frozenset(), "Authorization token expired: look the account up again for a new one"
    return frozenset(access.account_ids), None


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
            allowed_accounts, problem = _account_token_scope(state, token)
            if problem is not None:
                return plain_error(401, problem)
        limit = state.rate_limiter.check(token)
        if not limit.allowed:
            return plain_error(
                429, f"Too many requests: retry after {limit.retry_after_s} s", limit.headers
            )
        problem = unknown_query_parameters(request, frozenset())
        if problem is not None:
            return plain_error(400, problem, limit.headers)
        try:
            envelope = validate_json_body(envelope_model, body)
        except ValidationError as error:
            return plain_error(400, describe_validation_error(error), limit.headers)
        if envelope.accountId not in allowed_accounts:
            return plain_error(
                403,
                f"This token is not allowed to write to account {envelope.accountId!r}",
                limit.headers,
            )
        resource = envelope.resource
        payload = canonical_json(resource.to_json_dict())
        outcome = state.store.upsert(
            envelope.accountId, entity.value, resource.id, payload, envelope.event.value
        )
        if isinstance(resource, Reservation):
            content = _reservation_response(outcome, resource)
            if outcome is WriteOutcome.CREATED:
                # Scheduled, not awaited: the answer never waits for a webhook's receiver.
                state.events.emit(
                    OutgoingEventName.RESERVATION_CREATED,
                    StoredReservation(
                        envelope.accountId,
                        resource.id,
                        service_id_of(envelope.accountId, entity.value, resource.id),
                        payload,
                    ),
                )
        else:
            content = _accommodation_response(outcome)
        return JSONResponse(content, headers=limit.headers)

    return handle


def sync_routes(state: SandboxState) -> list[Route]:
    return [
        Route(SYNC_PATHS[entity], sync_endpoint(entity, state), methods=["POST"])
        for entity in Entity
    ]

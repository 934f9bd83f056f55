"""The Open API (spec §4.3-§4.7): OAuth2 tokens, accounts, guest links, property status and
outgoing-webhook configurations. Errors are JSON ``{"error", "message"}``.

Every endpoint but the token endpoint needs ``Authorization: Bearer <access token>``. A token
carries a scope: the accounts of its client, or the single account of an account-level token
handed out by the accounts lookup. Links, properties and webhooks act within that scope.
"""

from __future__ import annotations

import base64
import hmac
import json
import math
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl, unquote

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from connector.contract import (
    Entity,
    OutgoingEventName,
    PropertyStatusUpdate,
    TokenRequest,
    WebhookConfig,
    validate_json_body,
)
from connector.sandbox.guest_links import guest_links
from connector.sandbox.responses import api_error
from connector.sandbox.state import SandboxState
from connector.sandbox.store import AccessToken, StoredRecord
from connector.sandbox.validation_messages import describe_validation_error

MAX_PAGE_SIZE = 50
DEFAULT_PAGE_SIZE = 50
DEFAULT_PAGE = 1
_DIGITS = re.compile(r"[0-9]+")
# Flags take exactly the values the document gives them: 0/1 for includeLastMessage (an integer
# enum), true/false for updateSubUnits (a boolean), so the document and the sandbox agree.
INCLUDE_LAST_MESSAGE_VALUES = frozenset({"0", "1"})
BOOLEAN_VALUES = frozenset({"true", "false"})

Handler = Callable[[Request], Awaitable[Response]]
AuthorisedHandler = Callable[[Request, AccessToken], Awaitable[Response]]


def unknown_query_parameters(request: Request, allowed: frozenset[str]) -> str | None:
    """The problem with query parameters the operation does not define, if any.

    Refused rather than ignored, like unknown body members: a misspelt ``pagesize=10`` that is
    silently dropped is a client bug nobody notices.
    """
    unknown = sorted({name for name in request.query_params if name not in allowed})
    if not unknown:
        return None
    known = ", ".join(sorted(allowed)) or "none"
    return f"query: unknown parameter(s) {unknown} (this operation takes: {known})"


def _requires_access_token(
    state: SandboxState, handler: AuthorisedHandler, query: frozenset[str] = frozenset()
) -> Handler:
    """Check the Bearer access token, the client's rate limit and that every query parameter is
    one of ``query``, then call ``handler``."""

    async def guarded(request: Request) -> Response:
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not credentials.strip():
            return api_error(
                401,
                "unauthorized",
                "Missing access token: send Authorization: Bearer <token> obtained from "
                "POST /openapi/v1/oauth2/token",
            )
        token = state.store.access_token(credentials.strip())
        if token is None:
            return api_error(401, "invalid_token", "Unknown access token")
        if token.expires_at <= time.time():
            return api_error(401, "invalid_token", "Access token expired: request a new one")
        limit = state.rate_limiter.check(token.client_id)
        if not limit.allowed:
            return api_error(
                429,
                "rate_limited",
                f"Too many requests: retry after {limit.retry_after_s} s",
                limit.headers,
            )
        problem = unknown_query_parameters(request, query)
        if problem is not None:
            response = api_error(400, "invalid_request", problem)
        else:
            response = await handler(request, token)
        response.headers.update(limit.headers)
        return response

    return guarded


# -- OAuth2 --------------------------------------------------------------------------------------


def _basic_credentials(request: Request) -> tuple[str, str] | None:
    scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        client_id, _, client_secret = base64.b64decode(encoded.strip()).decode().partition(":")
    except ValueError:
        # binascii.Error, UnicodeDecodeError, and the plain ValueError b64decode raises for
        # non-ASCII text (a header such as "Basic é" was a 500).
        return None
    # RFC 6749 §2.3.1: both parts are form-urlencoded before they are joined.
    return unquote(client_id), unquote(client_secret)


def _token_endpoint(state: SandboxState) -> Handler:
    async def issue_token(request: Request) -> Response:
        problem = unknown_query_parameters(request, frozenset())
        if problem is not None:
            return api_error(400, "invalid_request", problem)
        body = await request.body()
        content_type = request.headers.get("content-type", "")
        fields: dict[str, Any]
        if "json" in content_type:
            try:
                fields = json.loads(body or b"{}")
            except (ValueError, RecursionError):
                return api_error(400, "invalid_request", "body: not valid JSON")
            if not isinstance(fields, dict):
                return api_error(400, "invalid_request", "body: expected a JSON object")
        else:
            fields = dict(parse_qsl(body.decode("latin-1"), keep_blank_values=True))
        basic = _basic_credentials(request)
        if basic is not None:
            fields["client_id"], fields["client_secret"] = basic
        if fields.get("grant_type") not in (None, "client_credentials"):
            return api_error(
                400, "unsupported_grant_type", "Only grant_type=client_credentials is supported"
            )
        if not fields.get("client_id") or not fields.get("client_secret"):
            return api_error(
                401,
                "invalid_client",
                "Client authentication missing: send client_id and client_secret",
            )
        try:
            grant = TokenRequest.model_validate(fields)
        except ValidationError as error:
            return api_error(400, "invalid_request", describe_validation_error(error))
        client = state.config.client(grant.client_id)
        if client is None or not hmac.compare_digest(
            client.client_secret.encode(), grant.client_secret.encode()
        ):
            return api_error(401, "invalid_client", "Unknown client or wrong client secret")
        # Token requests count against the client's limits too: the spec advises persisting
        # tokens precisely to avoid rate limiting.
        limit = state.rate_limiter.check(client.client_id)
        if not limit.allowed:
            return api_error(
                429,
                "rate_limited",
                f"Too many requests: retry after {limit.retry_after_s} s",
                limit.headers,
            )
        now = time.time()
        state.store.forget_expired_tokens(now)
        token = AccessToken(
            token=secrets.token_urlsafe(32),
            client_id=client.client_id,
            account_ids=tuple(client.accounts),
            account_level=False,
            expires_at=now + client.token_lifetime_s,
        )
        state.store.save_access_token(token)
        return JSONResponse(
            {
                "access_token": token.token,
                "token_type": "Bearer",
                "expires_in": client.token_lifetime_s,
            },
            headers={"Cache-Control": "no-store", **limit.headers},
        )

    return issue_token


# -- accounts ------------------------------------------------------------------------------------


def _positive_int(value: str | None, name: str, default: int, maximum: int | None) -> int | str:
    """The parsed parameter, or the problem with it as a message."""
    if value is None:
        return default
    # ASCII digits only: int() would also take " 5", "+5", "5_0" and other scripts' digits,
    # none of which the document's integer is; an empty value is no integer either.
    number = int(value) if _DIGITS.fullmatch(value) else 0
    if number < 1 or (maximum is not None and number > maximum):
        bound = f"between 1 and {maximum}" if maximum is not None else "of at least 1"
        return f"{name}: expected an integer {bound}, got {value!r}"
    return number


def _pagination(page: int, page_size: int, total: int) -> dict[str, Any]:
    pages = math.ceil(total / page_size)
    return {
        "pageSize": page_size,
        "total": total,
        "pages": pages,
        "page": page,
        "hasMore": page < pages,
    }


def _account_level_token(state: SandboxState, token: AccessToken, account_id: str) -> AccessToken:
    """The account's token for this client: reused while more than half of its lifetime is
    left, so repeated lookups do not pile up tokens; after that a lookup hands out a new one
    (a client renewing a token near its expiry gets a fresh one; the old one stays valid
    until it expires)."""
    now = time.time()
    client = state.config.client(token.client_id)
    lifetime = client.account_token_lifetime if client else 3600
    existing = state.store.account_level_token(token.client_id, account_id, now)
    if existing is not None and existing.expires_at - now > lifetime / 2:
        return existing
    issued = AccessToken(
        token=secrets.token_urlsafe(32),
        client_id=token.client_id,
        account_ids=(account_id,),
        account_level=True,
        expires_at=now + lifetime,
    )
    state.store.save_access_token(issued)
    return issued


def _accounts_endpoint(state: SandboxState) -> Handler:
    async def list_accounts(request: Request, token: AccessToken) -> Response:
        params = request.query_params
        page = _positive_int(params.get("page"), "page", DEFAULT_PAGE, None)
        page_size = _positive_int(
            params.get("pageSize"), "pageSize", DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
        )
        for problem in (page, page_size):
            if isinstance(problem, str):
                return api_error(400, "invalid_request", problem)
        assert isinstance(page, int) and isinstance(page_size, int)
        scope = [state.config.account(account_id) for account_id in token.account_ids]
        accounts = [account for account in scope if account is not None]
        if len(accounts) <= 1:
            # Spec §4.3 rule 1: a connection whose scope holds a single account lists nothing.
            return JSONResponse({"data": [], "pagination": _pagination(page, page_size, 0)})
        external_id = params.get("externalId")
        if external_id:
            match = next((a for a in accounts if a.externalId == external_id), None)
            if match is None:
                return JSONResponse({"data": [], "pagination": _pagination(1, page_size, 0)})
            account_token = _account_level_token(state, token, match.id)
            item = {
                "name": match.name,
                "externalId": match.externalId,
                "id": match.id,
                "token": account_token.token,
                # Rounded, not truncated: a token just issued reports its full lifetime.
                # Rounded, not truncated: a token just issued reports its whole lifetime.
                "expires_in": max(round(account_token.expires_at - time.time()), 0),
            }
            return JSONResponse({"data": [item], "pagination": _pagination(1, page_size, 1)})
        window = accounts[(page - 1) * page_size : page * page_size]
        return JSONResponse(
            {
                "data": [{"name": a.name, "externalId": a.externalId} for a in window],
                "pagination": _pagination(page, page_size, len(accounts)),
            }
        )

    return _requires_access_token(
        state, list_accounts, frozenset({"page", "pageSize", "externalId"})
    )


# -- guest links ---------------------------------------------------------------------------------


def _one_record(
    state: SandboxState, token: AccessToken, entity: Entity, key: str, noun: str
) -> StoredRecord | Response:
    found = state.store.find_records(token.account_ids, entity.value, key)
    if not found:
        return api_error(404, "not_found", f"No {noun} with id {key!r} in this token's accounts")
    if len(found) > 1:
        accounts = sorted(record.account_id for record in found)
        return api_error(
            409,
            "conflict",
            f"{len(found)} {noun}s with id {key!r} in accounts {accounts}: use an "
            "account-level token (GET /api/openapi/v1/accounts?externalId=…)",
        )
    return found[0]


def _links_endpoint(state: SandboxState) -> Handler:
    async def links(request: Request, token: AccessToken) -> Response:
        external_id = request.query_params.get("externalId")
        if not external_id:
            return api_error(400, "invalid_request", "externalId: required (the reservation id)")
        include = request.query_params.get("includeLastMessage", "0")
        if include not in INCLUDE_LAST_MESSAGE_VALUES:
            return api_error(
                400, "invalid_request", f"includeLastMessage: expected 1 or 0, got {include!r}"
            )
        found = _one_record(state, token, Entity.RESERVATION, external_id, "reservation")
        if isinstance(found, Response):
            return found
        # Links are derived from account and reservation id, so they never change for a booking.
        links = guest_links(state.config.links_base_url, found.account_id, found.id)
        content: dict[str, Any] = {
            name: links[name] for name in ("guestApp", "chatLink", "onlineCheckInLink")
        }
        if include == "1":
            account = state.config.account(found.account_id)
            content["chatLastMessage"] = {
                "body": "Welcome! Your guest app is ready.",
                "author": account.name if account else found.account_id,
                "authorType": "admin",
                "time": json.loads(found.payload).get("createdAt", found.created_at),
                "sentVia": "app",
                "hasAttachment": False,
                "seen": False,
            }
        return JSONResponse(content)

    return _requires_access_token(state, links, frozenset({"externalId", "includeLastMessage"}))


# -- property status -----------------------------------------------------------------------------


def _property_endpoint(state: SandboxState) -> Handler:
    async def update_status(request: Request, token: AccessToken) -> Response:
        raw_flag = request.query_params.get("updateSubUnits", "false")
        if raw_flag not in BOOLEAN_VALUES:
            return api_error(
                400, "invalid_request", f"updateSubUnits: expected true or false, got {raw_flag!r}"
            )
        try:
            update = validate_json_body(PropertyStatusUpdate, await request.body())
        except ValidationError as error:
            return api_error(400, "invalid_request", describe_validation_error(error))
        property_id = request.path_params["id"]
        if property_id in token.account_ids:
            # The property is the account (a hotel): its sub-units are all its accommodations.
            units = state.store.set_property_status(
                property_id, update.status.value, include_sub_units=raw_flag == "true"
            )
            return JSONResponse(
                {"id": property_id, "status": update.status.value, "updatedSubUnits": units}
            )
        found = _one_record(
            state, token, Entity.ACCOMMODATION, request.path_params["id"], "property"
        )
        if isinstance(found, Response):
            return found
        sub_units = state.store.set_accommodation_status(
            found, update.status.value, include_sub_units=raw_flag == "true"
        )
        return JSONResponse(
            {"id": found.service_id, "status": update.status.value, "updatedSubUnits": sub_units}
        )

    return _requires_access_token(state, update_status, frozenset({"updateSubUnits"}))


# -- outgoing-webhook configurations -------------------------------------------------------------


def _webhook_owner(token: AccessToken) -> str:
    # Configurations belong to an account when the token acts for one account, else to the
    # multi-account connection (the client) as a whole.
    if len(token.account_ids) == 1:
        return f"account:{token.account_ids[0]}"
    return f"client:{token.client_id}"


def _validated_webhook(body: bytes) -> dict[str, Any] | Response:
    try:
        config = validate_json_body(WebhookConfig, body)
    except ValidationError as error:
        message = describe_validation_error(error)
        if "event" in message:
            names = ", ".join(event.value for event in OutgoingEventName)
            message += f" (events: {names})"
        return api_error(400, "invalid_request", message)
    return config.to_json_dict()


def _stored(webhook_id: str, config: dict[str, Any]) -> dict[str, Any]:
    return {"_id": webhook_id, **config}


def _webhooks_collection(state: SandboxState) -> Handler:
    async def collection(request: Request, token: AccessToken) -> Response:
        owner = _webhook_owner(token)
        if request.method == "GET":
            items = [_stored(i, config) for i, config in state.store.webhooks(owner)]
            return JSONResponse({"data": items})
        config = _validated_webhook(await request.body())
        if isinstance(config, Response):
            return config
        webhook_id = state.store.create_webhook(owner, config)
        return JSONResponse(_stored(webhook_id, config), status_code=201)

    return _requires_access_token(state, collection)


def _webhooks_item(state: SandboxState) -> Handler:
    async def item(request: Request, token: AccessToken) -> Response:
        owner = _webhook_owner(token)
        webhook_id = request.path_params["id"]
        missing = api_error(404, "not_found", f"No webhook configuration with _id {webhook_id!r}")
        if request.method == "GET":
            config = state.store.webhook(owner, webhook_id)
            return missing if config is None else JSONResponse(_stored(webhook_id, config))
        if request.method == "DELETE":
            if not state.store.delete_webhook(owner, webhook_id):
                return missing
            return Response(status_code=204)
        if state.store.webhook(owner, webhook_id) is None:
            return missing
        replacement = _validated_webhook(await request.body())
        if isinstance(replacement, Response):
            return replacement
        state.store.replace_webhook(owner, webhook_id, replacement)
        return JSONResponse(_stored(webhook_id, replacement))

    return _requires_access_token(state, item)


def open_api_routes(state: SandboxState) -> list[Route]:
    return [
        Route("/openapi/v1/oauth2/token", _token_endpoint(state), methods=["POST"]),
        Route("/api/openapi/v1/accounts", _accounts_endpoint(state), methods=["GET"]),
        Route("/openapi/v1/reservations/links", _links_endpoint(state), methods=["GET"]),
        Route("/properties/{id}", _property_endpoint(state), methods=["PUT"]),
        Route("/api/openapi/v1/webhooks", _webhooks_collection(state), methods=["GET", "POST"]),
        Route(
            "/api/openapi/v1/webhooks/{id}",
            _webhooks_item(state),
            methods=["GET", "PUT", "DELETE"],
        ),
    ]

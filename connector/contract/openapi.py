"""The OpenAPI 3.1 document of the whole service interface, generated from the contract models.

Run ``python -m connector.contract.openapi docs/openapi.json`` to regenerate the committed copy;
a test fails when the committed document and the models disagree.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from connector.contract._openapi_models import (
    AccountsPage,
    ApiError,
    GuestLinks,
    OutgoingEvent,
    PropertyStatusResponse,
    PropertyStatusUpdate,
    StoredWebhookConfig,
    TokenRequest,
    TokenResponse,
    WebhookConfig,
    WebhookConfigList,
)
from connector.contract._sync import (
    AccommodationEnvelope,
    AccommodationSyncResponse,
    ReservationEnvelope,
    ReservationSyncResponse,
)

_REQUEST_MODELS: tuple[type[BaseModel], ...] = (
    AccommodationEnvelope,
    ReservationEnvelope,
    TokenRequest,
    PropertyStatusUpdate,
    WebhookConfig,
)
_RESPONSE_MODELS: tuple[type[BaseModel], ...] = (
    AccommodationSyncResponse,
    ReservationSyncResponse,
    AccountsPage,
    TokenResponse,
    GuestLinks,
    PropertyStatusResponse,
    StoredWebhookConfig,
    WebhookConfigList,
    OutgoingEvent,
    ApiError,
)

_SYNC_SECURITY: list[dict[str, list[str]]] = [{"syncTokenHeader": []}, {"bearerToken": []}, {}]
_OPENAPI_SECURITY: list[dict[str, list[str]]] = [{"bearerToken": []}]


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _json(model: type[BaseModel] | dict[str, Any], description: str) -> dict[str, Any]:
    schema = _ref(model) if isinstance(model, type) else model
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _plain(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"text/plain": {"schema": {"type": "string"}}}}


def _sync_operation(
    entity: str, envelope: type[BaseModel], response: type[BaseModel]
) -> dict[str, Any]:
    return {
        "post": {
            "operationId": f"sync{entity.capitalize()}",
            "summary": f"Create or update an {entity}"
            if entity[0] in "aeiou"
            else f"Create or update a {entity}",
            "description": (
                "Upserts by (accountId, entity, resource.id) whatever `event` says. The token is "
                "taken from `X-Wishbox-Auth-Token`, `Authorization: Bearer`, or the body member "
                "`apiToken`."
            ),
            "tags": ["sync webhooks"],
            "security": _SYNC_SECURITY,
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": _ref(envelope)}},
            },
            "responses": {
                "200": _json(response, "Saved, updated or skipped"),
                "400": _plain("Bad request or invalid webhook payload: field path and reason"),
                "401": _plain("Invalid or missing authorization token"),
                "403": _plain("The token is not allowed for this accountId"),
                "429": _plain("Rate limit exceeded; see Retry-After"),
                "500": _plain("Internal server error"),
            },
        }
    }


def _api_errors(*statuses: int) -> dict[str, Any]:
    reasons = {
        400: "Invalid parameters or body",
        401: "Missing, unknown or expired access token",
        404: "No such resource",
        409: "The id names resources in several accounts of the token's scope",
        429: "Rate limit exceeded; see Retry-After",
    }
    return {str(status): _json(ApiError, reasons[status]) for status in statuses}


def _query(
    name: str, schema: dict[str, Any], description: str, required: bool = False
) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": required,
        "schema": schema,
        "description": description,
    }


_REQUEST_ID = {
    "description": "A fresh id of this attempt (32 hex digits), for support requests",
    "required": True,
    "schema": {"type": "string", "pattern": "^[0-9a-f]{32}$"},
}
_RETRY_AFTER = {
    "description": "Seconds to wait before the next request",
    "required": True,
    "schema": {"type": "string", "pattern": "^[0-9]+$"},
}


def _add_response_headers(paths: dict[str, Any]) -> None:
    """Every response carries x-request-id; every 429 carries Retry-After."""
    for item in paths.values():
        for operation in item.values():
            for status, response in operation["responses"].items():
                headers = response.setdefault("headers", {})
                headers["x-request-id"] = _REQUEST_ID
                if status == "429":
                    headers["Retry-After"] = _RETRY_AFTER


def build_openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 document as a JSON-ready dict."""
    _, definitions = models_json_schema(
        [(model, "validation") for model in _REQUEST_MODELS]
        + [(model, "serialization") for model in _RESPONSE_MODELS],
        ref_template="#/components/schemas/{model}",
    )
    webhook_id = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
    paths: dict[str, Any] = {
        "/api/v1/hooks/accommodation/connect": _sync_operation(
            "accommodation", AccommodationEnvelope, AccommodationSyncResponse
        ),
        "/api/v1/hooks/reservation/connect": _sync_operation(
            "reservation", ReservationEnvelope, ReservationSyncResponse
        ),
        "/api/openapi/v1/accounts": {
            "get": {
                "operationId": "listAccounts",
                "summary": "List connected accounts",
                "tags": ["open api"],
                "security": _OPENAPI_SECURITY,
                "parameters": [
                    _query("page", {"type": "integer", "minimum": 1, "default": 1}, "Page number"),
                    _query(
                        "pageSize",
                        {"type": "integer", "minimum": 1, "maximum": 50, "default": 50},
                        "Accounts per page, at most 50",
                    ),
                    _query(
                        "externalId", {"type": "string"}, "The single account with this external id"
                    ),
                ],
                "responses": {
                    "200": _json(AccountsPage, "A page of accounts"),
                    **_api_errors(400, 401, 429),
                },
            }
        },
        "/openapi/v1/reservations/links": {
            "get": {
                "operationId": "getReservationLinks",
                "summary": "Guest app, chat and online check-in links of a reservation",
                "tags": ["open api"],
                "security": _OPENAPI_SECURITY,
                "parameters": [
                    _query(
                        "externalId",
                        {"type": "string", "minLength": 1},
                        "Reservation id in the caller's system",
                        True,
                    ),
                    _query(
                        "includeLastMessage",
                        {"type": "integer", "enum": [0, 1], "default": 0},
                        "Add the chat's last message",
                    ),
                ],
                "responses": {
                    "200": _json(GuestLinks, "The links"),
                    **_api_errors(400, 401, 404, 409, 429),
                },
            }
        },
        "/openapi/v1/oauth2/token": {
            "post": {
                "operationId": "issueToken",
                "summary": "Obtain an access token (OAuth2 client credentials)",
                "tags": ["open api"],
                "description": (
                    "Client credentials as members of the body, or as HTTP Basic "
                    "(RFC 6749 §2.3.1), which then replaces client_id and client_secret."
                ),
                "security": [{}, {"clientBasic": []}],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/x-www-form-urlencoded": {"schema": _ref(TokenRequest)},
                        "application/json": {"schema": _ref(TokenRequest)},
                    },
                },
                "responses": {
                    "200": _json(TokenResponse, "An access token"),
                    **_api_errors(400, 401, 429),
                },
            }
        },
        "/properties/{id}": {
            "put": {
                "operationId": "setPropertyStatus",
                "summary": "Activate or deactivate a property",
                "tags": ["open api"],
                "security": _OPENAPI_SECURITY,
                "parameters": [
                    {
                        "name": "id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                        "description": "The property's id in the service",
                    },
                    _query(
                        "updateSubUnits",
                        {"type": "boolean", "default": False},
                        "Apply the change to the sub-units too",
                    ),
                ],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(PropertyStatusUpdate)}},
                },
                "responses": {
                    "200": _json(PropertyStatusResponse, "The new status"),
                    **_api_errors(400, 401, 404, 409, 429),
                },
            }
        },
        "/api/openapi/v1/webhooks": {
            "get": {
                "operationId": "listWebhooks",
                "summary": "List outgoing webhook configurations",
                "tags": ["open api"],
                "security": _OPENAPI_SECURITY,
                "responses": {
                    "200": _json(WebhookConfigList, "The configurations"),
                    **_api_errors(401, 429),
                },
            },
            "post": {
                "operationId": "createWebhook",
                "summary": "Create an outgoing webhook configuration",
                "tags": ["open api"],
                "security": _OPENAPI_SECURITY,
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(WebhookConfig)}},
                },
                "responses": {
                    "201": _json(StoredWebhookConfig, "Created"),
                    **_api_errors(400, 401, 429),
                },
            },
        },
        "/api/openapi/v1/webhooks/{id}": {
            "get": {
                "operationId": "getWebhook",
                "summary": "Read an outgoing webhook configuration",
                "tags": ["open api"],
                "security": _OPENAPI_SECURITY,
                "parameters": [webhook_id],
                "responses": {
                    "200": _json(StoredWebhookConfig, "The configuration"),
                    **_api_errors(401, 404, 429),
                },
            },
            "put": {
                "operationId": "updateWebhook",
                "summary": "Replace an outgoing webhook configuration",
                "tags": ["open api"],
                "security": _OPENAPI_SECURITY,
                "parameters": [webhook_id],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(WebhookConfig)}},
                },
                "responses": {
                    "200": _json(StoredWebhookConfig, "Updated"),
                    **_api_errors(400, 401, 404, 429),
                },
            },
            "delete": {
                "operationId": "deleteWebhook",
                "summary": "Delete an outgoing webhook configuration",
                "tags": ["open api"],
                "security": _OPENAPI_SECURITY,
                "parameters": [webhook_id],
                "responses": {"204": {"description": "Deleted"}, **_api_errors(401, 404, 429)},
            },
        },
    }
    _add_response_headers(paths)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Accommodation and reservation sync interface with Open API",
            "version": "v1",
            "description": (
                "Generated by pms-sync from its contract models (connector/contract). Shapes the "
                "specification leaves open follow docs/decisions.md."
            ),
        },
        "servers": [{"url": "http://127.0.0.1:8765", "description": "pms-sync's local sandbox"}],
        "paths": paths,
        "components": {
            "schemas": definitions["$defs"],
            "securitySchemes": {
                "syncTokenHeader": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "X-Wishbox-Auth-Token",
                },
                "bearerToken": {"type": "http", "scheme": "bearer"},
                "clientBasic": {"type": "http", "scheme": "basic"},
            },
        },
    }


def render_openapi() -> str:
    return json.dumps(build_openapi(), indent=2, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0]) if args else Path("docs/openapi.json")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_openapi(), encoding="utf-8")


if __name__ == "__main__":
    main()

"""Error bodies of the two API families: plain strings on the sync webhooks (spec §7), JSON
``{"error", "message"}`` on the Open API and the admin API (the spec leaves their shape open).
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.responses import JSONResponse, PlainTextResponse, Response

SYNC_PATH_PREFIX = "/api/v1/hooks/"


def is_sync_path(path: str) -> bool:
    return path.startswith(SYNC_PATH_PREFIX)


def plain_error(status: int, message: str, headers: Mapping[str, str] | None = None) -> Response:
    return PlainTextResponse(message, status_code=status, headers=headers)


def api_error(
    status: int, error: str, message: str, headers: Mapping[str, str] | None = None
) -> Response:
    return JSONResponse({"error": error, "message": message}, status_code=status, headers=headers)


_ERROR_CODES = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    429: "rate_limited",
    500: "internal_error",
    502: "bad_gateway",
    503: "unavailable",
    504: "timeout",
}


def error_for_path(
    path: str, status: int, message: str, headers: Mapping[str, str] | None = None
) -> Response:
    """The error body the family of ``path`` uses."""
    if is_sync_path(path):
        return plain_error(status, message, headers)
    return api_error(status, _ERROR_CODES.get(status, "error"), message, headers)

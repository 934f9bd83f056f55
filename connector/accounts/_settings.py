"""How pms-sync reaches the Open API of a connection, and what it does with properties."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from connector.client import ClientCredentials, normalize_base_url

TOKEN_CACHE_FILE = "openapi-tokens.json"
"""The OAuth2 token cache's name in the state folder (the snapshot's folder)."""


@dataclass(frozen=True)
class OpenApiSettings:
    """An Open API client (OAuth2 client credentials) whose scope covers the connection's
    accounts, where its API is, and where its access token is cached."""

    credentials: ClientCredentials
    base_url: str
    renew_margin_s: float  # renew tokens this long before expiry (open_api.renew_margin)
    token_cache: Path | None = None  # 0600 JSON file shared by the deployment's processes

    @property
    def client_id(self) -> str:
        return self.credentials.client_id

    @property
    def client_key(self) -> str:
        """Names this client in the snapshot: two clients never share discovered accounts."""
        return f"{normalize_base_url(self.base_url)}|{self.credentials.client_id}"


@dataclass(frozen=True)
class PropertyPolicy:
    """Property offboarding (spec §4.6): an account gone from its connection's full export is
    deactivated with ``PUT /properties/{account id}``, and reactivated when it comes back."""

    offboard: bool = True
    update_sub_units: bool = True  # the query parameter updateSubUnits of both requests

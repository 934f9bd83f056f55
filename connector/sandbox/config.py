"""The sandbox's configuration: accounts, their sync tokens, Open API clients, faults, rate
limits, and the admin token that guards the admin API.

Read from a YAML file (``pms-sync sandbox --config FILE``); without one the sandbox seeds the
public demo account, whose credentials are printed at start.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Self

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    model_validator,
)

from connector.errors import ConfigError
from connector.sandbox.faults import FaultSettings
from connector.sandbox.rate_limits import RateLimit
from connector.secrets import parse_error_position

DEFAULT_PORT = 8765
DEFAULT_DATA_PATH = Path(".pms-sync/sandbox")
DEMO_SYNC_TOKEN = "demo-token"
DEMO_CLIENT_ID = "demo-client"
DEMO_CLIENT_SECRET = "demo-secret"
ADMIN_TOKEN_VARIABLE = "PMS_SYNC_SANDBOX_ADMIN_TOKEN"
ADMIN_TOKEN_MIN_LENGTH = 16

AdminToken = Annotated[
    str,
    StringConstraints(min_length=ADMIN_TOKEN_MIN_LENGTH, pattern=r"^[\x21-\x7e]+$"),
]
"""A token an HTTP header carries as it is: visible ASCII, long enough not to be guessed."""


class _ConfigModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AccountConfig(_ConfigModel):
    """An account of the service: the target of sync requests (its ``id`` is their accountId)."""

    id: str = Field(min_length=1, description="The accountId of sync envelopes.")
    name: str = Field(min_length=1)
    externalId: str = Field(default="", description="Looked up by GET /api/openapi/v1/accounts.")
    sync_tokens: list[str] = Field(
        default_factory=list, description="Tokens accepted by the sync webhooks for this account."
    )


class ClientConfig(_ConfigModel):
    """An Open API client (OAuth2 client credentials) and the accounts in its scope."""

    client_id: str = Field(min_length=1)
    client_secret: str = Field(min_length=1)
    accounts: list[str] = Field(min_length=1, description="Ids of the accounts in scope.")
    token_lifetime_s: int = Field(default=3600, ge=1)


class SandboxConfig(_ConfigModel):
    accounts: list[AccountConfig] = Field(min_length=1)
    clients: list[ClientConfig] = Field(default_factory=list)
    faults: FaultSettings = Field(default_factory=FaultSettings)
    rate_limits: dict[str, RateLimit] = Field(
        default_factory=dict,
        description=(
            "Limits per sync token or Open API client id; the key '*' applies to every "
            "token and client without an entry of its own. Empty: no limits."
        ),
    )
    links_base_url: str = Field(
        default="https://guest.sandbox.invalid",
        description="Base of the guest-app, chat and check-in links the sandbox makes up.",
    )
    admin_token: AdminToken | None = Field(
        default=None,
        description=(
            "When set, every request under /_sandbox/ must carry it (Authorization: Bearer "
            "<token> or X-Sandbox-Admin-Token); required to listen on a non-loopback host."
        ),
    )
    # Private, so that no config file can claim to be the demo and get its secrets printed.
    _is_demo: bool = PrivateAttr(default=False)

    @property
    def is_demo(self) -> bool:
        """The public demo setup, whose credentials may be printed."""
        return self._is_demo

    @model_validator(mode="after")
    def _references_known_accounts(self) -> Self:
        ids = [account.id for account in self.accounts]
        repeated = sorted({account_id for account_id in ids if ids.count(account_id) > 1})
        if repeated:
            raise ValueError(f"account ids must be unique, repeated: {repeated}")
        for client in self.clients:
            unknown = sorted(set(client.accounts) - set(ids))
            if unknown:
                raise ValueError(f"client {client.client_id!r} names unknown accounts {unknown}")
        client_ids = [client.client_id for client in self.clients]
        if len(set(client_ids)) != len(client_ids):
            raise ValueError("client ids must be unique")
        return self

    @classmethod
    def demo(cls) -> SandboxConfig:
        """The public demo setup used when no config file is given."""
        config = cls(
            accounts=[
                AccountConfig(
                    id="demo", name="Demo Hotel", externalId="demo", sync_tokens=[DEMO_SYNC_TOKEN]
                ),
                # A second account on the same token, so the bundled hotel example can show one
                # export routed to two accounts.
                AccountConfig(
                    id="demo-2",
                    name="Demo Hotel Munich",
                    externalId="demo-2",
                    sync_tokens=[DEMO_SYNC_TOKEN],
                ),
            ],
            clients=[
                ClientConfig(
                    client_id=DEMO_CLIENT_ID,
                    client_secret=DEMO_CLIENT_SECRET,
                    accounts=["demo", "demo-2"],
                )
            ],
        )
        config._is_demo = True
        return config

    def with_admin_token(self, token: str) -> SandboxConfig:
        """This config with ``token`` as its admin token (a command-line or environment value
        wins over the file's); a ConfigError when the token is unfit (never quoting it)."""
        try:
            checked = TypeAdapter(AdminToken).validate_python(token)
        except ValidationError:
            raise ConfigError(
                f"the sandbox admin token must be at least {ADMIN_TOKEN_MIN_LENGTH} visible "
                f"ASCII characters without spaces (e.g. the output of "
                f"`python -c 'import secrets; print(secrets.token_urlsafe())'`)"
            ) from None
        return self.model_copy(update={"admin_token": checked})

    def account(self, account_id: str) -> AccountConfig | None:
        return next((account for account in self.accounts if account.id == account_id), None)

    def client(self, client_id: str) -> ClientConfig | None:
        return next((client for client in self.clients if client.client_id == client_id), None)

    def accounts_of_sync_token(self) -> dict[str, frozenset[str]]:
        """Each sync token and the accounts it may write to."""
        allowed: dict[str, set[str]] = {}
        for account in self.accounts:
            for token in account.sync_tokens:
                allowed.setdefault(token, set()).add(account.id)
        return {token: frozenset(ids) for token, ids in allowed.items()}


def load_config(path: Path) -> SandboxConfig:
    """Read a YAML config file; every problem is reported as a ConfigError naming the file."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"cannot read sandbox config {path}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 text (byte {error.start})") from None
    except yaml.YAMLError as error:
        # The parser's message quotes the offending line, which may hold a token or a secret.
        raise ConfigError(
            f"{path}: not valid YAML ({parse_error_position(error)}); its content is not shown, "
            "it holds secrets"
        ) from None
    try:
        return SandboxConfig.model_validate(raw or {})
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or '(top)'}: {item['msg']}"
            for item in error.errors(include_input=False)
        )
        raise ConfigError(f"{path}: invalid sandbox config: {problems}") from None

"""The sandbox's configuration: accounts, their sync tokens, Open API clients, faults, rate
limits, and the admin token that guards the admin API.

Read from a YAML file (``pms-sync sandbox --config FILE``); without one the sandbox seeds the
public demo account, whose credentials are printed at start.
"""

from __future__ import annotations

from collections.abc import Iterable
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
    field_validator,
    model_validator,
)

from connector.config import SandboxSection
from connector.errors import ConfigError
from connector.sandbox.faults import FaultSettings
from connector.sandbox.local_guard import AllowedHosts
from connector.sandbox.rate_limits import RateLimit
from connector.secrets import checked_secret, parse_error_position

DEFAULT_PORT = 8765
DEFAULT_DATA_PATH = Path(".pms-sync/sandbox")
DEMO_SYNC_TOKEN = "demo-token"
DEMO_CLIENT_ID = "demo-client"
DEMO_CLIENT_SECRET = "demo-secret"
ADMIN_TOKEN_VARIABLE = SandboxSection.variable("admin_token")
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
    account_token_lifetime_s: int | None = Field(
        default=None,
        ge=1,
        description="Lifetime of the account-level tokens the externalId lookup hands out "
        "(expires_in); default: token_lifetime_s.",
    )

    @property
    def account_token_lifetime(self) -> int:
        return self.account_token_lifetime_s or self.token_lifetime_s


class GeneratedAccounts(_ConfigModel):
    """Many accounts under one multi-account Open API client, generated rather than listed:
    ``<id_prefix>-001``… with external ids ``<external_id_prefix>-001``… and names
    ``Hotel 001``…, as a PMS vendor's connection of dozens or hundreds of hotels."""

    count: int = Field(ge=1, le=100_000)
    client_id: str = Field(default="many-client", min_length=1)
    client_secret: str = Field(default="many-secret", min_length=1)
    id_prefix: str = Field(default="acc", min_length=1)
    external_id_prefix: str = Field(default="HOTEL", min_length=1)
    token_lifetime_s: int = Field(default=3600, ge=1)
    account_token_lifetime_s: int | None = Field(default=None, ge=1)

    def accounts(self) -> list[AccountConfig]:
        width = max(3, len(str(self.count)))
        return [
            AccountConfig(
                id=f"{self.id_prefix}-{n:0{width}d}",
                name=f"Hotel {n:0{width}d}",
                externalId=f"{self.external_id_prefix}-{n:0{width}d}",
            )
            for n in range(1, self.count + 1)
        ]

    def client(self) -> ClientConfig:
        return ClientConfig(
            client_id=self.client_id,
            client_secret=self.client_secret,
            accounts=[account.id for account in self.accounts()],
            token_lifetime_s=self.token_lifetime_s,
            account_token_lifetime_s=self.account_token_lifetime_s,
        )


class EventDeliverySettings(_ConfigModel):
    """How the sandbox delivers outgoing events to the configured webhooks: each POST waits
    ``timeout_s``; a connection error, a timeout, 408, 429 or 5xx is retried after
    ``backoff_s``, doubled at each attempt up to ``max_backoff_s``, ``max_attempts`` times in
    all (Retry-After honoured within that bound); any other answer ends the delivery."""

    max_attempts: int = Field(default=5, ge=1, le=50)
    backoff_s: float = Field(default=1.0, gt=0, le=3600)
    max_backoff_s: float = Field(default=60.0, gt=0, le=86_400)
    timeout_s: float = Field(default=10.0, gt=0, le=600)


class SandboxConfig(_ConfigModel):
    accounts: list[AccountConfig] = Field(min_length=1)
    clients: list[ClientConfig] = Field(default_factory=list)
    generated_accounts: GeneratedAccounts | None = Field(
        default=None,
        description="Add many accounts under one multi-account client (see GeneratedAccounts).",
    )
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
    event_delivery: EventDeliverySettings = Field(
        default_factory=EventDeliverySettings,
        description="Retries of outgoing-event deliveries to the configured webhooks.",
    )
    admin_token: AdminToken | None = Field(
        default=None,
        description=(
            "When set, every request under /_sandbox/ must carry it (Authorization: Bearer "
            "<token> or X-Sandbox-Admin-Token); required to listen on a non-loopback host."
        ),
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description=(
            "Host names (optionally name:port) the sandbox answers besides its own address "
            "and loopback: a reverse proxy's or a DNS name. Any other Host is answered 421."
        ),
    )
    # Private, so that no config file can claim to be the demo and get its secrets printed.
    _is_demo: bool = PrivateAttr(default=False)

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, value: list[str]) -> list[str]:
        try:
            return list(AllowedHosts.of("127.0.0.1", value).names)
        except ConfigError as error:
            raise ValueError(str(error)) from None

    @field_validator("admin_token", mode="before")
    @classmethod
    def _checked_admin_token(cls, value: object) -> object:
        try:
            return checked_secret(value, "admin_token")
        except ConfigError as error:
            raise ValueError(str(error)) from None

    @property
    def is_demo(self) -> bool:
        """The public demo setup, whose credentials may be printed."""
        return self._is_demo

    @model_validator(mode="before")
    @classmethod
    def _expand_generated_accounts(cls, data: object) -> object:
        # Expanded once, into the ordinary lists: the rest of the sandbox knows no difference.
        if not isinstance(data, dict) or not data.get("generated_accounts"):
            return data
        generated = GeneratedAccounts.model_validate(data["generated_accounts"])
        accounts = [
            item.model_dump() if isinstance(item, AccountConfig) else item
            for item in data.get("accounts") or []
        ]
        known = {item.get("id") for item in accounts if isinstance(item, dict)}
        accounts += [a.model_dump() for a in generated.accounts() if a.id not in known]
        clients = [
            item.model_dump() if isinstance(item, ClientConfig) else item
            for item in data.get("clients") or []
        ]
        if not any(
            isinstance(c, dict) and c.get("client_id") == generated.client_id for c in clients
        ):
            clients.append(generated.client().model_dump())
        return {**data, "accounts": accounts, "clients": clients, "generated_accounts": None}

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

    def with_generated_accounts(self, generated: GeneratedAccounts) -> SandboxConfig:
        """This config plus ``generated``'s accounts and client (``--many-accounts``)."""
        return SandboxConfig.model_validate(
            {**self.model_dump(), "generated_accounts": generated.model_dump()}
        ).keeping_demo(self)

    def with_token_lifetime(self, seconds: int) -> SandboxConfig:
        """Every client's tokens, client and account-level, live ``seconds`` (``--token-lifetime``)."""
        clients = [
            client.model_copy(
                update={"token_lifetime_s": seconds, "account_token_lifetime_s": seconds}
            )
            for client in self.clients
        ]
        return self.model_copy(update={"clients": clients}).keeping_demo(self)

    def keeping_demo(self, original: SandboxConfig) -> SandboxConfig:
        self._is_demo = original._is_demo
        return self

    def with_admin_token(self, token: str) -> SandboxConfig:
        """This config with ``token`` as its admin token (a command-line or environment value
        wins over the file's); a ConfigError when the token is unfit (never quoting it)."""
        token = (
            checked_secret(
                token, f"the sandbox admin token (--admin-token, {ADMIN_TOKEN_VARIABLE})"
            )
            or ""
        )
        try:
            checked = TypeAdapter(AdminToken).validate_python(token)
        except ValidationError:
            raise ConfigError(
                f"the sandbox admin token must be at least {ADMIN_TOKEN_MIN_LENGTH} visible "
                f"ASCII characters without spaces (e.g. the output of "
                f"`python -c 'import secrets; print(secrets.token_urlsafe())'`)"
            ) from None
        return self.model_copy(update={"admin_token": checked})

    def with_allowed_hosts(self, names: Iterable[str]) -> SandboxConfig:
        """This config also answering the Host names ``names`` (``--allowed-host``)."""
        added = AllowedHosts.of("127.0.0.1", names).names  # a ConfigError names the bad one
        hosts = [*self.allowed_hosts, *added]
        return self.model_copy(update={"allowed_hosts": hosts}).keeping_demo(self)

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

"""Settings of a sync: which service, which tokens, which snapshot, how fast.

Each value comes from an explicit argument (the CLI flag or a Dagster resource), else from an
environment variable, else from the default; every variable, its parsing and its default are
declared once in :mod:`connector.config` (the table: docs/configuration.md). This module turns
them into the library's objects.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml
from pydantic import SecretStr

from connector.accounts import TOKEN_CACHE_FILE, OpenApiSettings, PropertyPolicy
from connector.client import (
    AccountTokens,
    AcknowledgementPolicy,
    ClientConfig,
    ClientCredentials,
    EventLoop,
    RetryPolicy,
    TokenPlacement,
    Transport,
    Window,
    default_event_loop,
    effective_windows,
    parse_windows,
)
from connector.config import (
    DEFAULT_FULL_READ_INTERVAL,
    OpenApiSection,
    RunSection,
    ServiceSection,
)
from connector.config import DEFAULT_SNAPSHOT as _DEFAULT_SNAPSHOT
from connector.cursors import parse_interval
from connector.errors import ConfigError
from connector.plan import (
    DEFAULT_REMOTE_REFRESH_DAYS,
    Budget,
    RefreshPolicy,
    UrgencyPolicy,
    parse_share,
)
from connector.push import PushOptions
from connector.secrets import (
    checked_secret,
    has_user_info,
    parse_error_position,
    redact_url,
    register_secret,
    register_url_password,
)
from connector.snapshot import (
    SnapshotLocation,
    snapshot_location,
    state_dir,
)

DEFAULT_SNAPSHOT = Path(_DEFAULT_SNAPSHOT)


@dataclass(frozen=True)
class SyncSettings:
    client: ClientConfig = field(default_factory=ClientConfig)
    tokens: AccountTokens = field(default_factory=AccountTokens)
    snapshot_path: SnapshotLocation = DEFAULT_SNAPSHOT  # a DuckDB file or a postgresql:// URL
    push: PushOptions = field(default_factory=PushOptions)
    lock_timeout: float = 0.0  # seconds to wait for another process's snapshot lock
    urgency: UrgencyPolicy = field(default_factory=UrgencyPolicy)
    # The Open API client of the connection (None: accounts and tokens are given by hand).
    open_api: OpenApiSettings | None = None
    properties: PropertyPolicy = field(default_factory=PropertyPolicy)
    # The rolling refresh (docs/drift.md). Off unless set: load_settings turns it on for a
    # remote service.
    refresh: RefreshPolicy = field(default_factory=RefreshPolicy)
    # Incremental reads of SQL inputs with a cursor (connector.pipeline._incremental): a full
    # read when the last one is this many seconds old (0: always), or ``full_read``.
    full_read_interval_s: float = parse_interval(DEFAULT_FULL_READ_INTERVAL)
    full_read: bool = False
    # Rows of an entity the mapping maps at once (``PMS_SYNC_SLICE_ROWS``); None: as the
    # environment sets them when the mapping runs.
    slice_rows: int | None = None


def load_settings(
    *,
    base_url: str | None = None,
    snapshot: str | Path | None = None,
    token: str | None = None,
    tokens_file: str | Path | None = None,
    concurrency: int | None = None,
    rate_limit: float | None = None,
    max_attempts: int | None = None,
    transport: str | None = None,
    rate_limits: str | None = None,
    client_id: str | None = None,
    client_secret: str | None = None,
    openapi_url: str | None = None,
    update_sub_units: bool | None = None,
    refresh: str | None = None,
    refresh_max: int | None = None,
    max_duration: str | float | None = None,
    full_read_interval: str | None = None,
    full_read: bool | None = None,
    env: Mapping[str, str] | None = None,
) -> SyncSettings:
    """Settings from explicit values, then environment variables (``env``; None: the
    process's), then defaults."""
    service = ServiceSection.read(
        env,
        {
            "base_url": base_url,
            "token": token,
            "tokens_file": tokens_file,
            "concurrency": concurrency,
            "rate_limit": rate_limit,
            "max_attempts": max_attempts,
            "transport": transport,
            "rate_limits": rate_limits,
        },
        {"token": "token"},
    )
    open_api = OpenApiSection.read(
        env,
        {
            "client_id": client_id,
            "client_secret": client_secret,
            "base_url": openapi_url,
            "update_sub_units": update_sub_units,
        },
    )
    run = RunSection.read(
        env,
        {
            "snapshot": str(snapshot) if snapshot is not None else None,
            "refresh": refresh,
            "refresh_max": refresh_max,
            "max_duration": max_duration,
            "full_read_interval": full_read_interval,
            "full_read": full_read,
        },
    )
    return sync_settings(service, open_api, run)


def sync_settings(
    service: ServiceSection, open_api: OpenApiSection, run: RunSection
) -> SyncSettings:
    """The library's settings of a sync from the sections that configure it."""
    service_url = service.base_url.rstrip("/")
    refuse_credentials_in_url(service_url)
    try:
        client = ClientConfig(
            base_url=service_url,
            token_placement=_placement(service.token_placement),
            transport=Transport(service.transport),
            event_loop=(
                EventLoop(service.event_loop) if service.event_loop else default_event_loop()
            ),
            concurrency=service.concurrency,
            rate_limit=service.rate_limit,
            rate_windows=_windows(service.rate_limits),
            read_timeout=service.timeout,
            retry=replace(RetryPolicy(), max_attempts=service.max_attempts),
            insecure_tls_hosts=frozenset(service.insecure_tls_for),
            acknowledgement=AcknowledgementPolicy(service.acknowledgement),
        )
    except ValueError as error:
        raise ConfigError(f"invalid service setting: {error}") from error
    tokens = AccountTokens(
        per_account=load_tokens_file(service.tokens_file) if service.tokens_file else {},
        default=_revealed(service.token),
    )
    snapshot_path = snapshot_location(run.snapshot)
    return SyncSettings(
        client=client,
        tokens=tokens,
        snapshot_path=snapshot_path,
        push=PushOptions(
            concurrency=service.concurrency, budget=Budget(max_duration_s=run.max_duration)
        ),
        urgency=UrgencyPolicy(
            horizon_days=run.urgent_days, cancellations_urgent=run.urgent_cancellations
        ),
        open_api=open_api_settings(
            client_id=open_api.client_id,
            client_secret=_revealed(open_api.client_secret),
            base_url=open_api.base_url or service_url,
            token_cache=open_api.token_cache or state_dir(snapshot_path) / TOKEN_CACHE_FILE,
            renew_margin_s=open_api.renew_margin,
            names=(
                OpenApiSection.variable("client_id"),
                OpenApiSection.variable("client_secret"),
            ),
        ),
        properties=PropertyPolicy(
            offboard=open_api.offboard_properties, update_sub_units=open_api.update_sub_units
        ),
        refresh=refresh_policy(client, run),
        full_read_interval_s=parse_interval(run.full_read_interval),
        full_read=run.full_read,
        slice_rows=run.slice_rows,
    )


def open_api_settings(
    *,
    client_id: str | None,
    client_secret: str | None,
    base_url: str,
    token_cache: Path | None,
    renew_margin_s: float = OpenApiSection.default("renew_margin"),
    names: tuple[str, str] = (
        OpenApiSection.variable("client_id"),
        OpenApiSection.variable("client_secret"),
    ),
) -> OpenApiSettings | None:
    """The Open API client, or None when no client id and secret are given. ``names``: where
    the id and the secret were read, for messages."""
    client_id = checked_secret(client_id, names[0], secret=False)
    client_secret = checked_secret(client_secret, names[1])  # before anything could print it
    if not client_id and not client_secret:
        return None
    if not client_id or not client_secret:
        given, missing = names if client_id else names[::-1]
        raise ConfigError(
            f"the Open API client needs both a client id and a client secret: {given} is set, "
            f"{missing} is not (or pass --client-id and --client-secret)"
        )
    base_url = base_url.rstrip("/")
    refuse_credentials_in_url(base_url)
    return OpenApiSettings(
        credentials=ClientCredentials(client_id, client_secret),
        base_url=base_url,
        token_cache=token_cache,
        renew_margin_s=max(renew_margin_s, 0.0),
    )


def _revealed(value: SecretStr | None) -> str | None:
    # The model checked and registered it as a secret when it was read.
    return value.get_secret_value() if value is not None else None


def refresh_policy(client: ClientConfig, run: RunSection) -> RefreshPolicy:
    """The rolling refresh of ``run``'s settings against the service of ``client``.

    Default share: every record within 7 runs against a remote service, off on loopback (the
    local sandbox: a demo sends nothing it does not have to). Default cap: the limit of the
    hourly rate-limit window in force (5,000 under the documented limits), so a refresh never
    takes more than an hour's worth of the token's requests; no cap without windows.
    """
    if run.refresh is None:
        # Remote is what gets the documented limits by default: any host but loopback.
        remote = bool(effective_windows(replace(client, rate_windows=None)))
        value = 1 / DEFAULT_REMOTE_REFRESH_DAYS if remote else 0.0
    else:
        value = parse_share(run.refresh, RunSection.variable("refresh"))
    if run.refresh_max is None:
        hourly = [w.limit for w in effective_windows(client) if w.span >= 3600]
        cap = min(hourly) if hourly else None
    else:
        cap = None if run.refresh_max == "none" else int(run.refresh_max)
    try:
        return RefreshPolicy(share=value, max_requests=cap, include_past_stays=run.refresh_past)
    except ValueError as error:
        raise ConfigError(f"refresh: {error}") from error


def _windows(value: str | None) -> tuple[Window, ...] | None:
    # None keeps the default (documented limits for a remote service, none on loopback).
    return None if value is None else parse_windows(value)


def refuse_credentials_in_url(url: str) -> None:
    """Refuse a service base URL with user-info (``https://user:password@host``).

    The sync webhooks authenticate with tokens in headers; HTTP Basic credentials from the URL
    would collide with ``Authorization: Bearer`` and end up in every message that names the
    URL. The password is registered first, so that nothing printed from here on shows it.
    """
    if not has_user_info(url):
        return
    register_url_password(url)
    raise ConfigError(
        f"the service base URL {redact_url(url, show_user=True)} carries credentials "
        "(user-info before the host): the sync webhooks authenticate with a token in a header. "
        "Remove 'user:password@' from --base-url / PMS_SYNC_BASE_URL and set the token with "
        "PMS_SYNC_TOKEN or the tokens file (PMS_SYNC_TOKENS_FILE)"
    )


def load_tokens_file(path: Path) -> dict[str, str]:
    """A YAML or JSON object ``{accountId: token}``; every token is registered as a secret."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot read the tokens file {path}: {error.strerror}") from error
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"the tokens file {path} is not UTF-8 text (byte {error.start})"
        ) from None
    try:
        content = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as error:
        # The parser's message quotes the offending line, token included: position only.
        raise ConfigError(
            f"the tokens file {path} is not valid {'JSON' if path.suffix == '.json' else 'YAML'}"
            f" ({parse_error_position(error)}); its content is not shown, it holds tokens"
        ) from None
    if isinstance(content, dict):
        for value in content.values():
            if isinstance(value, str | int) and not isinstance(value, bool):
                register_secret(value)
    if not isinstance(content, dict) or not all(
        isinstance(value, str | int) and not isinstance(value, bool) for value in content.values()
    ):
        raise ConfigError(
            f"the tokens file {path} must be an object of account id to token string, "
            f"e.g. {{acc-1: <token>}}"
        )
    return {
        str(account): checked_secret(value, f"the tokens file {path}", account=str(account)) or ""
        for account, value in content.items()
    }


def _placement(value: str | None) -> frozenset[TokenPlacement]:
    # The model checked the names and spelled them as the library does.
    if not value:
        return ClientConfig().token_placement
    return frozenset(TokenPlacement(part) for part in value.split(","))

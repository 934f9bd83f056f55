"""Settings of a sync: which service, which tokens, which snapshot, how fast.

Each value comes from an explicit argument (the CLI flag or a Dagster resource), else from an
environment variable, else from the default:

| setting | variable | default |
|---|---|---|
| service base URL | PMS_SYNC_BASE_URL | http://127.0.0.1:8765 (the local sandbox) |
| one token for every account | PMS_SYNC_TOKEN | none |
| per-account tokens file (YAML/JSON ``{accountId: token}``) | PMS_SYNC_TOKENS_FILE | none |
| snapshot file | PMS_SYNC_SNAPSHOT | .pms-sync/snapshot.duckdb |
| requests in flight | PMS_SYNC_CONCURRENCY | 16 |
| requests per second (a plain bucket instead of windows) | PMS_SYNC_RATE_LIMIT | unset |
| rate-limit windows per token (``15/s,120/min,5000/h``; ``off``) | PMS_SYNC_RATE_LIMITS | the documented 15/s,120/min,5000/h for a remote service, off for a loopback one |
| days ahead an arrival is urgent | PMS_SYNC_URGENT_DAYS | 14 |
| attempts per record (retries + 1) | PMS_SYNC_MAX_ATTEMPTS | 5 |
| read timeout, seconds | PMS_SYNC_TIMEOUT | 30 |
| token placement (comma list of x-wishbox-auth-token, bearer, apiToken) | PMS_SYNC_TOKEN_PLACEMENT | x-wishbox-auth-token,bearer |
| HTTP transport (aiohttp, httpx) | PMS_SYNC_TRANSPORT | aiohttp |
| event loop of the push (uvloop, asyncio) | PMS_SYNC_EVENT_LOOP | uvloop where installed (not on Windows), else asyncio |
| base URLs whose TLS certificate is not verified (comma list) | PMS_SYNC_INSECURE_TLS_FOR | none |
| which 2xx bodies acknowledge a record (counts, documented) | PMS_SYNC_ACKNOWLEDGEMENT | counts |
| Open API client id (account discovery, tokens, properties) | PMS_SYNC_CLIENT_ID | none |
| Open API client secret (never printed) | PMS_SYNC_CLIENT_SECRET | none |
| Open API base URL | PMS_SYNC_OPENAPI_URL | the service base URL |
| OAuth2 token cache (0600 JSON, shared by processes) | PMS_SYNC_TOKEN_CACHE | openapi-tokens.json next to the snapshot |
| renew Open API and account tokens this many seconds before expiry (at most a quarter of their lifetime) | PMS_SYNC_RENEW_MARGIN | 60 |
| deactivate the property of an account gone from a full export (on, off) | PMS_SYNC_OFFBOARD_PROPERTIES | on |
| updateSubUnits of property status changes (true, false) | PMS_SYNC_UPDATE_SUB_UNITS | true |
| rolling refresh: share of acknowledged records re-sent per run (``7d``, ``15%``, ``0.15``, ``off``) | PMS_SYNC_REFRESH | ``7d`` for a remote service, off for a loopback one (docs/drift.md) |
| refresh requests per run at most (``none``: no cap) | PMS_SYNC_REFRESH_MAX | the hourly rate-limit window's limit (5,000 documented); none without windows |
| refresh past stays too (1/0) | PMS_SYNC_REFRESH_PAST | 0 |
| the run's deadline, seconds (``0``, ``none``, ``off``: none) | PMS_SYNC_MAX_DURATION | 21600 (6 h) |
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import yaml

from connector.accounts import TOKEN_CACHE_FILE, OpenApiSettings, PropertyPolicy
from connector.client import (
    DEFAULT_BASE_URL,
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
    parse_max_duration,
    parse_windows,
)
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
    DEFAULT_RENEW_MARGIN_S,
    SnapshotLocation,
    snapshot_location,
    state_dir,
)

DEFAULT_SNAPSHOT = Path(".pms-sync/snapshot.duckdb")


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
    env: Mapping[str, str] | None = None,
) -> SyncSettings:
    """Settings from explicit values, then environment variables, then defaults."""
    env = os.environ if env is None else env
    concurrency = concurrency or _int(env, "PMS_SYNC_CONCURRENCY", 16)
    retry = replace(
        RetryPolicy(), max_attempts=max_attempts or _int(env, "PMS_SYNC_MAX_ATTEMPTS", 5)
    )
    service_url = (base_url or env.get("PMS_SYNC_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
    refuse_credentials_in_url(service_url)
    try:
        client = ClientConfig(
            base_url=service_url,
            token_placement=_placement(env.get("PMS_SYNC_TOKEN_PLACEMENT")),
            transport=Transport(transport or env.get("PMS_SYNC_TRANSPORT") or Transport.AIOHTTP),
            event_loop=_event_loop(env.get("PMS_SYNC_EVENT_LOOP")),
            concurrency=concurrency,
            rate_limit=rate_limit or _float(env, "PMS_SYNC_RATE_LIMIT", None),
            rate_windows=_windows(rate_limits or env.get("PMS_SYNC_RATE_LIMITS")),
            read_timeout=_float(env, "PMS_SYNC_TIMEOUT", 30.0) or 30.0,
            retry=retry,
            insecure_tls_hosts=_insecure_tls_hosts(env),
            acknowledgement=_acknowledgement(env),
        )
    except ValueError as error:
        raise ConfigError(f"invalid service setting: {error}") from error
    tokens_path = tokens_file or env.get("PMS_SYNC_TOKENS_FILE")
    tokens = AccountTokens(
        per_account=load_tokens_file(Path(tokens_path)) if tokens_path else {},
        default=checked_secret(token, "token") or _secret(env, "PMS_SYNC_TOKEN"),
    )
    try:
        urgency = UrgencyPolicy.from_env(env)
    except ValueError as error:
        raise ConfigError(f"PMS_SYNC_URGENT_DAYS: {error}") from error
    snapshot_path = snapshot_location(snapshot or env.get("PMS_SYNC_SNAPSHOT") or DEFAULT_SNAPSHOT)
    where = "--max-duration" if max_duration is not None else "PMS_SYNC_MAX_DURATION"
    try:
        deadline = parse_max_duration(
            max_duration if max_duration is not None else env.get("PMS_SYNC_MAX_DURATION")
        )
    except ValueError as error:
        raise ConfigError(f"{where}: {error}") from error
    return SyncSettings(
        client=client,
        tokens=tokens,
        snapshot_path=snapshot_path,
        push=PushOptions(concurrency=concurrency, budget=Budget(max_duration_s=deadline)),
        urgency=urgency,
        open_api=open_api_settings(
            client_id=checked_secret(client_id, "--client-id", secret=False)
            or _secret(env, "PMS_SYNC_CLIENT_ID", secret=False),
            client_secret=checked_secret(client_secret, "--client-secret")
            or _secret(env, "PMS_SYNC_CLIENT_SECRET"),
            base_url=openapi_url or env.get("PMS_SYNC_OPENAPI_URL") or service_url,
            token_cache=Path(
                env.get("PMS_SYNC_TOKEN_CACHE") or state_dir(snapshot_path) / TOKEN_CACHE_FILE
            ),
            renew_margin_s=_float(env, "PMS_SYNC_RENEW_MARGIN", DEFAULT_RENEW_MARGIN_S) or 0.0,
        ),
        properties=PropertyPolicy(
            offboard=flag_setting(env, "PMS_SYNC_OFFBOARD_PROPERTIES", True),
            update_sub_units=(
                update_sub_units
                if update_sub_units is not None
                else flag_setting(env, "PMS_SYNC_UPDATE_SUB_UNITS", True)
            ),
        ),
        refresh=refresh_policy(client, refresh, refresh_max, env),
    )


def open_api_settings(
    *,
    client_id: str | None,
    client_secret: str | None,
    base_url: str,
    token_cache: Path | None,
    renew_margin_s: float = DEFAULT_RENEW_MARGIN_S,
    names: tuple[str, str] = ("PMS_SYNC_CLIENT_ID", "PMS_SYNC_CLIENT_SECRET"),
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


def _secret(env: Mapping[str, str], name: str, *, secret: bool = True) -> str | None:
    """A credential from the environment variable ``name``, checked; None when unset or blank."""
    return checked_secret(env.get(name), name, secret=secret) or None


def flag_setting(env: Mapping[str, str], name: str, default: bool) -> bool:
    """An on/off setting, read alike by the CLI and Dagster: unset or blank is ``default``,
    anything but true/false, on/off, yes/no or 1/0 a ConfigError naming the variable."""
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{name} must be true or false (on/off, 1/0), got {raw!r}")


def refresh_policy(
    client: ClientConfig,
    share: str | None = None,
    max_requests: int | None = None,
    env: Mapping[str, str] | None = None,
) -> RefreshPolicy:
    """The rolling refresh from explicit values, then the environment, then the defaults.

    Default share: every record within 7 runs against a remote service, off on loopback (the
    local sandbox: a demo sends nothing it does not have to). Default cap: the limit of the
    hourly rate-limit window in force (5,000 under the documented limits), so a refresh never
    takes more than an hour's worth of the token's requests; no cap without windows.
    """
    env = os.environ if env is None else env
    raw = share if share is not None else env.get("PMS_SYNC_REFRESH")
    where = "--refresh" if share is not None else "PMS_SYNC_REFRESH"
    if raw is None or not raw.strip():
        # Remote is what gets the documented limits by default: any host but loopback.
        remote = bool(effective_windows(replace(client, rate_windows=None)))
        value = 1 / DEFAULT_REMOTE_REFRESH_DAYS if remote else 0.0
    else:
        value = parse_share(raw, where)
    cap = max_requests if max_requests is not None else _optional_int(env, "PMS_SYNC_REFRESH_MAX")
    if cap is None and "PMS_SYNC_REFRESH_MAX" not in env:
        hourly = [w.limit for w in effective_windows(client) if w.span >= 3600]
        cap = min(hourly) if hourly else None
    past = env.get("PMS_SYNC_REFRESH_PAST", "0").strip().lower() in ("1", "true", "yes", "on")
    try:
        return RefreshPolicy(share=value, max_requests=cap, include_past_stays=past)
    except ValueError as error:
        raise ConfigError(f"refresh: {error}") from error


def _optional_int(env: Mapping[str, str], name: str) -> int | None:
    raw = (env.get(name) or "").strip().lower()
    if raw in ("", "none", "off"):
        return None
    return _int(env, name, 0)


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


def _insecure_tls_hosts(env: Mapping[str, str]) -> frozenset[str]:
    """Base URLs named in PMS_SYNC_INSECURE_TLS_FOR; a blanket "off" is refused, not guessed."""
    if env.get("PMS_SYNC_VERIFY_TLS", "").strip().lower() in ("0", "false", "no", "off"):
        raise ConfigError(
            "PMS_SYNC_VERIFY_TLS is not supported: TLS verification cannot be turned off for "
            "every host; name the one base URL instead, e.g. "
            "PMS_SYNC_INSECURE_TLS_FOR=https://pms.internal:8443"
        )
    raw = env.get("PMS_SYNC_INSECURE_TLS_FOR", "")
    urls = frozenset(part.strip() for part in raw.split(",") if part.strip())
    for url in urls:
        if not url.lower().startswith("https://"):
            raise ConfigError(
                f"PMS_SYNC_INSECURE_TLS_FOR names base URLs such as https://pms.internal:8443, "
                f"got {redact_url(url)!r}"
            )
    return urls


def _event_loop(value: str | None) -> EventLoop:
    raw = (value or "").strip().lower()
    if not raw:
        return default_event_loop()
    try:
        chosen = EventLoop(raw)
    except ValueError:
        choices = ", ".join(loop.value for loop in EventLoop)
        raise ConfigError(f"PMS_SYNC_EVENT_LOOP must be one of {choices}, got {raw!r}") from None
    if chosen == EventLoop.UVLOOP and default_event_loop() != EventLoop.UVLOOP:
        raise ConfigError(
            "PMS_SYNC_EVENT_LOOP=uvloop, but uvloop is not installed (it is not available on "
            "Windows): install it or set PMS_SYNC_EVENT_LOOP=asyncio"
        )
    return chosen


def _acknowledgement(env: Mapping[str, str]) -> AcknowledgementPolicy:
    raw = env.get("PMS_SYNC_ACKNOWLEDGEMENT", "").strip().lower()
    if not raw:
        return AcknowledgementPolicy.COUNTS
    try:
        return AcknowledgementPolicy(raw)
    except ValueError:
        choices = ", ".join(p.value for p in AcknowledgementPolicy)
        raise ConfigError(
            f"PMS_SYNC_ACKNOWLEDGEMENT must be one of {choices}, got {raw!r}"
        ) from None


def _placement(value: str | None) -> frozenset[TokenPlacement]:
    if not value:
        return ClientConfig().token_placement
    try:
        return frozenset(TokenPlacement(part.strip()) for part in value.split(",") if part.strip())
    except ValueError as error:
        choices = ", ".join(p.value for p in TokenPlacement)
        raise ConfigError(f"PMS_SYNC_TOKEN_PLACEMENT: {error}; choose from {choices}") from error


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from None


def _float(env: Mapping[str, str], name: str, default: float | None) -> float | None:
    raw = env.get(name)
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None

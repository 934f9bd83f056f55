"""Every ``PMS_SYNC_*`` setting: its name, type, default, parsing and validation, once.

A field's variable is ``PMS_SYNC_<FIELD>`` (its section's prefix) unless ``validation_alias``
names another; ``flag`` and ``dagster`` name its projections (the CLI option, the Dagster
resource member), which take their variable and default from here. Values the library parses
(rate-limit windows, refresh shares, event loops) are checked with the library's own parser,
imported when a value is read: this package is a leaf every module may import.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from connector.config._reading import PREFIX, CommaList, Flag, Section, label
from connector.secrets import redact_url

DEFAULT_BASE_URL = "http://127.0.0.1:8765"
"""The local sandbox (``pms-sync sandbox``)."""
DEFAULT_CONCURRENCY = 16
DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_READ_TIMEOUT_S = 30.0
DEFAULT_MAX_DURATION_S = 6 * 3600.0
"""Every run has a deadline: a nightly run that hangs must not block the next night's."""
DEFAULT_HORIZON_DAYS = 14
DEFAULT_SNAPSHOT = ".pms-sync/snapshot.duckdb"
DEFAULT_MEMORY_LIMIT = "1GB"
"""Lower limits trade time for memory (DuckDB spills; docs/decisions.md, "Source fingerprints")."""

DEFAULT_SLICE_ROWS = 2_000_000
"""Rows per slice of the mapping: within the default memory limit with room to spare
(BENCHMARKS.md, "Bounded memory"); a slice costs one more read of the input's keys."""

DEFAULT_FULL_READ_INTERVAL = "7d"
"""A weekly full read of each SQL input with a cursor finds the rows deleted since."""

_SIZE = re.compile(r"^\s*\d+(\.\d+)?\s*(B|KB|KIB|MB|MIB|GB|GIB|TB|TIB)\s*$", re.IGNORECASE)


def _on(flag: str | None = None, dagster: str | None = None, **more: Any) -> dict[str, Any]:
    """The projections of a setting: its CLI flag, its Dagster resource member."""
    return {
        key: value for key, value in {"flag": flag, "dagster": dagster, **more}.items() if value
    }


class ServiceSection(Section):
    """The guest-experience service and how the push talks to it."""

    base_url: str = Field(
        DEFAULT_BASE_URL,
        description="service base URL",
        json_schema_extra=_on("--base-url", "service.base_url", shown="the local sandbox"),
    )
    token: SecretStr | None = Field(
        None,
        description="one token for every account (never printed)",
        json_schema_extra=_on(dagster="service.token"),
    )
    tokens_file: Path | None = Field(
        None,
        description="per-account tokens file (YAML/JSON ``{accountId: token}``)",
        json_schema_extra=_on(dagster="service.tokens_file"),
    )
    token_placement: str | None = Field(
        None,
        description="token placement (comma list of x-wishbox-auth-token, bearer, apiToken)",
        json_schema_extra=_on(shown="x-wishbox-auth-token,bearer"),
    )
    transport: str = Field("aiohttp", description="HTTP transport (aiohttp, httpx)")
    event_loop: str | None = Field(
        None,
        description="event loop of the push (uvloop, asyncio)",
        json_schema_extra=_on(shown="uvloop where installed (not on Windows), else asyncio"),
    )
    concurrency: int = Field(
        DEFAULT_CONCURRENCY,
        ge=1,
        description="requests in flight",
        json_schema_extra=_on("--concurrency", "service.concurrency"),
    )
    rate_limit: float | None = Field(
        None,
        gt=0,
        description="requests per second (a plain bucket instead of windows)",
        json_schema_extra=_on("--rate-limit", "service.rate_limit"),
    )
    rate_limits: str | None = Field(
        None,
        description="rate-limit windows per token (``15/s,120/min,5000/h``; ``off``)",
        json_schema_extra=_on(
            "--rate-limits",
            "service.rate_limits",
            shown="the documented 15/s,120/min,5000/h for a remote service, off on loopback",
        ),
    )
    max_attempts: int = Field(
        DEFAULT_MAX_ATTEMPTS,
        ge=1,
        description="attempts per record (retries + 1)",
        json_schema_extra=_on(dagster="service.max_attempts"),
    )
    timeout: float = Field(
        DEFAULT_READ_TIMEOUT_S,
        gt=0,
        description="read timeout per request, seconds",
        json_schema_extra=_on(dagster="service.timeout"),
    )
    insecure_tls_for: CommaList = Field(
        (),
        description="base URLs whose TLS certificate is not verified (comma list)",
    )
    verify_tls: Flag | None = Field(
        None,
        description="refused when off: name the hosts in PMS_SYNC_INSECURE_TLS_FOR instead",
    )
    acknowledgement: str = Field(
        "counts", description="which 2xx bodies acknowledge a record (counts, documented)"
    )

    @field_validator("token_placement")
    @classmethod
    def _placement(cls, value: str | None) -> str | None:
        from connector.client import TokenPlacement

        if value is not None:
            _choice(value.split(","), TokenPlacement, "token placements", many=True)
        return value

    @field_validator("transport")
    @classmethod
    def _transport(cls, value: str) -> str:
        from connector.client import Transport

        return _choice([value], Transport, "transports")

    @field_validator("event_loop")
    @classmethod
    def _event_loop(cls, value: str | None) -> str | None:
        from connector.client import EventLoop, default_event_loop

        if value is None:
            return None
        chosen = value.strip().lower()
        if chosen not in {loop.value for loop in EventLoop}:
            choices = ", ".join(loop.value for loop in EventLoop)
            raise ValueError(f"must be one of {choices}, got {chosen!r}")
        if chosen == EventLoop.UVLOOP and default_event_loop() != EventLoop.UVLOOP:
            raise ValueError(
                "is uvloop, but uvloop is not installed (it is not available on Windows): "
                "install it or choose asyncio"
            )
        return chosen

    @field_validator("rate_limits")
    @classmethod
    def _windows(cls, value: str | None) -> str | None:
        from connector.client import parse_windows

        if value is not None:
            parse_windows(value)
        return value

    @field_validator("insecure_tls_for")
    @classmethod
    def _insecure_hosts(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for url in value:
            if not url.lower().startswith("https://"):
                raise ValueError(
                    f"names base URLs such as https://pms.internal:8443, got {redact_url(url)!r}"
                )
        return value

    @field_validator("verify_tls")
    @classmethod
    def _no_blanket_switch(cls, value: bool | None) -> bool | None:
        if value is False:
            raise ValueError(
                "is not supported: TLS verification cannot be turned off for every host; name "
                "the one base URL instead, e.g. "
                "PMS_SYNC_INSECURE_TLS_FOR=https://pms.internal:8443"
            )
        return value

    @field_validator("acknowledgement")
    @classmethod
    def _acknowledgement(cls, value: str) -> str:
        from connector.client import AcknowledgementPolicy

        return _choice([value], AcknowledgementPolicy, "policies")


class OpenApiSection(Section):
    """The Open API client (OAuth2 client credentials): accounts, their tokens, properties."""

    client_id: str | None = Field(
        None,
        description="Open API client id (account discovery, tokens, properties)",
        json_schema_extra=_on("--client-id", "open_api.client_id", credential=True),
    )
    client_secret: SecretStr | None = Field(
        None,
        description="Open API client secret (never printed)",
        json_schema_extra=_on("--client-secret", "open_api.client_secret"),
    )
    base_url: str | None = Field(
        None,
        validation_alias="PMS_SYNC_OPENAPI_URL",
        description="Open API base URL",
        json_schema_extra=_on("--openapi-url", "open_api.base_url", shown="the service base URL"),
    )
    token_cache: Path | None = Field(
        None,
        description="OAuth2 token cache (0600 JSON, shared by processes)",
        json_schema_extra=_on(shown="openapi-tokens.json next to the snapshot"),
    )
    renew_margin: float = Field(
        60.0,
        description="renew Open API and account tokens this many seconds before expiry (at "
        "most a quarter of their lifetime)",
    )
    offboard_properties: Flag = Field(
        True,
        description="deactivate the property of an account gone from a full export (on, off)",
        json_schema_extra=_on(dagster="open_api.offboard_properties"),
    )
    update_sub_units: Flag = Field(
        True,
        description="updateSubUnits of property status changes (true, false)",
        json_schema_extra=_on("--update-sub-units", "open_api.update_sub_units"),
    )


class RunSection(Section):
    """A sync run: its snapshot, deadline, order, rolling refresh and memory."""

    snapshot: str = Field(
        DEFAULT_SNAPSHOT,
        description="snapshot: a DuckDB file or a postgresql:// URL",
        json_schema_extra=_on("--snapshot", "snapshot.path"),
    )
    max_duration: float | None = Field(
        DEFAULT_MAX_DURATION_S,
        description="the run's deadline, seconds (``0``, ``none``, ``off``: none)",
        json_schema_extra=_on("--max-duration", "service.max_duration", shown="21600 (6 h)"),
    )
    urgent_days: int = Field(
        DEFAULT_HORIZON_DAYS,
        ge=0,
        description="days ahead an arrival is urgent",
        json_schema_extra=_on(dagster="service.urgent_days"),
    )
    urgent_cancellations: Flag = Field(
        True, description="cancellations of stays not yet ended are sent first"
    )
    refresh: str | None = Field(
        None,
        description="rolling refresh: share of acknowledged records re-sent per run (``7d``, "
        "``15%``, ``0.15``, ``off``)",
        json_schema_extra=_on(
            "--refresh",
            "service.refresh",
            shown="7d for a remote service, off for a loopback one (docs/drift.md)",
        ),
    )
    refresh_max: int | Literal["none"] | None = Field(
        None,
        description="refresh requests per run at most (``none``: no cap)",
        json_schema_extra=_on(
            "--refresh-max",
            "service.refresh_max",
            shown="the hourly rate-limit window's limit (5,000 documented); none without windows",
        ),
    )
    refresh_past: Flag = Field(False, description="refresh past stays too")
    memory_limit: str = Field(
        DEFAULT_MEMORY_LIMIT,
        description="memory every DuckDB connection of a run may hold (``1GB``, ``800MB``)",
    )
    slice_rows: int = Field(
        DEFAULT_SLICE_ROWS,
        ge=1,
        description="rows of an entity the mapping engine maps at once: a larger export is "
        "mapped in slices of records (hash partitions of the record key)",
    )
    full_read_interval: str = Field(
        DEFAULT_FULL_READ_INTERVAL,
        description="an SQL input with a cursor is read in full (finding deletions) when its "
        "last full read is this old (``7d``, ``12h``, ``90m``, seconds); ``0``, ``none``, "
        "``off``: always in full",
        json_schema_extra=_on("--full-read-interval", "sources.full_read_interval"),
    )
    full_read: Flag = Field(
        False,
        description="read every SQL input in full in this run, cursors or not",
        json_schema_extra=_on("--full-read", "sources.full_read"),
    )
    max_quarantine_share: float = Field(
        0.01,
        ge=0,
        le=1,
        description="largest share of quarantined rows that still lets a push run",
        json_schema_extra=_on(dagster="sync_checks.max_quarantine_share"),
    )

    @field_validator("max_duration", mode="before")
    @classmethod
    def _deadline(cls, value: object) -> float | None:
        from connector.client import parse_max_duration

        if value is None or isinstance(value, str | int | float):
            return parse_max_duration(value)
        raise ValueError(f"expected seconds, 0, none or off, got {value!r}")

    @field_validator("refresh")
    @classmethod
    def _share(cls, value: str | None) -> str | None:
        from connector.plan import parse_share

        if value is not None:
            parse_share(value, label(cls, "refresh"))
        return value

    @field_validator("refresh_max", mode="before")
    @classmethod
    def _cap(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() in ("none", "off"):
            return "none"
        return value

    @field_validator("refresh_max")
    @classmethod
    def _cap_not_negative(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, int) and value < 0:
            raise ValueError(f"must be 0 or more (or none), got {value}")
        return value

    @field_validator("full_read_interval", mode="before")
    @classmethod
    def _interval(cls, value: object) -> str:
        from connector.cursors import parse_interval

        text = str(value).strip()
        parse_interval(text)
        return text

    @field_validator("memory_limit")
    @classmethod
    def _size(cls, value: str) -> str:
        if not _SIZE.match(value):
            raise ValueError(f"must be a size such as 1GB or 800MB, got {value!r}")
        return value


class InputSection(Section):
    """Reading and validating the exports."""

    BLANK_IS_A_VALUE: ClassVar[frozenset[str]] = frozenset({"cache_dir"})

    mappings_dir: Path | None = Field(
        None,
        description="folder of the mapping files the Dagster definitions load",
        json_schema_extra=_on(shown="mappings/"),
    )
    fast_path: Flag = Field(
        True,
        description="validate with the bulk twin first (off: every record through the contract "
        "model, the slower reference path)",
    )
    sql_checks: Flag = Field(True, description="the contract's checks compiled to SQL")
    verify_fast_path: Flag = Field(
        False,
        description="compare every fast record with the contract model, raise on a difference",
    )
    cache_dir: str | None = Field(
        None,
        description="where the reference tables built from pycountry are kept between runs "
        "(empty: no cache)",
        json_schema_extra=_on(shown="$XDG_CACHE_HOME/pms-sync (~/.cache/pms-sync)"),
    )
    csv_max_line_mb: int = Field(2, ge=1, description="longest CSV row an input may hold, MiB")
    xlsx_max_uncompressed_mb: int = Field(
        1024, ge=1, description="everything an .xlsx archive may expand to, MiB"
    )
    xlsx_max_compression_ratio: int = Field(
        100, ge=1, description="uncompressed to compressed size of an .xlsx archive's member"
    )
    export_settle_seconds: float | None = Field(
        None,
        ge=0,
        description="seconds an export must stay unchanged before it is read",
        json_schema_extra=_on(shown="the mapping's safety.export_settle_seconds"),
    )


class ReceiverSection(Section):
    """The receiver of the service's outgoing events (``pms-sync receive``)."""

    model_config = SettingsConfigDict(env_prefix=f"{PREFIX}RECEIVER_")

    host: str = Field(
        "127.0.0.1", description="address to listen on", json_schema_extra=_on("--host")
    )
    port: int = Field(
        8766, ge=0, le=65535, description="port (0: any free port)", json_schema_extra=_on("--port")
    )
    secret: SecretStr | None = Field(
        None,
        description="secret expected in the header (never printed)",
        json_schema_extra=_on(shown="none (loopback only)"),
    )
    header: str = Field(
        "X-Receiver-Secret",
        description="header carrying the secret",
        json_schema_extra=_on("--secret-header"),
    )
    delivery_id_header: str | None = Field(
        None,
        description=(
            "header in which the service names an event's emission, the same on each "
            "redelivery: events with other ids are repeats, each stored; without it, one body "
            "is one event"
        ),
        json_schema_extra=_on("--delivery-id-header", shown="none (the body alone)"),
    )
    max_body: int = Field(
        64 * 1024,  # an event is a few hundred bytes; this bounds what a stranger can send
        ge=1024,
        description="largest body accepted, bytes",
        json_schema_extra=_on("--max-body"),
    )
    allowed_hosts: CommaList = Field(
        (),
        description="Host names answered besides its own address and loopback (comma list)",
        json_schema_extra=_on("--allowed-host"),
    )
    events: Path | None = Field(
        None,
        validation_alias="PMS_SYNC_EVENTS",
        description="events store (DuckDB)",
        json_schema_extra=_on("--events", shown="events.duckdb next to the snapshot"),
    )


class SandboxSection(Section):
    """The local sandbox (``pms-sync sandbox``)."""

    model_config = SettingsConfigDict(env_prefix=f"{PREFIX}SANDBOX_")

    admin_token: SecretStr | None = Field(
        None,
        description="the sandbox's admin token (required off loopback)",
        json_schema_extra=_on("--admin-token"),
    )


class CliSection(Section):
    """The command line itself."""

    debug: Flag = Field(
        False, description="the (masked) traceback of an unexpected error, on stderr"
    )


SECTIONS: dict[str, type[Section]] = {
    "service": ServiceSection,
    "openapi": OpenApiSection,
    "run": RunSection,
    "inputs": InputSection,
    "receiver": ReceiverSection,
    "sandbox": SandboxSection,
    "cli": CliSection,
}


def environment_without_dagster_member(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The ``PMS_SYNC_*`` variables of ``env`` (None: the process's) whose setting no Dagster
    resource member projects: a Dagster step reads these as the CLI does, the rest from its
    resources."""
    names = {
        section.variable(field)
        for section in SECTIONS.values()
        for field in section.model_fields
        if section.dagster(field) is None
    }
    source = os.environ if env is None else env
    return {name: value for name, value in source.items() if name in names}


class Settings(BaseModel):
    """Every setting, by section."""

    model_config = ConfigDict(frozen=True)

    service: ServiceSection
    openapi: OpenApiSection
    run: RunSection
    inputs: InputSection
    receiver: ReceiverSection
    sandbox: SandboxSection
    cli: CliSection

    @classmethod
    def read(cls, env: Any = None) -> Settings:
        """Every section from ``env`` (None: the process's environment) and the defaults."""
        return cls.model_validate({name: section.read(env) for name, section in SECTIONS.items()})


def _choice(values: list[str], kind: Any, what: str, *, many: bool = False) -> str:
    choices = [member.value for member in kind]
    lowered = {choice.lower(): choice for choice in choices}
    picked = []
    for value in values:
        text = value.strip()
        if not text and many:
            continue
        if text.lower() not in lowered:
            raise ValueError(f"must be one of {', '.join(choices)}, got {text!r}")
        picked.append(lowered[text.lower()])
    return ",".join(picked)

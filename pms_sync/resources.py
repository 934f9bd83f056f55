"""Resources: where the service is and how to talk to it, where the snapshot lives, check limits.

The embedded defaults point at the local sandbox (``http://127.0.0.1:8765``, token
``demo-token``, Open API client ``demo-client``) and a DuckDB snapshot under the state folder ``.pms-sync/`` of the project
that loads them (the current directory unless the caller names one, as the CLI does). A
deployment overrides them with environment variables (read through ``dg.EnvVar`` so their
values never show in the UI) or by replacing the resources in ``assets/definitions.py``.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from connector.accounts import TOKEN_CACHE_FILE, OpenApiSettings, PropertyPolicy
from connector.client import AccountTokens
from connector.config import (
    DEFAULT_BASE_URL,
    OpenApiSection,
    RunSection,
    Section,
    ServiceSection,
    environment_without_dagster_member,
)
from connector.cursors import parse_interval
from connector.errors import ConfigError
from connector.pipeline import ReadOptions
from connector.plan import Budget, UrgencyPolicy
from connector.push import PushOptions
from connector.safety.anomalies import AnomalyBands
from connector.secrets import checked_secret
from connector.settings import (
    SyncSettings,
    load_settings,
    load_tokens_file,
    open_api_settings,
)
from connector.snapshot import (
    LockScope,
    Snapshot,
    SnapshotStore,
    is_database_url,
    snapshot_location,
    state_dir,
)
from pms_sync.storage import MappedRecordsIOManager

STATE_DIR_NAME = ".pms-sync"
"""The state folder (snapshot, sandbox data, step outputs), relative to the project root."""
IO_MANAGER_KEY = "pms_sync_io_manager"
"""The mapped records' IO manager: its own key, so a host project's ``io_manager`` stays its own."""
SANDBOX_TOKEN = "demo-token"  # the local sandbox's published demo token, not a secret
SANDBOX_CLIENT = ("demo-client", "demo-secret")  # the local sandbox's published demo client


class OpenApiResource(dg.ConfigurableResource):
    """The Open API client of the connections (OAuth2 client credentials): accounts found by
    external id, their tokens kept valid, property status. Give the secret as an EnvVar."""

    client_id: str | None = Field(
        default=OpenApiSection.default("client_id"), description="Open API client id."
    )
    client_secret: str | None = Field(
        default=None, description="Open API client secret (use an EnvVar: never shown)."
    )
    base_url: str | None = Field(
        default=OpenApiSection.default("base_url"),
        description="Open API base URL; empty: the service's base URL.",
    )
    offboard_properties: bool = Field(
        default=OpenApiSection.default("offboard_properties"),
        description="Deactivate the property of an account gone from a full export (PUT "
        "/properties/{id}, guarded) and reactivate it when it comes back.",
    )
    update_sub_units: bool = Field(
        default=OpenApiSection.default("update_sub_units"),
        description="updateSubUnits of property status changes.",
    )

    def settings(self, service_base_url: str, snapshot_path: str) -> OpenApiSettings | None:
        """The library's Open API settings; the token cache sits next to the snapshot."""
        return open_api_settings(
            client_id=self.client_id,
            client_secret=self.client_secret,
            base_url=self.base_url or service_base_url,
            token_cache=state_dir(snapshot_location(snapshot_path)) / TOKEN_CACHE_FILE,
            names=("the open_api resource's client_id", "the open_api resource's client_secret"),
        )

    def properties(self) -> PropertyPolicy:
        return PropertyPolicy(
            offboard=self.offboard_properties, update_sub_units=self.update_sub_units
        )


class ServiceResource(dg.ConfigurableResource):
    """The guest-experience service: base URL, credentials per account, pace and patience."""

    base_url: str = Field(
        default=ServiceSection.default("base_url"), description="Service base URL."
    )
    token: str | None = Field(
        default=None,
        description="Sync-webhook token for every account without its own (use an EnvVar).",
    )
    account_token_env: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Per-account tokens: account id -> name of the environment variable holding its "
            "token. Only variable names appear in the UI."
        ),
    )
    tokens_file: str | None = Field(
        default=None, description="YAML/JSON file of {accountId: token}, read at run time."
    )
    concurrency: int = Field(
        default=ServiceSection.default("concurrency"), description="Requests in flight at once."
    )
    rate_limit: float | None = Field(
        default=ServiceSection.default("rate_limit"),
        description="Requests per second over all accounts; empty: unlimited.",
    )
    rate_limits: str | None = Field(
        default=ServiceSection.default("rate_limits"),
        description=(
            "Windows per token, e.g. '15/s,120/min,5000/h', or 'off'. Empty: the documented "
            "limits for a remote service, none for the local sandbox (docs/rate-limits.md)."
        ),
    )
    max_requests: int | None = Field(
        default=None,
        description="Budget: changes sent per sync step, most urgent first; the rest wait.",
    )
    max_duration: float | None = Field(
        default=RunSection.default("max_duration"),
        description="The deadline of a sync step, seconds (default 6 h): the push then stops, "
        "the answered changes committed, the rest pending for the next run; a 429 whose "
        "Retry-After reaches past it postpones the account. 0 or empty: no deadline.",
    )
    max_duration_s: float | None = Field(
        default=None, description="Deprecated name of max_duration (still read)."
    )
    urgent_days: int = Field(
        default=RunSection.default("urgent_days"),
        description="Arrivals within this many days are sent first (urgency class upcoming).",
    )
    max_attempts: int = Field(
        default=ServiceSection.default("max_attempts"),
        description="Attempts per record for transient faults (first one included).",
    )
    timeout: float = Field(
        default=ServiceSection.default("timeout"), description="Read timeout per request, seconds."
    )
    open_api: OpenApiResource | None = Field(
        default=None,
        description="The Open API client (also the top-level resource `open_api`); none: every "
        "account's token is given (token, tokens_file, account_token_env).",
    )
    refresh: str | None = Field(
        default=RunSection.default("refresh"),
        description=(
            "Rolling refresh: share of the acknowledged, unchanged records re-sent per sync "
            "step after the real changes, e.g. '7d' (every record within 7 runs), '15%', "
            "'off'. Empty: 7d for a remote service, off for the local sandbox (docs/drift.md)."
        ),
    )
    refresh_max: int | None = Field(
        default=None,
        description=(
            "Refresh requests per sync step at most. Empty: the hourly rate-limit window's "
            "limit (5,000 under the documented limits), none without windows."
        ),
    )
    refresh_max_requests: int | None = Field(
        default=None, description="Deprecated name of refresh_max (still read)."
    )
    reconcile_max_duration_s: float | None = Field(
        default=None,
        description=(
            "Budget of a reconciliation run (the <connection>_reconcile schedule): seconds "
            "after which a sync step starts no re-send; the next reconciliation resumes. "
            "Empty: the max_duration of every run."
        ),
    )
    retry_window_s: float = Field(
        default=300.0,
        description=(
            "A sync step whose changes stay pending is retried (30, 90, 210 s after it, each "
            "± 30 s) only while the retry would start within this many seconds of the step's "
            "first attempt; then it fails and the next run sends them."
        ),
    )

    def tokens(self) -> AccountTokens:
        per_account = load_tokens_file(Path(self.tokens_file)) if self.tokens_file else {}
        for account, variable in self.account_token_env.items():
            value = checked_secret(os.environ.get(variable), variable, account=account)
            if not value:
                raise ConfigError(
                    f"the token of account {account!r} is read from the environment variable "
                    f"{variable}, which is not set"
                )
            per_account[account] = value
        default = checked_secret(self.token, "the service resource's token") or None
        return AccountTokens(per_account=per_account, default=default)

    def settings(self, snapshot: SnapshotResource, *, reconcile: bool = False) -> SyncSettings:
        """The library's settings for one sync: this resource's members, and the settings no
        member projects (transport, TLS, …) from the step's environment as in the CLI;
        ``reconcile``: a reconciliation run's budget."""
        base = load_settings(
            base_url=self.base_url,
            snapshot=snapshot.path,
            concurrency=self.concurrency,
            rate_limit=self.rate_limit,
            rate_limits=self.rate_limits,
            max_attempts=self.max_attempts,
            refresh=self.refresh,
            refresh_max=_renamed(self.refresh_max, self.refresh_max_requests, "refresh_max"),
            env=environment_without_dagster_member(),
        )
        duration = _renamed(self.max_duration, self.max_duration_s, "max_duration")
        if reconcile and self.reconcile_max_duration_s is not None:
            duration = self.reconcile_max_duration_s
        budget = Budget(max_requests=self.max_requests, max_duration_s=duration or None)
        return replace(
            base,
            client=replace(base.client, read_timeout=self.timeout),
            tokens=self.tokens(),
            push=PushOptions(concurrency=self.concurrency, budget=budget),
            lock_timeout=snapshot.lock_timeout,
            urgency=UrgencyPolicy(horizon_days=self.urgent_days),
            open_api=(
                self.open_api.settings(base.client.base_url, snapshot.path)
                if self.open_api is not None
                else None
            ),
            properties=(
                self.open_api.properties() if self.open_api is not None else PropertyPolicy()
            ),
        )


class SnapshotResource(dg.ConfigurableResource):
    """The snapshot of what the service acknowledged: a DuckDB file (one writer at a time) or
    a PostgreSQL database (writers of different connections and accounts at once)."""

    path: str = Field(
        default=RunSection.default("snapshot"),
        description=(
            "Snapshot: a DuckDB file, or a PostgreSQL URL postgresql://user@host:5432/db "
            "(password from PGPASSWORD or ~/.pgpass; see docs/deploy.md)."
        ),
    )
    lock_timeout: float = Field(
        default=300.0,
        description=(
            "Seconds to wait for another process's write lock (the file's, or on PostgreSQL "
            "the scope's) before failing; the Dagster pool serialises writers first, this "
            "covers writers outside Dagster (the CLI)."
        ),
    )

    @contextmanager
    def open(self, scope: LockScope | None = None) -> Iterator[SnapshotStore]:
        """The snapshot for writing; ``scope``: what is written (None: the whole snapshot)."""
        with Snapshot.open(self.path, lock_timeout=self.lock_timeout, scope=scope) as store:
            yield store

    @contextmanager
    def read(self) -> Iterator[SnapshotStore]:
        """The snapshot for reading only: on PostgreSQL without any lock, so it does not wait
        for the runs writing; a DuckDB file is opened as for writing (its steps share a pool)."""
        read_only = is_database_url(self.path)
        with Snapshot.open(self.path, lock_timeout=self.lock_timeout, read_only=read_only) as store:
            yield store


class SyncChecksResource(dg.ConfigurableResource):
    """Thresholds of the asset checks that guard a push."""

    max_quarantine_share: float = Field(
        default=RunSection.default("max_quarantine_share"),
        description="Largest share of quarantined rows (0.01 = 1 %) that still lets a push run.",
    )
    allow_mass_change: bool = Field(
        default=False,
        description=(
            "Approve the changes the mass-change guard holds back (an account's many "
            "deactivations or cancellations, or far fewer export rows than last time); volume "
            "only, never a unit or property guests still stay in. Set it in the run config "
            "of the one run you approve: resources.sync_checks.config.allow_mass_change: true."
        ),
    )
    allow_deactivation_with_stays: bool = Field(
        default=False,
        description=(
            "Deactivate units and properties gone from the export although guests still stay "
            "in them (held otherwise, spec §3, and the step fails). The only approval that "
            "releases them: resources.sync_checks.config.allow_deactivation_with_stays: true."
        ),
    )
    anomaly_history_runs: int = Field(
        default=7, description="Successful runs the count_anomalies check compares with."
    )
    anomaly_extracted_drop: float = Field(
        default=0.3, description="Warn when extracted rows fall more than this below the median."
    )
    anomaly_extracted_rise: float = Field(
        default=1.0, description="Warn when extracted rows rise more than this above the median."
    )
    anomaly_changed_rise: float = Field(
        default=4.0,
        description="Warn when changed or acknowledged records exceed (1 + this) x the median…",
    )
    anomaly_min_changed: int = Field(
        default=20, description="…and exceed this count (quiet nights are not anomalies)."
    )

    def anomaly_bands(self) -> AnomalyBands:
        return AnomalyBands(
            history_runs=self.anomaly_history_runs,
            extracted_drop=self.anomaly_extracted_drop,
            extracted_rise=self.anomaly_extracted_rise,
            changed_rise=self.anomaly_changed_rise,
            min_changed=self.anomaly_min_changed,
        )


def default_resources(state_dir: Path | None = None) -> dict[str, object]:
    """The embedded defaults, overridden by the ``PMS_SYNC_*`` variables of the members that
    project a setting (connector.config: each setting's ``dagster`` member).

    ``state_dir`` holds the snapshot and the step outputs (default ``./.pms-sync``).
    """
    state_dir = state_dir if state_dir is not None else Path(STATE_DIR_NAME).resolve()
    service = _service_members()
    return {
        "open_api": service["open_api"],
        "service": ServiceResource(**service),
        "snapshot": SnapshotResource(**_snapshot_members(state_dir)),
        "sources": SourcesResource(**_projected("sources", RunSection.read())),
        "sync_checks": SyncChecksResource(**_projected("sync_checks", RunSection.read())),
        IO_MANAGER_KEY: MappedRecordsIOManager(base_dir=str(state_dir / "dagster-io")),
    }


CREDENTIALS = ("token", "tokens_file", "account_token_env", "open_api")
"""The service's members that belong to one service: never handed to another base URL."""


def own_service(declared: ServiceResource) -> ServiceResource:
    """A component's own service (its ``defs.yaml``'s ``service:``): the members it sets over
    the project's (the embedded defaults, the ``PMS_SYNC_*`` variables). The project's
    credentials come along only while the base URL is the project's; another service gets the
    credentials it is given (the local sandbox its published demo ones)."""
    members = _service_members()
    own = {name: getattr(declared, name) for name in declared.model_fields_set}
    base_url = own.get("base_url", members["base_url"])
    if base_url != members["base_url"]:
        members = {k: v for k, v in members.items() if k not in CREDENTIALS}
        members.update(_sandbox_credentials(base_url))
    return ServiceResource(**{**members, **own})


def own_snapshot(declared: SnapshotResource, state_dir: Path, root: Path) -> SnapshotResource:
    """A component's own snapshot (its ``defs.yaml``'s ``snapshot:``): the members it sets over
    the project's, as ``own_service``; a DuckDB file's path relative to ``root``."""
    own = {name: getattr(declared, name) for name in declared.model_fields_set}
    if "path" in own and not is_database_url(own["path"]):
        own["path"] = str((root / Path(own["path"]).expanduser()).resolve())
    return SnapshotResource(**{**_snapshot_members(state_dir), **own})


def _service_members() -> dict[str, Any]:
    """The shared service's members: the ``PMS_SYNC_*`` variables over the embedded defaults."""
    service = ServiceSection.read()
    members = _projected("service", service, RunSection.read())
    members.setdefault("base_url", service.base_url)
    members.setdefault("open_api", default_open_api(service.base_url))
    for name, value in _sandbox_credentials(service.base_url).items():
        members.setdefault(name, value)
    return members


def _sandbox_credentials(base_url: str) -> dict[str, Any]:
    """The local sandbox's published token and Open API client, which no other service gets."""
    # With an Open API client configured, the accounts' tokens are discovered, and a fixed
    # token would win over them: the demo token serves the local sandbox only.
    if base_url != DEFAULT_BASE_URL:
        return {}
    client_id, client_secret = SANDBOX_CLIENT
    return {
        "token": SANDBOX_TOKEN,
        "open_api": OpenApiResource(client_id=client_id, client_secret=client_secret),
    }


def _snapshot_members(state_dir: Path) -> dict[str, Any]:
    members = _projected("snapshot", RunSection.read())
    members.setdefault("path", str(state_dir / "snapshot.duckdb"))
    return members


def default_open_api(base_url: str) -> OpenApiResource:
    """The Open API client from PMS_SYNC_CLIENT_ID / PMS_SYNC_CLIENT_SECRET (EnvVars, never
    shown), else the local sandbox's published demo client, else none configured."""
    section = OpenApiSection.read()
    members = _projected("open_api", section)
    if section.client_id is None and base_url == DEFAULT_BASE_URL:
        members["client_id"], members["client_secret"] = SANDBOX_CLIENT
    return OpenApiResource(**members)


def _renamed(value: Any, deprecated: Any, name: str) -> Any:
    """A member's value when a run config or definition may still use its former name."""
    if deprecated is None:
        return value
    former = f"{name}_s" if name == "max_duration" else f"{name}_requests"
    warnings.warn(
        f"service.{former} is deprecated: use service.{name}", DeprecationWarning, stacklevel=3
    )
    default = ServiceResource.model_fields[name].default
    if value not in (default, deprecated):
        raise ConfigError(f"service.{name} and its former name {former} disagree; set one")
    return deprecated


def _projected(resource: str, *sections: Section) -> dict[str, Any]:
    """The members of ``resource`` whose setting is set in the environment, by name.

    Credentials are passed as EnvVars, so the UI shows their names only; the embedded
    defaults stay when a variable is unset, so a fresh checkout works with no environment.
    """
    members: dict[str, Any] = {}
    for section in sections:
        for field in section.model_fields_set:
            target = type(section).dagster(field)
            if target is None or not target.startswith(f"{resource}."):
                continue
            value = getattr(section, field)
            if type(section).is_secret(field) or type(section).is_credential(field):
                value = dg.EnvVar(type(section).variable(field))
            elif value == "none":
                continue  # no Dagster member says "no cap": the resource's default applies
            elif isinstance(value, Path):
                value = str(value)
            members[target.partition(".")[2]] = value
    return members


class SourcesResource(dg.ConfigurableResource):
    """Connection settings of the PMS sources, for mapping files that reference ``${VARIABLE}``.

    A mapping file writes credentials as ``${PMS_SQL_URL}``; by default they come from the
    process environment. Values set here (typically through ``dg.EnvVar``) take precedence
    while a mapping step reads its inputs.
    """

    variables: dict[str, str] = Field(
        default_factory=dict,
        description="Variables the mapping files reference as ${NAME}, name -> value.",
    )
    full_read_interval: str = Field(
        default=RunSection.default("full_read_interval"),
        description="An SQL input with a cursor is read in full (finding deletions) when its "
        "last full read is this old: '7d', '12h', '90m', seconds; '0' or 'off': always in "
        "full. Otherwise a run reads the rows changed since the last acknowledged run.",
    )
    full_read: bool = Field(
        default=RunSection.default("full_read"),
        description="Read every SQL input with a cursor in full (one run: the mapped assets' "
        "run config `full_read`).",
    )

    def read_options(self, full_read: bool = False) -> ReadOptions:
        """How a mapping step reads its SQL inputs with a cursor; ``full_read``: the run's."""
        interval = RunSection.read({}, {"full_read_interval": self.full_read_interval})
        return ReadOptions(
            full_read=self.full_read or full_read,
            interval_s=parse_interval(interval.full_read_interval),
        )

    @contextmanager
    def environment(self) -> Iterator[None]:
        # The mapping engine resolves ${NAME} from os.environ; set the values for the duration
        # of the step only (each step of a multiprocess run is its own process).
        previous = {name: os.environ.get(name) for name in self.variables}
        os.environ.update(self.variables)
        try:
            yield
        finally:
            for name, value in previous.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

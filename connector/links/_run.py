"""One links run of a mapping: which reservations need links, fetching them within the budget
and the Open API's limits, keeping them in the snapshot, and writing them back.

The snapshot is opened twice, briefly: read-only to choose the reservations, then to save what
was fetched. The fetch in between holds no lock, so a long run under tight rate limits never
keeps a sync of another connection waiting.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pandas as pd

from connector.accounts import AccountDirectory, AccountDiscovery, DiscoveredTokens
from connector.client import AccountTokens, WindowLimiter, effective_windows
from connector.errors import AuthenticationError, ConfigError
from connector.links._fetch import FetchResult, LinkRequest, fetch_links
from connector.links._policy import LinksPolicy
from connector.links._report import LinksReport
from connector.mapping.model import Mapping
from connector.plan import Budget, BudgetGate, backlog, missing_reservation
from connector.secrets import mask_text
from connector.settings import SyncSettings
from connector.snapshot import GUEST_LINK_COLUMNS, Snapshot
from connector.writeback import WriteBackError, write_back

NO_OPEN_API_CLIENT = (
    "guest links come from the Open API: set the client's credentials, PMS_SYNC_CLIENT_ID and "
    "PMS_SYNC_CLIENT_SECRET (or --client-id / --client-secret)"
)
DEFAULT_CONCURRENCY = 4
"""Link requests in flight at once; the client's limiter paces them."""

LINK_KEY = ("account_id", "reservation_id")
"""What a links table is upserted by unless the mapping names its own key: reservation ids
are unique per account only, and one connection may hold several accounts."""

LINK_COLUMN_TYPES = {
    "checkin": "date",
    "fetched_at": "timestamp",
    "message_has_attachment": "boolean",
    "message_seen": "boolean",
}


def run_links(
    mapping_path: str | Path,
    settings: SyncSettings,
    *,
    budget: Budget | None = None,
    days_ahead: int | None = None,
    max_age_hours: float | None = None,
    today: date | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
) -> LinksReport:
    """``pms-sync links MAPPING``: the links step of one mapping file."""
    from connector.mapping import load_mapping

    mapping = load_mapping(mapping_path)
    policy = LinksPolicy.from_settings(mapping.links).overridden(
        days_ahead=days_ahead, max_age_hours=max_age_hours
    )
    return links_for_mapping(
        mapping, settings, policy=policy, budget=budget, today=today, concurrency=concurrency
    )


def links_for_mapping(
    mapping: Mapping,
    settings: SyncSettings,
    *,
    policy: LinksPolicy | None = None,
    budget: Budget | None = None,
    today: date | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
) -> LinksReport:
    """Fetch the links the connection's upcoming arrivals lack (or whose links are older than
    the policy allows), arrivals soonest first, keep them, and write them back."""
    started = time.monotonic()
    open_api = settings.open_api
    if open_api is None:
        raise ConfigError(NO_OPEN_API_CLIENT)
    policy = policy or LinksPolicy.from_settings(mapping.links)
    today = today or date.today()
    first, last = policy.window(today)
    connection = mapping.name
    report = LinksReport(connection=connection, first_checkin=first, last_checkin=last)
    client = replace(settings.client, base_url=open_api.base_url)

    with Snapshot.open(
        settings.snapshot_path, lock_timeout=settings.lock_timeout, read_only=True
    ) as snapshot:
        candidates = snapshot.link_candidates(connection, first, last)
        # The accounts the sync discovered, with their tokens, and the client's limiter
        # started from the requests earlier runs made: what the sync's discovery uses.
        discovery = AccountDiscovery(open_api, settings.client, snapshot)
    directory = discovery.directory
    assert directory is not None  # an Open API client is configured
    limiter = directory.limiter
    wanted = _wanted(candidates, policy, today, settings.urgency.horizon_days)
    report.candidates = len(candidates)
    report.reused = len(candidates) - len(wanted)

    result = FetchResult()
    if wanted:
        result = asyncio.run(
            _fetch(directory, wanted, policy, connection, budget, concurrency, report)
        )
    report.fetched = [link.reservation_id for link in result.fetched]
    report.failed, report.pending, report.stopped = result.failed, result.pending, result.stopped
    # Every candidate is acknowledged: a 404 says the service lost or deleted it. As drift,
    # the next sync re-sends it instead of this run failing the same way every night.
    report.drift_recorded = [failure for failure in result.failed if failure.http_status == 404]
    found_at = datetime.now(UTC).replace(tzinfo=None)
    drift = [
        missing_reservation(
            failure.account_id, failure.reservation_id, request_id=failure.request_id, at=found_at
        )
        for failure in report.drift_recorded
    ]

    destinations = mapping.links.destinations if mapping.links is not None else []
    rows: pd.DataFrame | None = None
    if result.fetched or report.requests or destinations:
        with Snapshot.open(settings.snapshot_path, lock_timeout=settings.lock_timeout) as store:
            store.save_guest_links(result.fetched)
            store.record_drift(drift)
            discovery.save(store)  # renewed account tokens, the client's request history
            if destinations:
                rows = _export(store.guest_links(connection, first, last), policy)
    for destination in destinations if rows is not None else []:
        # Outside the snapshot's lock; one destination failing does not keep the others.
        try:
            report.writes.append(
                write_back(
                    rows,
                    destination,
                    base_dir=mapping.base_dir,
                    key=LINK_KEY,
                    column_types=LINK_COLUMN_TYPES,
                )
            )
        except WriteBackError as error:
            report.write_errors.append(str(error))
    windows = (
        tuple(limiter.windows.values())
        if isinstance(limiter, WindowLimiter) and limiter.windows
        else effective_windows(client)
    )
    report.backlog = backlog(report.pending_by_urgency, windows)
    report.duration_s = time.monotonic() - started
    return report


async def _fetch(
    directory: AccountDirectory,
    wanted: list[LinkRequest],
    policy: LinksPolicy,
    connection: str | None,
    budget: Budget | None,
    concurrency: int,
    report: LinksReport,
) -> FetchResult:
    # Only the tokens the client discovered: tokens given for the sync webhooks are not the
    # Open API's.
    tokens = DiscoveredTokens(AccountTokens(), directory.by_account_id(), directory)
    try:
        async with directory.session():
            api = directory.api
            try:
                return await fetch_links(
                    api,
                    wanted,
                    policy=policy,
                    connection=connection,
                    gate=BudgetGate(budget or Budget()),
                    concurrency=concurrency,
                    tokens=tokens,
                )
            finally:
                report.token_renewals = tokens.renewals
    except AuthenticationError as error:
        # The client's secret refused before its remembered account tokens are used.
        return FetchResult(pending=list(wanted), stopped=mask_text(str(error)))
    finally:
        stats = directory.stats  # this run's: the directory is the run's own
        report.requests = stats.requests
        report.token_requests = stats.token_requests
        report.throttled = stats.throttled


def _wanted(
    candidates: pd.DataFrame, policy: LinksPolicy, today: date, urgent_days: int
) -> list[LinkRequest]:
    """The candidates without links or with links older than the maximum age, in order."""
    stale_before = datetime.now(UTC).replace(tzinfo=None) - policy.max_age
    fetched_at = pd.to_datetime(candidates["fetched_at"])
    due = candidates[fetched_at.isna() | (fetched_at < stale_before)]
    urgent_until = today + timedelta(days=urgent_days)
    wanted: list[LinkRequest] = []
    for row in due.itertuples(index=False):
        checkin = None if pd.isna(row.checkin) else pd.Timestamp(row.checkin).date()
        urgency = "upcoming" if checkin is None or checkin <= urgent_until else "future"
        wanted.append(LinkRequest(str(row.account_id), str(row.reservation_id), checkin, urgency))
    return wanted


def _export(links: pd.DataFrame, policy: LinksPolicy) -> pd.DataFrame:
    """The columns written back: the snapshot's, without its bookkeeping (and without the
    message body unless the policy keeps bodies)."""
    dropped = {"connection", "request_id"} | (
        set() if policy.last_message_body else {"message_body"}
    )
    # The PMS's key first: a table or file read by people starts with the reservation.
    columns = ["reservation_id"] + [
        c for c in GUEST_LINK_COLUMNS if c not in dropped and c != "reservation_id"
    ]
    frame = links.loc[:, columns].copy()
    frame["checkin"] = pd.to_datetime(frame["checkin"]).dt.date
    return frame

"""The accounts of one connection as the Open API knows them: ``<name>/accounts``.

What discovery found for the connection's export (the accounts its rows name, resolved by
external id or matched by account id), how many accounts the Open API client's scope holds,
and which of them have no row in the export. The check ``accounts_known`` fails when an
account of the export has no account on the service (its rows are quarantined by the sync).
The asset reads the units export that ``mapped_accommodations`` mapped (or maps the
reservations itself for a connection without units) and calls ``connector.accounts``.
"""

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import dagster as dg

from connector.accounts import AccountDiscovery, external_ids_of
from connector.contract import Account, Entity
from connector.pipeline import load_batches
from connector.records import MappedRecords
from connector.snapshot import DiscoveredAccount, LockScope
from pms_sync.account_partitions import register_accounts, run_accounts
from pms_sync.assets import SNAPSHOT_POOL, connection_keys
from pms_sync.connection_resources import SERVICE, SNAPSHOT, SOURCES, sources_of
from pms_sync.connections import Connection
from pms_sync.handoff import MappedBatch
from pms_sync.metadata import SAMPLE_ROWS, markdown_table, masked_metadata
from pms_sync.resources import ServiceResource, SnapshotResource

CHECK_ACCOUNTS_KNOWN = "accounts_known"


@dataclass(frozen=True)
class AccountsFound:
    """Discovery's view of one export: what the service lists and what the export names."""

    listed: list[Account]  # every account of the client's scope (spec §4.3)
    matched: dict[str, DiscoveredAccount]  # the export's account value → its account
    unknown: dict[str, int]  # export values without an account → rows

    @property
    def without_rows(self) -> list[Account]:
        """Accounts of the client's scope that no row of the export names."""
        named = {account.external_id for account in self.matched.values()}
        return [a for a in self.listed if a.externalId not in named]


def build_accounts_asset(
    connection: Connection, pool: str | None = SNAPSHOT_POOL
) -> dg.AssetsDefinition:
    """``<name>/accounts`` and its check, fed by the mapped units (or the reservations). With
    account partitions, the accounts found become partitions (``pms_sync.account_partitions``)."""
    keys = connection_keys(connection.asset_key())
    key = connection.asset_key("accounts")
    options: dict[str, Any] = dict(
        key=key,
        group_name=connection.name,
        kinds={"duckdb"},
        pool=pool,
        # Unpartitioned, like the units it reads: it joins a range of months' single run, so
        # `dagster asset materialize --select group:<name> --partition-range …` is one run.
        backfill_policy=dg.BackfillPolicy.single_run(),
        check_specs=[
            dg.AssetCheckSpec(
                CHECK_ACCOUNTS_KNOWN,
                asset=key,
                description=(
                    "Every account the export names has an account on the service (its "
                    "external id or id is in the Open API client's scope); the rows of any "
                    "other are quarantined by the sync."
                ),
            )
        ],
        description=(
            f"Accounts of {connection.mapping.name} on the guest-experience service, as the Open "
            "API client discovers them: the accounts its export names, those with no account "
            "on the service, and the client's accounts that have no row in the export."
        ),
    )
    if Entity.ACCOMMODATION in connection.mapping.entities:

        @dg.asset(
            ins={"mapped": dg.AssetIn(keys.mapped_accommodations)},
            required_resource_keys=connection.resources.keys(SERVICE, SNAPSHOT),
            **options,
        )
        def accounts_of_units(
            context: dg.AssetExecutionContext, mapped: MappedBatch
        ) -> Iterator[dg.MaterializeResult]:
            service = connection.resources.service_of(context)
            snapshot = connection.resources.snapshot_of(context)
            yield from _materialize(context, connection, mapped.records, service, snapshot)

        return accounts_of_units

    @dg.asset(
        required_resource_keys=connection.resources.keys(SERVICE, SNAPSHOT, SOURCES), **options
    )
    def accounts_of_reservations(
        context: dg.AssetExecutionContext,
    ) -> Iterator[dg.MaterializeResult]:
        service = connection.resources.service_of(context)
        snapshot = connection.resources.snapshot_of(context)
        # No units export: the reservations are read whole (no window) for their accounts.
        with sources_of(context).environment():
            batches, _ = load_batches(connection.path, entities=[Entity.RESERVATION])
        yield from _materialize(context, connection, batches[Entity.RESERVATION], service, snapshot)

    return accounts_of_reservations


def _materialize(
    context: dg.AssetExecutionContext,
    connection: Connection,
    records: MappedRecords,
    service: ServiceResource,
    snapshot: SnapshotResource,
) -> Iterator[dg.MaterializeResult]:
    settings = service.settings(snapshot)
    if settings.open_api is None:
        # Nothing to look up: every account the export names is taken as it is.
        added = _add_partitions(context, connection, external_ids_of(records))
        yield dg.MaterializeResult(
            metadata={"open_api_client": dg.MetadataValue.text("not configured"), **added},
            check_results=[
                dg.AssetCheckResult(
                    check_name=CHECK_ACCOUNTS_KNOWN,
                    passed=True,
                    description="no Open API client configured: accounts and tokens are "
                    "given by hand, there is nothing to compare with",
                )
            ],
        )
        return
    # A run of some accounts writes within them, beside the runs of the other accounts.
    accounts = run_accounts(connection, context.run.tags, context.instance)
    scope = None if accounts is None else LockScope(connection.mapping.name, accounts)
    with snapshot.open(scope) as store:
        discovery = AccountDiscovery(settings.open_api, settings.client, store)
        found = _discover(discovery, records)
        discovery.save(store)
    stats = discovery.report.stats
    named = external_ids_of(records)
    # Only accounts the service has: an unknown one's rows are quarantined by every run.
    added = _add_partitions(context, connection, set(found.matched))
    without = found.without_rows
    metadata = {
        "open_api_client": dg.MetadataValue.text(settings.open_api.client_id),
        "accounts_on_service": dg.MetadataValue.int(len(found.listed)),
        "accounts_in_export": dg.MetadataValue.int(len(named)),
        "accounts_found": dg.MetadataValue.int(len(found.matched)),
        "accounts_unknown": dg.MetadataValue.int(len(found.unknown)),
        "accounts_without_rows": dg.MetadataValue.int(len(without)),
        "open_api_requests": dg.MetadataValue.int(stats.requests),
        "lookups": dg.MetadataValue.int(stats.lookups),
        "from_snapshot": dg.MetadataValue.int(stats.cache_hits),
        "accounts": dg.MetadataValue.md(
            markdown_table(
                ("in the export", "account id", "rows"),
                # The unknown first: each stands for a hotel whose rows are not synced.
                [
                    *(
                        (value, "none on the service", rows)
                        for value, rows in found.unknown.items()
                    ),
                    *(
                        (value, account.account_id, "")
                        for value, account in sorted(found.matched.items())
                    ),
                ][:SAMPLE_ROWS],
            )
        ),
        "without_rows": dg.MetadataValue.md(
            markdown_table(
                ("external id", "name"), ((a.externalId, a.name) for a in without[:SAMPLE_ROWS])
            )
        ),
    }
    unknown = ", ".join(f"{value!r} ({rows} rows)" for value, rows in found.unknown.items())
    if found.unknown:
        context.log.warning(f"accounts without an account on the service: {unknown}")
    yield dg.MaterializeResult(
        metadata={**masked_metadata(metadata), **added},
        check_results=[
            dg.AssetCheckResult(
                check_name=CHECK_ACCOUNTS_KNOWN,
                passed=not found.unknown,
                severity=dg.AssetCheckSeverity.ERROR,
                description=(
                    f"no account on the service for {unknown}: their rows are quarantined"
                    if found.unknown
                    else None
                ),
                metadata={"accounts_unknown": dg.MetadataValue.int(len(found.unknown))},
            )
        ],
    )


def _discover(discovery: AccountDiscovery, records: MappedRecords) -> AccountsFound:
    directory = discovery.directory
    assert directory is not None
    named = external_ids_of(records)

    async def find() -> tuple[list[Account], dict[str, DiscoveredAccount]]:
        async with directory.session():
            listed = await directory.list_accounts()
            if records.account_is_external_id:
                resolved = await directory.resolve(named)
                return listed, {e: a for e, a in resolved.items() if a is not None}
            return listed, await directory.find_account_ids(named)

    listed, matched = asyncio.run(find())
    rows = _rows_per_account(records)
    unknown = {value: rows.get(value, 0) for value in sorted(named - set(matched))}
    return AccountsFound(listed, matched, unknown)


def _rows_per_account(records: MappedRecords) -> dict[str, int]:
    counts: dict[str, int] = {}
    for frame in (records.records, records.quarantine):
        if len(frame):
            for value, n in frame["account_id"].fillna("").astype(str).value_counts().items():
                counts[str(value)] = counts.get(str(value), 0) + int(n)
    return counts


def _add_partitions(
    context: dg.AssetExecutionContext, connection: Connection, accounts: set[str]
) -> dict[str, dg.MetadataValue]:
    """The export's accounts as partitions, when the connection is partitioned by account."""
    if not connection.partitioned_by_account:
        return {}
    added = register_accounts(context.instance, connection, accounts)
    if added:
        context.log.info(f"accounts added as partitions: {', '.join(added)}")
    return {"partitions_added": dg.MetadataValue.int(len(added))}

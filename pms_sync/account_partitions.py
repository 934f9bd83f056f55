"""Accounts as a partition dimension of reservations (``dagster.partition_by_account: true``).

Reservations are then partitioned by account and by month of check-in
(``MultiPartitionsDefinition``; a key reads ``demo|2025-07``). The accounts are dynamic
partitions named ``<connection>_accounts``, registered by the ``<connection>_accounts`` sensor
(the values of the mapping's ``account`` lookup or constant) and by the ``<connection>/accounts``
asset (the accounts the export names, external ids included). A partition key is an account as
the export names it, before external ids are resolved: the value that decides which rows a run
reads.

A run covers a rectangle of partitions: some accounts x a range of months. The nightly schedule
starts one run per account; a backfill's single-run policy groups its partitions by the
dimension with fewer keys (one run per account when there are fewer accounts than months). Every
step of such a run (the units too, which are not partitioned) reads, syncs and reconciles only
the run's accounts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import dagster as dg

from connector.contract import Entity
from pms_sync.connections import Connection
from pms_sync.partitions import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    range_tags,
)

ACCOUNT_DIMENSION = "account"
MONTH_DIMENSION = "month"
ACCOUNT_TAG = "pms_sync/account"
"""Tag of a run the nightly schedule started for one account."""
# Dagster's tags of a run of one partition (single keys, not ranges).
_PARTITION_TAG = "dagster/partition"
_ACCOUNT_PARTITION_TAG = f"dagster/partition/{ACCOUNT_DIMENSION}"


def accounts_partitions_name(connection: Connection) -> str:
    """The name of the connection's dynamic partitions of accounts (and of its sensor)."""
    return f"{connection.name}_accounts"


def accounts_definition(connection: Connection) -> dg.DynamicPartitionsDefinition:
    return dg.DynamicPartitionsDefinition(name=accounts_partitions_name(connection))


def reservation_partitions_of(
    connection: Connection, months: dg.MonthlyPartitionsDefinition
) -> dg.PartitionsDefinition:
    """The reservations' partitions: months, or accounts x months when partitioned by account."""
    if not connection.partitioned_by_account:
        return months
    return dg.MultiPartitionsDefinition(
        {ACCOUNT_DIMENSION: accounts_definition(connection), MONTH_DIMENSION: months}
    )


def partition_key(account: str, month: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({ACCOUNT_DIMENSION: account, MONTH_DIMENSION: month})


def account_of(key: str) -> str | None:
    """The account of a partition key (None for a month alone)."""
    if isinstance(key, dg.MultiPartitionKey):
        return key.keys_by_dimension[ACCOUNT_DIMENSION]
    # "account|month": dimensions are ordered by name, and "|" is in no key of either.
    return key.split("|")[0] if "|" in key else None


def month_of(key: str) -> str:
    if isinstance(key, dg.MultiPartitionKey):
        return key.keys_by_dimension[MONTH_DIMENSION]
    return key.split("|")[-1]


def declared_accounts(connection: Connection) -> set[str] | None:
    """The accounts the mapping itself names (its account constants and lookup values), or
    None when some entity's account comes from the export's data (a column, external ids)."""
    mapping = connection.mapping
    found: set[str] = set()
    for entity, _spec in mapping.entities.items():
        expression = mapping.account_for(Entity(entity))
        if getattr(expression, "external_id", False):
            return None
        if expression.constant is not None:
            found.add(str(expression.constant))
        elif expression.lookup is not None:
            table = mapping.lookups.get(expression.lookup, {})
            found |= {str(value) for value in table.values() if value is not None}
            if expression.map_default is not None:
                found.add(str(expression.map_default))
        else:
            return None
    return found


def account_range_of_tags(tags: Mapping[str, str]) -> tuple[str, str] | None:
    """The first and last account a run's partition tags name; None for a run of no account
    partition (all accounts)."""
    if _ACCOUNT_PARTITION_TAG in tags:
        return tags[_ACCOUNT_PARTITION_TAG], tags[_ACCOUNT_PARTITION_TAG]
    start, end = tags.get(ASSET_PARTITION_RANGE_START_TAG), tags.get(ASSET_PARTITION_RANGE_END_TAG)
    if start is not None and end is not None:
        first, last = account_of(start), account_of(end)
        return (first, last) if first is not None and last is not None else None
    single = account_of(tags.get(_PARTITION_TAG, ""))
    return (single, single) if single is not None else None


def run_accounts(
    connection: Connection, tags: Mapping[str, str], instance: dg.DagsterInstance
) -> frozenset[str] | None:
    """The accounts a run covers: those of its partitions, for every step of the run (the
    unpartitioned units too); None when the connection is not partitioned by account or the
    run names no account partition."""
    if not connection.partitioned_by_account:
        return None
    bounds = account_range_of_tags(tags)
    if bounds is None:
        return None
    first, last = bounds
    if first == last:
        return frozenset({first})
    # A range of accounts: the dynamic partitions between them, in the order they were added.
    keys = instance.get_dynamic_partitions(accounts_partitions_name(connection))
    if first not in keys or last not in keys:
        raise dg.Failure(
            f"the run's accounts {first!r} to {last!r} are not both partitions of "
            f"{accounts_definition(connection).name}",
            allow_retries=False,
        )
    return frozenset(keys[keys.index(first) : keys.index(last) + 1])


def rectangle_tags(months: dg.PartitionKeyRange, accounts: Sequence[str]) -> dict[str, str]:
    """Run tags of the accounts ``accounts[0]`` … ``accounts[-1]`` over a range of months."""
    return range_tags(
        dg.PartitionKeyRange(
            partition_key(accounts[0], months.start), partition_key(accounts[-1], months.end)
        )
    )


def per_account_requests(
    months: dg.PartitionKeyRange, accounts: Sequence[str], tags: Mapping[str, str], tick: str
) -> list[dg.RunRequest]:
    """One run per account over the months: each fails and retries on its own. ``tick`` names
    the evaluation (a schedule's tick), so a re-evaluated tick starts no run twice."""
    return [
        dg.RunRequest(
            run_key=f"{tick}:{account}",
            tags={**rectangle_tags(months, [account]), **tags, ACCOUNT_TAG: account},
        )
        for account in accounts
    ]


def registered_accounts(instance: dg.DagsterInstance, connection: Connection) -> list[str]:
    """The connection's account partitions, in the order they were added."""
    return list(instance.get_dynamic_partitions(accounts_partitions_name(connection)))


def no_accounts_yet(connection: Connection) -> dg.SkipReason:
    accounts_asset = connection.asset_key("accounts").to_user_string()
    return dg.SkipReason(
        f"no account of {connection.name} is a partition yet: the sensor "
        f"{connection.name}_accounts adds the mapping's accounts, {accounts_asset} "
        "those its export names"
    )


def register_accounts(
    instance: dg.DagsterInstance, connection: Connection, accounts: set[str]
) -> list[str]:
    """Add the accounts that are not partitions yet; the added ones, sorted."""
    name = accounts_partitions_name(connection)
    new = sorted(set(accounts) - set(instance.get_dynamic_partitions(name)))
    if new:
        instance.add_dynamic_partitions(name, new)
    return new


def build_accounts_sensor(connection: Connection) -> dg.SensorDefinition | None:
    """``<connection>_accounts``: registers the accounts the mapping names as partitions;
    none when the connection is not partitioned by account."""
    if not connection.partitioned_by_account:
        return None
    definition = accounts_definition(connection)
    accounts_asset = connection.asset_key("accounts").to_user_string()

    @dg.sensor(
        name=f"{connection.name}_accounts",
        minimum_interval_seconds=60,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=(
            f"Adds the accounts {connection.path.name} names (its account lookup or constant) "
            f"as partitions of {definition.name}. Accounts the export names by external id "
            f"are added by {accounts_asset}."
        ),
    )
    def accounts_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
        declared = declared_accounts(connection)
        if declared is None:
            return dg.SkipReason(
                f"{connection.path.name} takes its accounts from the export: materialize "
                f"{accounts_asset} to add them"
            )
        known = set(context.instance.get_dynamic_partitions(accounts_partitions_name(connection)))
        new = sorted(declared - known)
        if not new:
            return dg.SkipReason(f"every account of {connection.path.name} is a partition")
        return dg.SensorResult(dynamic_partitions_requests=[definition.build_add_request(new)])

    return accounts_sensor

"""Turning the external ids a mapping produced into the service's account ids.

A mapping whose account member says ``external_id: true`` leaves each record's external id
in ``account_id``. Before the plan, every external id is replaced by the account id the Open
API gave for it. Rows of an external id that no account of the connection has are set apart
(``MappedRecords.unresolved``), each with a reason naming the value: they are quarantined, and
every other account goes on. Pure pandas: the lookups happen in
:class:`connector.accounts.AccountDirectory`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import pandas as pd

from connector.plan import ReconcilePolicy
from connector.records import (
    QUARANTINE_COLUMNS,
    MappedRecords,
    empty_quarantine,
    split_source_rows,
)

ACCOUNT_FIELD = "account"
"""The quarantine's ``field`` for a row whose account could not be found."""


def external_ids_of(batch: MappedRecords) -> set[str]:
    """The external ids a batch holds (records, quarantine, keys outside its window)."""
    found: set[str] = set()
    for frame in (batch.records, batch.quarantine, batch.present_elsewhere):
        if len(frame):
            column = frame["account_id"].dropna().astype(str)
            found |= {value for value in column.unique() if value.strip()}
    return found


def resolve_batch(
    batch: MappedRecords, accounts: Mapping[str, str], reason: Callable[[str], str]
) -> MappedRecords:
    """``batch`` with account ids instead of external ids; rows of external ids missing from
    ``accounts`` (external id → account id) go to ``unresolved`` with ``reason(value)``."""
    if not batch.account_is_external_id:
        return batch
    records = batch.records
    known = records["account_id"].isin(list(accounts))
    unknown_records = records.loc[~known]
    resolved = records.loc[known].copy()
    resolved["account_id"] = resolved["account_id"].map(accounts)

    quarantine = batch.quarantine
    external = quarantine["account_id"].fillna("").astype(str)
    blank = external.str.strip() == ""
    quarantine_known = external.isin(list(accounts))
    kept = quarantine.loc[blank | quarantine_known].copy()
    kept_ids = kept["account_id"].fillna("").astype(str)
    mapped = kept_ids.isin(list(accounts))
    kept.loc[mapped, "account_id"] = kept_ids[mapped].map(accounts)

    unresolved = pd.concat(
        [
            _rows_of_records(batch, unknown_records, reason),
            _rows_of_quarantine(quarantine.loc[~blank & ~quarantine_known], reason),
        ],
        ignore_index=True,
    )
    fingerprints = batch.fingerprints
    if fingerprints is not None and len(fingerprints):
        # Kept for the records of known accounts only, under the account id they are sent to.
        fingerprints = fingerprints.loc[fingerprints["source_account"].isin(list(accounts))].copy()
        fingerprints["account_id"] = fingerprints["source_account"].map(accounts)
    elsewhere = batch.present_elsewhere
    if len(elsewhere):
        ids = elsewhere["account_id"].fillna("").astype(str)
        keep = (ids.str.strip() == "") | ids.isin(list(accounts))
        elsewhere = elsewhere.loc[keep].copy()
        mapped = elsewhere["account_id"].isin(list(accounts))
        elsewhere.loc[mapped, "account_id"] = elsewhere.loc[mapped, "account_id"].map(accounts)
    return replace(
        batch,
        records=resolved.reset_index(drop=True),
        quarantine=kept.reset_index(drop=True),
        present_elsewhere=elsewhere.reset_index(drop=True),
        fingerprints=fingerprints,
        carried=int(resolved["payload"].isna().sum()),
        account_is_external_id=False,
        unresolved=unresolved if len(unresolved) else empty_quarantine(),
    )


def resolve_policy(policy: ReconcilePolicy, accounts: Mapping[str, str]) -> ReconcilePolicy:
    """A policy whose reconciliation scope names external ids, in account ids (Dagster's
    reservations step takes its scope from the units export, before resolution)."""
    if policy.accounts is None:
        return policy
    scope = frozenset(accounts[a] for a in policy.accounts if a in accounts)
    return replace(policy, accounts=scope)


def _rows_of_records(
    batch: MappedRecords, records: pd.DataFrame, reason: Callable[[str], str]
) -> pd.DataFrame:
    if not len(records):
        return empty_quarantine()
    source, rows = split_source_rows(records["source_rows"].fillna("").astype(str))
    external = records["account_id"].astype(str)
    return pd.DataFrame(
        {
            "entity": str(batch.entity),
            "account_id": external.to_numpy(),
            "record_id": records["record_id"].astype(str).to_numpy(),
            "input": source.astype(object).to_numpy(),
            "rows": rows.astype(object).to_numpy(),
            "field": ACCOUNT_FIELD,
            "reason": [reason(value) for value in external],
            "value": external.to_numpy(),
            "checkin": pd.to_datetime(records["checkin"])
            .dt.strftime("%Y-%m-%d")
            .fillna("")
            .to_numpy(),
        },
        columns=list(QUARANTINE_COLUMNS),
    )


def _rows_of_quarantine(rows: pd.DataFrame, reason: Callable[[str], str]) -> pd.DataFrame:
    """Invalid rows of an unknown external id: reported once per record and rows, for the
    account (the first thing to fix), not for each of their other problems."""
    if not len(rows):
        return empty_quarantine()
    once = rows.drop_duplicates(["account_id", "record_id", "input", "rows"]).copy()
    external = once["account_id"].astype(str)
    once["field"] = ACCOUNT_FIELD
    once["reason"] = [reason(value) for value in external]
    once["value"] = external.to_numpy()
    return once.loc[:, list(QUARANTINE_COLUMNS)]

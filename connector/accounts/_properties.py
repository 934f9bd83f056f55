"""Property offboarding (spec §4.6, §3 rule 1): a hotel that leaves the connection is
deactivated with one ``PUT /properties/{account id}``, and reactivated when it comes back.

- **Gone**: an account whose accommodations this connection owns in the snapshot has no row
  at all in a full export (units and reservations; a status column that says a property is
  inactive is a ``filter:`` of the mapping, whose rows then leave the export). Only when the
  accommodations are a full export with ``on_missing: deactivate``; never when a row of the
  export has no account (it might be one of them), and never while another connection still
  has active units in that account.
- **Guarded**: a deactivation is a mass change of the account (every unit of it stops): the
  mass-change guard holds it back unless approved, and it is held while the property has a
  current or future stay unless that is approved too (``--allow-deactivation-with-stays``).
- **Back**: an account the snapshot says pms-sync deactivated has rows again: reactivated
  before its changes are pushed. With ``updateSubUnits=true`` the service reactivates every
  unit; units pms-sync had deactivated one by one and that are still gone are deactivated
  again in the same run, so the service is never left with a unit active that should not be.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from enum import StrEnum
from typing import Any

import pandas as pd

from connector.accounts._directory import AccountDirectory
from connector.accounts._settings import PropertyPolicy
from connector.contract import AccommodationStatus, Entity
from connector.errors import AuthenticationError, ServiceError
from connector.plan import (
    CHANGE_COLUMNS,
    Action,
    Plan,
    PropertyEffect,
    ReconcilePolicy,
    delivery_order,
)
from connector.records import MappedRecords
from connector.safety.approvals import Approval, HeldWork
from connector.safety.guard import (
    GuardRules,
    GuardVerdict,
    MassChange,
    MassChangeRule,
    last_successful_rows,
)
from connector.secrets import mask_text
from connector.snapshot import OnMissing, PropertyState, PropertyStatusRecord, SnapshotStore

REASON_PROPERTY_REACTIVATED = "property_reactivated"
"""A unit deactivated again after its property was reactivated with its sub-units."""


class PropertyAction(StrEnum):
    DEACTIVATE = "deactivate"
    REACTIVATE = "reactivate"


class PropertyOutcome(StrEnum):
    APPLIED = "applied"  # 2xx with the documented body and the status asked for
    HELD = "held"  # current or future stays, not approved: not sent
    BLOCKED = "blocked"  # the mass-change guard held the account back: not sent
    PLANNED = "planned"  # a dry run or a plan: not sent
    FAILED = "failed"  # refused (401, 403, 404, …): a configuration problem, fix and run again
    PENDING = "pending"  # transient faults, or an answer that is no confirmation: next run


_STATUS_OF: dict[PropertyAction, AccommodationStatus] = {
    PropertyAction.DEACTIVATE: AccommodationStatus.INACTIVE,
    PropertyAction.REACTIVATE: AccommodationStatus.ACTIVE,
}


@dataclass
class PropertyChange:
    """One property status change, and what came of it."""

    account_id: str
    action: PropertyAction
    units: int = 0  # the connection's units of the account in the snapshot
    stays: int = 0  # reservations with a stay ending today or later
    last_checkout: date | None = None
    outcome: PropertyOutcome = PropertyOutcome.PLANNED
    http_status: int | None = None
    message: str = ""
    request_id: str | None = None
    updated_sub_units: int | None = None

    @property
    def status(self) -> AccommodationStatus:
        return _STATUS_OF[self.action]

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "account_id": self.account_id,
            "action": str(self.action),
            "outcome": str(self.outcome),
            "units": self.units,
            "stays": self.stays,
            "last_checkout": self.last_checkout.isoformat() if self.last_checkout else None,
            "http_status": self.http_status,
            "message": self.message,
            "request_id": self.request_id,
            "updated_sub_units": self.updated_sub_units,
        }


@dataclass
class PropertyReport:
    """The property changes of one run."""

    changes: list[PropertyChange] = field(default_factory=list)
    update_sub_units: bool = True
    requests: int = 0
    units_kept_inactive: int = 0  # units deactivated again after a reactivation with sub-units
    # Accounts gone from the full export that stay active: offboarding is off.
    left_active: list[str] = field(default_factory=list)

    def of(self, action: PropertyAction, *outcomes: PropertyOutcome) -> list[PropertyChange]:
        return [
            c
            for c in self.changes
            if c.action == action and (not outcomes or c.outcome in outcomes)
        ]

    @property
    def incomplete(self) -> bool:
        """A change that was due was not confirmed (failed or pending)."""
        return any(
            c.outcome in (PropertyOutcome.FAILED, PropertyOutcome.PENDING) for c in self.changes
        )

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "update_sub_units": self.update_sub_units,
            "requests": self.requests,
            "units_kept_inactive": self.units_kept_inactive,
            "changes": [c.to_json_dict() for c in self.changes],
            "left_active": list(self.left_active),
        }


def plan_properties(
    snapshot: SnapshotStore,
    batches: Mapping[Entity, MappedRecords],
    policy: ReconcilePolicy,
    settings: PropertyPolicy,
    *,
    today: date,
    release_with_stays: bool,
) -> PropertyReport:
    """The property deactivations and reactivations a run's export calls for."""
    report = PropertyReport(update_sub_units=settings.update_sub_units)
    units = batches.get(Entity.ACCOMMODATION)
    if units is None or policy.missing_rule(Entity.ACCOMMODATION) != OnMissing.DEACTIVATE:
        return report
    present, anonymous_rows = _accounts_with_rows(batches.values())
    statuses = snapshot.property_statuses()
    inactive = {a for a, r in statuses.items() if r.status == PropertyState.INACTIVE}
    owned = snapshot.accounts_of_connection(policy.connection)
    gone = [] if anonymous_rows else _gone_accounts(owned, present | inactive, policy)
    if not settings.offboard:
        report.left_active = [account for account, _ in gone]
        return report
    for account, units_of_account in gone:
        report.changes.append(PropertyChange(account, PropertyAction.DEACTIVATE, units_of_account))
    units_of = {str(row.account_id): int(row.units) for row in owned.itertuples(index=False)}
    for account in sorted(present & inactive):
        report.changes.append(
            PropertyChange(account, PropertyAction.REACTIVATE, units_of.get(account, 0))
        )
    leaving = [c for c in report.changes if c.action == PropertyAction.DEACTIVATE]
    stays = snapshot.account_stays([c.account_id for c in leaving], today)
    found = {str(r.account_id): r for r in stays.itertuples(index=False)}
    for change in leaving:
        row = found.get(change.account_id)
        if row is None or int(row.stays) == 0:
            continue
        change.stays, change.last_checkout = int(row.stays), row.last_checkout
        if not release_with_stays:
            _hold_for_stays(change)
    return report


def _gone_accounts(owned: Any, kept: set[str], policy: ReconcilePolicy) -> list[tuple[str, int]]:
    """The connection's accounts (with their units) that left its export: not ``kept``
    (present, or inactive already), not shared with another connection, within the run."""
    gone = []
    for row in owned.itertuples(index=False):
        account = str(row.account_id)
        if account in kept or int(row.shared) > 0:
            continue
        if policy.accounts is not None and account not in policy.accounts:
            continue
        gone.append((account, int(row.units)))
    return gone


def _hold_for_stays(change: PropertyChange) -> None:
    change.outcome = PropertyOutcome.HELD
    change.message = (
        f"{change.stays} current or future stay(s) until {change.last_checkout}: "
        "held (approve with --allow-deactivation-with-stays, or wait for the stays to end)"
    )


def property_effects(report: PropertyReport) -> tuple[PropertyEffect, ...]:
    """The report's changes as the plan carries them (decided, none sent yet)."""
    return tuple(
        PropertyEffect(
            account_id=c.account_id,
            action=str(c.action),
            units=c.units,
            stays=c.stays,
            last_checkout=c.last_checkout,
            held_for_stays=c.outcome == PropertyOutcome.HELD,
        )
        for c in report.changes
    )


def planned_report(plan: Plan) -> PropertyReport:
    """The plan's property changes as a report to carry out (``apply_properties``)."""
    report = PropertyReport(
        update_sub_units=plan.update_sub_units, left_active=list(plan.properties_left_active)
    )
    for effect in plan.properties:
        change = PropertyChange(
            effect.account_id,
            PropertyAction(effect.action),
            effect.units,
            effect.stays,
            effect.last_checkout,
        )
        if effect.held_for_stays:
            _hold_for_stays(change)
        report.changes.append(change)
    if len(plan.changes):
        report.units_kept_inactive = int(
            (plan.changes["reason"] == REASON_PROPERTY_REACTIVATED).sum()
        )
    return report


@dataclass(frozen=True)
class PropertyDeactivation(MassChange):
    """A property deactivation as the guard lists it: the account's rows dropped to zero."""

    def describe(self) -> str:
        return (
            f"account {self.account_id!r}: gone from the export ({self.base} "
            f"{self.entity} records before, none now); its property would be deactivated "
            f"(PUT /properties/{self.account_id}, every unit of it stops)"
        )


def guard_properties(
    verdict: GuardVerdict,
    report: PropertyReport,
    snapshot: SnapshotStore,
    rules: GuardRules | None,
    connection: str | None,
) -> GuardVerdict:
    """The verdict with every property deactivation to send counted as a mass change of its
    account (all of its units stop), so it is pushed only when approved. A row drop the guard
    found for the account already is named for what it would do. An account whose zero rows
    a successful run recorded was approved gone before (the deactivation waited for its
    stays to end): it needs no new approval."""
    rules = rules or GuardRules()
    entity = str(Entity.ACCOMMODATION)
    approved_gone = {
        str(row.account_id)
        for row in last_successful_rows(snapshot, connection).itertuples(index=False)
        if str(row.entity) == entity and int(row.rows) == 0
    }
    leaving = {
        change.account_id: change
        for change in report.of(PropertyAction.DEACTIVATE, PropertyOutcome.PLANNED)
        if change.account_id not in approved_gone
    }
    if not leaving:
        return verdict
    kept: list[MassChange] = []
    bases: dict[str, int] = {}
    for change in verdict.changes:
        if change.account_id in leaving and change.entity == entity:
            bases[change.account_id] = change.base
            if change.rule == MassChangeRule.ROW_DROP:
                continue  # replaced below
        kept.append(change)
    added = [
        PropertyDeactivation(
            account_id,
            entity,
            MassChangeRule.ROW_DROP,
            0,
            bases.get(account_id, change.units),
            rules,
        )
        for account_id, change in leaving.items()
    ]
    changes = sorted((*kept, *added), key=lambda c: (c.account_id, c.entity, str(c.rule)))
    return replace(verdict, changes=tuple(changes))


def with_units_kept_inactive(
    plan: Plan,
    snapshot: SnapshotStore,
    batches: Mapping[Entity, MappedRecords],
    report: PropertyReport,
    today: date,
) -> Plan:
    """The plan plus, for each property reactivated with its sub-units, a deactivation of the
    units pms-sync had deactivated one by one that are still gone from the export."""
    accounts = [c.account_id for c in report.of(PropertyAction.REACTIVATE, PropertyOutcome.PLANNED)]
    if not report.update_sub_units or not accounts:
        return plan
    deactivated = snapshot.deactivated_units(accounts)
    units = batches.get(Entity.ACCOMMODATION)
    if units is not None and len(deactivated):
        present = _keys(units)
        keep = [
            (a, r) not in present
            for a, r in zip(deactivated["account_id"], deactivated["record_id"], strict=True)
        ]
        deactivated = deactivated.loc[keep]
    if not len(deactivated):
        return plan
    extra = pd.DataFrame(
        {
            "entity": str(Entity.ACCOMMODATION),
            "account_id": deactivated["account_id"].astype(str).to_numpy(),
            "record_id": deactivated["record_id"].astype(str).to_numpy(),
            "action": str(Action.DEACTIVATE),
            "reason": REASON_PROPERTY_REACTIVATED,
            "event": "update",
            "payload": deactivated["payload"].astype(str).to_numpy(),
            "content_hash": deactivated["content_hash"].astype(str).to_numpy(),
            "status_after": "deactivated",
            "checkin": None,
            "checkout": None,
        },
        columns=list(CHANGE_COLUMNS[:-1]),
    )
    report.units_kept_inactive = len(extra)
    tally = (
        extra.groupby("account_id", as_index=False)
        .size()
        .rename(columns={"size": "n"})
        .assign(
            entity=str(Entity.ACCOMMODATION),
            action=str(Action.DEACTIVATE),
            reason=REASON_PROPERTY_REACTIVATED,
        )
    )
    base = plan.changes.drop(columns=["urgency"]) if len(plan.changes) else None
    changes = pd.concat([frame for frame in (base, extra) if frame is not None], ignore_index=True)
    return replace(
        plan,
        changes=delivery_order(changes, today),
        tally=pd.concat([plan.tally, tally.loc[:, list(plan.tally.columns)]], ignore_index=True),
    )


def withhold_unreactivated(plan: Plan, report: PropertyReport) -> Plan:
    """The plan without the units to keep inactive of properties not reactivated after all."""
    stuck = {
        c.account_id
        for c in report.of(PropertyAction.REACTIVATE)
        if c.outcome != PropertyOutcome.APPLIED
    }
    if not stuck or not len(plan.changes):
        return plan
    drop = plan.changes["account_id"].isin(list(stuck)) & (
        plan.changes["reason"] == REASON_PROPERTY_REACTIVATED
    )
    return replace(plan, changes=plan.changes.loc[~drop].reset_index(drop=True))


def apply_properties(
    report: PropertyReport,
    directory: AccountDirectory | None,
    *,
    held: Collection[tuple[str, str, str]],
    dry_run: bool,
) -> None:
    """Send the report's planned changes (reactivations first) and set their outcomes.

    ``held``: the kinds of change the mass-change guard holds back (``GuardVerdict.held``); a
    property deactivation is one of its account's accommodation deactivations."""
    for change in report.of(PropertyAction.DEACTIVATE, PropertyOutcome.PLANNED):
        if (change.account_id, str(Entity.ACCOMMODATION), str(Action.DEACTIVATE)) in held:
            change.outcome = PropertyOutcome.BLOCKED
            change.message = "held back by the mass-change guard (approve with --allow-mass-change)"
    due = [c for c in report.changes if c.outcome == PropertyOutcome.PLANNED]
    if dry_run or not due or directory is None:
        return
    before = directory.stats.requests
    ordered = sorted(due, key=lambda c: c.action != PropertyAction.REACTIVATE)
    asyncio.run(_send(ordered, directory, report.update_sub_units))
    report.requests = directory.stats.requests - before


async def _send(
    changes: list[PropertyChange], directory: AccountDirectory, update_sub_units: bool
) -> None:
    async with directory.session():
        api = directory.api
        for change in changes:
            try:
                answer = await api.set_property_status(
                    change.account_id, change.status, update_sub_units=update_sub_units
                )
            except AuthenticationError as error:
                change.outcome, change.http_status = PropertyOutcome.FAILED, error.status
                change.message = mask_text(str(error))
            except ServiceError as error:
                transient = error.status is None or error.status == 429 or error.status >= 500
                change.outcome = PropertyOutcome.PENDING if transient else PropertyOutcome.FAILED
                change.http_status, change.message = error.status, mask_text(str(error))
                change.request_id = error.request_id
            except ValueError:
                change.outcome, change.http_status = PropertyOutcome.PENDING, 200
                change.message = (
                    "unconfirmed: the answer is not the JSON object {id, status, updatedSubUnits}"
                )
                change.request_id = api.last_request_id
            else:
                change.request_id = api.last_request_id
                change.http_status = 200
                if answer.status != change.status:
                    change.outcome = PropertyOutcome.PENDING
                    change.message = (
                        f"unconfirmed: asked for {change.status}, the service answered "
                        f"{answer.status}"
                    )
                else:
                    change.outcome = PropertyOutcome.APPLIED
                    change.updated_sub_units = answer.updatedSubUnits


def held_properties(report: PropertyReport) -> list[HeldWork]:
    """The property deactivations held for their stays, as work awaiting that approval."""
    return [
        HeldWork(
            change.account_id,
            "property",
            str(PropertyAction.DEACTIVATE),
            1,
            f"{change.stays} current or future stay(s) until {change.last_checkout}",
            Approval.DEACTIVATION_WITH_STAYS,
        )
        for change in report.of(PropertyAction.DEACTIVATE, PropertyOutcome.HELD)
    ]


def status_records(report: PropertyReport, connection: str | None) -> list[PropertyStatusRecord]:
    """What the snapshot remembers of the applied changes."""
    now = datetime.now(UTC).replace(tzinfo=None)
    return [
        PropertyStatusRecord(
            account_id=c.account_id,
            status=(
                PropertyState.INACTIVE
                if c.action == PropertyAction.DEACTIVATE
                else PropertyState.ACTIVE
            ),
            update_sub_units=report.update_sub_units,
            changed_at=now,
            request_id=c.request_id,
            connection=connection,
        )
        for c in report.changes
        if c.outcome == PropertyOutcome.APPLIED
    ]


def _accounts_with_rows(batches: Iterable[MappedRecords]) -> tuple[set[str], bool]:
    """Accounts with any row in the export, and whether some row has no account."""
    present: set[str] = set()
    anonymous = False
    for batch in batches:
        for frame in (batch.records, batch.quarantine, batch.present_elsewhere):
            if not len(frame):
                continue
            ids = frame["account_id"].fillna("").astype(str)
            blank = ids.str.strip() == ""
            anonymous = anonymous or bool(blank.any())
            present |= set(ids[~blank])
    return present, anonymous


def _keys(batch: MappedRecords) -> set[tuple[str, str]]:
    frames = [batch.records, batch.quarantine, batch.present_elsewhere]
    return {
        (str(a), str(r))
        for frame in frames
        if len(frame)
        for a, r in zip(frame["account_id"], frame["record_id"], strict=True)
    }

"""The plan: what one sync will send, decided before anything is sent.

A plan is a value. ``build_plan`` compares the mapped records with the snapshot (one SQL
query per entity, see :mod:`connector.snapshot`) and returns every change that costs a
request, in delivery order, with counts of everything else. It can be printed as a table or
as JSON, and executed by :func:`connector.push.push_plan`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import date
from enum import StrEnum
from typing import Any

import pandas as pd

from connector.canonical import canonical_json, content_hash
from connector.contract import CANCELLED, AccommodationStatus, Entity, SyncEvent
from connector.cursors import SourceRead
from connector.documents import documents_containing
from connector.plan._drift import OPTIONAL_REASONS
from connector.plan._effects import Approval, HeldWork, PropertyEffect, WaitingForUnit
from connector.plan._resend import ResendOptions, ResendSummary, resend_changes, resend_counts
from connector.plan._urgency import URGENCY_CLASSES, UrgencyPolicy
from connector.records import (
    DateWindow,
    MappedRecords,
    StatusFinding,
    counts_by_text,
    status_findings,
    status_message,
)
from connector.snapshot import (
    DiffRequest,
    OnMissing,
    RecordStatus,
    SnapshotStore,
    UnitStaysRequest,
)


class Action(StrEnum):
    CREATE = "create"  # id never acknowledged: event create
    UPDATE = "update"  # acknowledged id whose content changed (or forced): event update
    SKIP = "skip"  # unchanged, or refused before with the same content: no request
    DEACTIVATE = "deactivate"  # accommodation gone from a full export: update with INACTIVE
    CANCEL = "cancel"  # future reservation gone from the export: update with CANCELLED


ACTIONS: tuple[Action, ...] = tuple(Action)
SENDING_ACTIONS: frozenset[Action] = frozenset(set(Action) - {Action.SKIP})

SKIP_REASON_DEAD_LETTERED = "dead_lettered"
"""A skip whose record the service refused before with the same content (shown as ``held``)."""
SKIP_REASON_UPCOMING_STAYS = "upcoming_stays"
"""A unit gone from the export that guests still stay in: not deactivated (shown as ``held``)."""
SKIP_REASON_UNIDENTIFIED_ROWS = "unidentified_rows"
"""A record gone from the export of an account that has rows without an id: it may be one of
them, so it is not deactivated or cancelled (shown as ``held``)."""
SKIP_REASON_QUARANTINED = "quarantined"
"""A known record whose rows are in the export but invalid: the service keeps its last
acknowledged version (counted under ``quarantined``, not as missing)."""
REASON_POSSIBLY_STORED_GONE = "possibly_stored_gone"
"""A record whose answer was lost (the service may hold it), gone from the export: retired
like an acknowledged record (connector.snapshot's diff)."""
HELD_REASONS: frozenset[str] = frozenset(
    {SKIP_REASON_DEAD_LETTERED, SKIP_REASON_UPCOMING_STAYS, SKIP_REASON_UNIDENTIFIED_ROWS}
)
"""Skips that are decisions to withhold a request, listed as ``held``."""

_EVENT_OF_ACTION: dict[str, SyncEvent] = {
    Action.CREATE: SyncEvent.CREATE,
    Action.UPDATE: SyncEvent.UPDATE,
    Action.DEACTIVATE: SyncEvent.UPDATE,
    Action.CANCEL: SyncEvent.UPDATE,
}
_STATUS_AFTER_ACTION: dict[str, RecordStatus] = {
    Action.CREATE: RecordStatus.ACTIVE,
    Action.UPDATE: RecordStatus.ACTIVE,
    Action.DEACTIVATE: RecordStatus.DEACTIVATED,
    Action.CANCEL: RecordStatus.CANCELLED,
}
_ENTITY_ORDER: tuple[Entity, ...] = (Entity.ACCOMMODATION, Entity.RESERVATION)

CHANGE_COLUMNS: tuple[str, ...] = (
    "entity",
    "account_id",
    "record_id",
    "action",
    "reason",
    "event",
    # canonical JSON of the resource to send: connector.documents' column over the mapping's
    # documents, read a batch at a time (``DocumentArray.arrow``), or text
    "payload",
    "content_hash",  # what the snapshot records once acknowledged
    "status_after",  # RecordStatus recorded once acknowledged
    "checkin",
    "checkout",
    "urgency",  # unit | upcoming | future | past: the delivery class (connector.plan._urgency)
)
RESEND_COLUMNS: tuple[str, ...] = ("drifted", "refresh", "reconcile")
"""Re-sends of unchanged acknowledged records (connector.plan._resend), counted apart from actions."""


@dataclass(frozen=True)
class ReconcilePolicy:
    """What to do with acknowledged records the export no longer contains, per entity."""

    on_missing: Mapping[Entity, OnMissing] = field(
        default_factory=lambda: {
            Entity.ACCOMMODATION: OnMissing.DEACTIVATE,
            Entity.RESERVATION: OnMissing.IGNORE,
        }
    )
    full_export: Mapping[Entity, bool] = field(
        default_factory=lambda: {Entity.ACCOMMODATION: True, Entity.RESERVATION: True}
    )
    # Accounts whose missing records may be reconciled. None: the accounts present in this
    # run's export, so an account absent from the export is never wiped out by accident.
    accounts: frozenset[str] | None = None
    # The connection (mapping name) being synced. Several mappings may write to one account;
    # each reconciles only the records it owns (last acknowledged or exported), so one
    # mapping's full export never deactivates another's units.
    connection: str | None = None
    # Entities this run read incrementally (connector.pipeline._incremental): their export
    # holds the changed rows only, so nothing missing from it is gone.
    incremental: frozenset[Entity] = frozenset()

    def missing_rule(self, entity: Entity) -> OnMissing:
        if not self.full_export.get(entity, True) or entity in self.incremental:
            return OnMissing.IGNORE
        return self.on_missing.get(entity, OnMissing.IGNORE)

    @classmethod
    def from_mapping(cls, mapping: Any) -> ReconcilePolicy:
        """The policy a mapping declares (``mapping.entities[entity].on_missing/full_export``)."""
        on_missing: dict[Entity, OnMissing] = {}
        full_export: dict[Entity, bool] = {}
        for entity, spec in mapping.entities.items():
            on_missing[Entity(entity)] = OnMissing(str(getattr(spec, "on_missing", "ignore")))
            full_export[Entity(entity)] = bool(getattr(spec, "full_export", True))
        name = getattr(mapping, "name", None)
        return cls(
            on_missing=on_missing,
            full_export=full_export,
            connection=str(name) if name is not None else None,
        )


@dataclass(frozen=True)
class Force:
    """Re-send regardless of the content hash."""

    full_resync: bool = False  # every record of the export, dead letters included
    only_ids: frozenset[str] | None = None  # only these record ids, each re-sent

    @property
    def active(self) -> bool:
        return self.full_resync or self.only_ids is not None


@dataclass(frozen=True)
class Plan:
    """Every change to send, in delivery order, and the counts of every action."""

    changes: pd.DataFrame  # CHANGE_COLUMNS, one row per request to send
    tally: pd.DataFrame  # entity, account_id, action, reason, n (skips included)
    extracted: pd.DataFrame  # entity, account_id, extracted, quarantined
    window: DateWindow | None = None
    force: Force = field(default_factory=Force)
    only_ids_not_in_export: list[str] = field(default_factory=list)  # --only ids nobody exported
    connection: str | None = None  # recorded as the owner of what the push acknowledges
    # Units gone from the export that guests still stay in (UNIT_STAYS_COLUMNS): held, or
    # deactivated anyway when ``released`` (approved).
    units_with_stays: pd.DataFrame = field(default_factory=lambda: _empty(UNIT_STAYS_COLUMNS))
    entities: tuple[str, ...] = ()  # the entities this plan read
    incremental: tuple[str, ...] = ()  # the entities read incrementally: changed rows only
    # How the SQL inputs with a cursor were read: in full or since which value, rows read.
    reads: tuple[SourceRead, ...] = ()
    # The mapping's quarantine: problems per entity, and the first ones (values masked).
    quarantine: dict[str, int] = field(default_factory=dict)
    quarantine_sample: list[dict[str, Any]] = field(default_factory=list)
    # How the re-sends of unchanged records were chosen (the rows are among ``changes``, as
    # updates with reason drifted, refresh or reconcile; ``counts`` does not include them).
    resend: ResendSummary = field(default_factory=ResendSummary)
    # Records per entity carried over unmapped by their unchanged source fingerprint
    # (connector.mapping.fingerprints): among the skips, never among the changes.
    carried: dict[str, int] = field(default_factory=dict)
    # Reservation statuses that may mean cancelled but are not CANCELLED: their records are
    # quarantined, not sent as live stays; ``status_fix`` says what to write in the mapping.
    status_findings: list[StatusFinding] = field(default_factory=list)
    status_fix: str | None = None
    # Property status changes (PUT /properties/{id}): offboarding and reactivation, held
    # ones included (connector.accounts decides them).
    properties: tuple[PropertyEffect, ...] = ()
    update_sub_units: bool = True
    # Accounts gone from the full export left active: offboarding is off. Nothing is sent.
    properties_left_active: tuple[str, ...] = ()
    # Work held until an approval releases it (the guard's kinds of change, units and
    # properties guests still stay in), each with its reason and approval.
    awaiting_approval: tuple[HeldWork, ...] = ()
    # Reservations whose unit the service does not hold (refused before): held back by the
    # push unless the unit is acknowledged first (connector.push's parent-failure holdback).
    waiting_for_units: tuple[WaitingForUnit, ...] = ()

    @property
    def status_error(self) -> str | None:
        """The error naming each such status value, its records and the ``map:`` to add."""
        if not self.status_findings:
            return None
        return status_message(self.status_findings, self.status_fix)

    @property
    def resends(self) -> dict[str, int]:
        """Re-sends of unchanged acknowledged records in ``changes``, per reason."""
        return resend_counts(self.changes)

    # ``build_plan(by_checkin=True)``: the reservations' tally per check-in day (entity,
    # account_id, action, reason, checkin, n), so a run over several months can be reported
    # month by month (``connector.pipeline._windowed_report``).
    tally_by_checkin: pd.DataFrame | None = None

    @property
    def counts(self) -> dict[str, int]:
        return _action_counts(self.tally)

    @property
    def held(self) -> int:
        """Records not sent on purpose: refused before with the same content, units with
        upcoming stays, missing records of accounts with rows without an id."""
        if not len(self.tally):
            return 0
        return int(self.tally.loc[self.tally["reason"].isin(HELD_REASONS), "n"].sum())

    @property
    def quarantined(self) -> int:
        """Records (or rows without a key) of the export that failed validation: not sent."""
        return int(self.extracted["quarantined"].sum()) if len(self.extracted) else 0

    @property
    def kept_quarantined(self) -> int:
        """Known records now quarantined: the service keeps their last acknowledged version."""
        if not len(self.tally):
            return 0
        mask = self.tally["reason"] == SKIP_REASON_QUARANTINED
        return int(self.tally.loc[mask, "n"].sum())

    @property
    def unusable(self) -> dict[str, str]:
        """Entities this plan read that gave nothing usable, with why: every row quarantined,
        or no row at all (outside a check-in window, which may well hold none)."""
        found: dict[str, str] = {}
        for entity in self.entities:
            rows = self.extracted[self.extracted["entity"] == entity]
            valid = int(rows["extracted"].sum())
            quarantined = int(rows["quarantined"].sum())
            if valid == 0 and quarantined > 0:
                found[entity] = f"all {quarantined} {entity} records of the export are quarantined"
            elif entity in self.incremental:
                continue  # no row changed since the last run
            elif valid == 0 and not (self.window and entity == Entity.RESERVATION):
                found[entity] = f"the export has no {entity} rows"
        return found

    @property
    def accounts(self) -> list[str]:
        return sorted(set(self.extracted["account_id"]) | set(self.tally["account_id"]))

    @property
    def request_count(self) -> int:
        return len(self.changes)

    def held_kinds(self, approved: Collection[Approval] = ()) -> frozenset[tuple[str, str, str]]:
        """(account, entity, action) of the record changes the guard holds, unless the
        mass-change approval is given. Units with stays are not among ``changes`` at all:
        the stays rule holds them one by one when the plan is made."""
        if Approval.MASS_CHANGE in approved:
            return frozenset()
        return frozenset(
            (item.account_id, item.entity, item.action)
            for item in self.awaiting_approval
            if item.approval == Approval.MASS_CHANGE and item.entity != "property"
        )

    def released(self, approved: Collection[Approval]) -> Plan:
        """The plan with the mass-change holds released when that approval is given (units
        and properties with stays are decided when the plan is made: their approval is a
        planning option)."""
        if Approval.MASS_CHANGE not in approved:
            return self
        kept = tuple(h for h in self.awaiting_approval if h.approval != Approval.MASS_CHANGE)
        return replace(self, awaiting_approval=kept)

    @property
    def record_requests(self) -> int:
        """Record changes to send: those of no kind held for an approval."""
        held = self.held_kinds()
        if not held or not len(self.changes):
            return len(self.changes)
        kinds = zip(
            self.changes["account_id"].astype(str),
            self.changes["entity"].astype(str),
            self.changes["action"].astype(str),
            strict=True,
        )
        return sum(1 for kind in kinds if kind not in held)

    @property
    def property_requests(self) -> int:
        """Property status changes to send: neither held for stays nor by the guard."""
        return sum(1 for change in self.properties if self._property_sent(change))

    def _property_sent(self, change: PropertyEffect) -> bool:
        """Not held for its stays, nor (an offboarding) by the guard as a mass change."""
        guarded = (change.account_id, str(Entity.ACCOMMODATION), "deactivate") in self.held_kinds()
        return not change.held_for_stays and not (change.action == "deactivate" and guarded)

    @property
    def possibly_stored_retirements(self) -> pd.DataFrame:
        """Retirements of records whose answer was lost (the service may hold them)."""
        if not len(self.changes):
            return self.changes
        return self.changes.loc[self.changes["reason"] == REASON_POSSIBLY_STORED_GONE]

    def effects_json(self) -> dict[str, Any]:
        """The effects beyond the counts: property changes, retirements of possibly stored
        records and the work held awaiting an approval."""
        retired = self.possibly_stored_retirements
        return {
            "requests_to_send": {
                "records": self.record_requests,
                "properties": self.property_requests,
            },
            "properties": [change.to_json_dict() for change in self.properties],
            "property_requests": self.property_requests,
            "update_sub_units": self.update_sub_units,
            "properties_left_active": list(self.properties_left_active),
            "possibly_stored_retirements": [
                {"entity": str(e), "account_id": str(a), "record_id": str(r), "action": str(c)}
                for e, a, r, c in zip(
                    retired["entity"],
                    retired["account_id"],
                    retired["record_id"],
                    retired["action"],
                    strict=True,
                )
            ],
            "awaiting_approval": [item.to_json_dict() for item in self.awaiting_approval],
            "waiting_for_units": [item.to_json_dict() for item in self.waiting_for_units],
        }

    def effects_lines(self) -> list[str]:
        """The same, one line each, for a person."""
        lines = [
            change.describe() + ("" if self._property_sent(change) else ": held (below)")
            for change in self.properties
        ]
        lines += [
            f"retire     {r.entity} {r.account_id}/{r.record_id} ({r.action}: its answer was "
            "lost, the service may hold it)"
            for r in self.possibly_stored_retirements.itertuples(index=False)
        ]
        lines += [f"held       {item.describe()}" for item in self.awaiting_approval]
        lines += [item.describe() for item in self.waiting_for_units]
        return lines

    @property
    def by_urgency(self) -> dict[str, int]:
        """Requests to send per delivery class (``connector.plan.URGENCY_CLASSES``)."""
        found = self.changes["urgency"].value_counts() if len(self.changes) else {}
        return {urgency: int(found.get(urgency, 0)) for urgency in URGENCY_CLASSES}

    def counts_by(self, entity: Entity, account_id: str) -> dict[str, int]:
        rows = self.tally[
            (self.tally["entity"] == entity) & (self.tally["account_id"] == account_id)
        ]
        counts = _action_counts(rows)
        counts["held"] = int(rows.loc[rows["reason"].isin(HELD_REASONS), "n"].sum())
        return counts

    def _entity_row(self, entity: Entity) -> dict[str, int]:
        """Per action, then held and quarantined, for one entity (the summary's row)."""
        tally = self.tally[self.tally["entity"] == entity]
        row = _action_counts(tally)
        row["held"] = int(tally.loc[tally["reason"].isin(HELD_REASONS), "n"].sum())
        extracted = self.extracted[self.extracted["entity"] == entity]
        row["quarantined"] = int(extracted["quarantined"].sum())
        row.update(resend_counts(self.changes[self.changes["entity"] == str(entity)]))
        return row

    def units_with_stays_json(self) -> list[dict[str, Any]]:
        return [
            {
                "account_id": str(row.account_id),
                "unit_id": str(row.unit_id),
                "stays": int(row.stays),
                "last_checkout": str(row.last_checkout),
                "released": bool(row.released),
            }
            for row in self.units_with_stays.itertuples(index=False)
        ]

    def to_json_dict(self) -> dict[str, Any]:
        per_entity = {str(entity): self._entity_row(entity) for entity in _ENTITY_ORDER}
        return {
            "counts": self.counts,
            "held": self.held,
            "quarantined": self.quarantined,
            "kept_quarantined": self.kept_quarantined,
            "quarantine": self.quarantine,
            "quarantine_sample": self.quarantine_sample,
            "cancellation_like_statuses": [item.to_json_dict() for item in self.status_findings],
            "status_error": self.status_error,
            "units_with_stays": self.units_with_stays_json(),
            **self.effects_json(),
            "unusable": self.unusable,
            "entities": list(self.entities),
            "reads": [read.to_json_dict() for read in self.reads],
            "requests": self.request_count,
            "resend": self.resends,
            "resend_policy": self.resend.to_json_dict(),
            "carried": self.carried,
            "by_entity": per_entity,
            "by_urgency": self.by_urgency,
            "accounts": self.accounts,
            "connection": self.connection,
            "window": (
                {"start": self.window.start.isoformat(), "end": self.window.end.isoformat()}
                if self.window
                else None
            ),
            "force": {
                "full_resync": self.force.full_resync,
                "only_ids": sorted(self.force.only_ids) if self.force.only_ids else None,
                "only_ids_not_in_export": self.only_ids_not_in_export,
            },
        }

    def summary_table(self) -> str:
        """A fixed-width table: one row per entity, one column per action, held, quarantined;
        and the re-sends of unchanged records (drifted, refresh, reconcile) when there are."""
        columns = [*[str(a) for a in ACTIONS], "held", "quarantined"]
        if self.resend.active or any(self.resends.values()):
            columns += list(RESEND_COLUMNS)
        rows = [["entity", *columns]]
        totals = dict.fromkeys(columns, 0)
        for entity in _ENTITY_ORDER:
            row = self._entity_row(entity)
            rows.append([str(entity), *[str(row[name]) for name in columns]])
            for name in columns:
                totals[name] += row[name]
        rows.append(["total", *[str(totals[name]) for name in columns]])
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = [
            "  ".join(
                cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i])
                for i, cell in enumerate(row)
            )
            for row in rows
        ]
        lines.insert(1, "  ".join("-" * width for width in widths))
        return "\n".join(lines)


def _action_counts(tally: pd.DataFrame) -> dict[str, int]:
    """Per action, the records of ``tally``; quarantined records are counted apart, not as
    skips (the service keeps their old version, it did not confirm the new one)."""
    if not len(tally):
        return {str(action): 0 for action in ACTIONS}
    counted = tally[tally["reason"] != SKIP_REASON_QUARANTINED]
    by_action = counted.groupby("action")["n"].sum()
    return {str(action): int(by_action.get(str(action), 0)) for action in ACTIONS}


def build_plan(
    snapshot: SnapshotStore,
    batches: Mapping[Entity, MappedRecords],
    *,
    policy: ReconcilePolicy | None = None,
    window: DateWindow | None = None,
    force: Force | None = None,
    today: date | None = None,
    urgency: UrgencyPolicy | None = None,
    release_units_with_stays: bool = False,
    resend: ResendOptions | None = None,
    by_checkin: bool = False,
) -> Plan:
    """Decide create / update / skip / deactivate / cancel for every record of the batches.

    A unit the plan would deactivate while guests still stay in it (spec §3, rule 1) is held
    instead, unless ``release_units_with_stays`` (the operator's approval). Records with open
    drift are re-sent with the changes; ``resend`` adds the rolling refresh or a reconciliation
    pass after them (:func:`with_resends`). A run limited by ``--only`` re-sends nothing else.
    """
    policy = policy or ReconcilePolicy()
    force = force or Force()
    today = today or date.today()
    present_accounts: set[str] = set()
    present_ids: set[str] = set()
    for mapped in batches.values():
        # Distinct values first: a nightly run's records are nearly all carried over.
        present_accounts.update(str(account) for account in mapped.records["account_id"].unique())
        if force.only_ids is not None:
            present_ids.update(mapped.records["record_id"].astype(str))
    scope = policy.accounts if policy.accounts is not None else frozenset(present_accounts)

    diffs: dict[Entity, tuple[pd.DataFrame, pd.DataFrame]] = {}
    by_day: list[pd.DataFrame] = []
    extracted: list[pd.DataFrame] = []
    for entity in _ENTITY_ORDER:
        batch = batches.get(entity)
        if batch is None:
            continue
        unidentified, all_unidentified = batch.unidentified_accounts()
        result = snapshot.diff(
            DiffRequest(
                entity=entity,
                records=batch.records,
                scope_accounts=frozenset(scope),
                on_missing=policy.missing_rule(entity),
                window=window if entity == Entity.RESERVATION else None,
                today=today,
                full_resync=force.full_resync,
                only_ids=force.only_ids,
                connection=policy.connection,
                quarantined=batch.quarantined_keys(),
                present_elsewhere=batch.present_elsewhere,
                unidentified_accounts=unidentified,
                all_unidentified=all_unidentified,
                by_checkin=by_checkin and entity == Entity.RESERVATION,
            )
        )
        if not snapshot.read_only:  # the records passed the current contract in this run
            snapshot.mark_validated(entity, batch.records)
        diffs[entity] = (result.changes, result.counts)
        if result.counts_by_checkin is not None:
            by_day.append(result.counts_by_checkin.assign(entity=str(entity)))
        extracted.append(_extracted(entity, batch))

    units_with_stays = _units_with_stays(snapshot, diffs, batches, today)
    if len(units_with_stays):
        units_with_stays["released"] = release_units_with_stays
        if not release_units_with_stays:
            diffs[Entity.ACCOMMODATION] = _hold_units(diffs[Entity.ACCOMMODATION], units_with_stays)

    changes = [_as_changes(entity, diff) for entity, (diff, _) in diffs.items()]
    tallies = [counts.assign(entity=str(entity)) for entity, (_, counts) in diffs.items()]
    change_frame = pd.concat(changes, ignore_index=True) if changes else _empty(CHANGE_COLUMNS)
    tally = (
        pd.concat(tallies, ignore_index=True)
        if tallies
        else _empty(("entity", "account_id", "action", "reason", "n"))
    )
    if force.only_ids is not None:
        ordered, resent = delivery_order(change_frame, today, urgency), ResendSummary()
    else:
        ordered, resent = with_resends(
            snapshot,
            {entity: batches[entity] for entity in diffs},
            change_frame,
            resend or ResendOptions(),
            scope=frozenset(scope),
            connection=policy.connection,
            window=window,
            today=today,
            urgency=urgency,
        )
    reservations = batches.get(Entity.RESERVATION)
    return Plan(
        changes=ordered,
        tally=tally.loc[:, ["entity", "account_id", "action", "reason", "n"]],
        extracted=(
            pd.concat(extracted, ignore_index=True)
            if extracted
            else _empty(("entity", "account_id", "extracted", "quarantined"))
        ),
        window=window,
        force=force,
        only_ids_not_in_export=sorted((force.only_ids or frozenset()) - present_ids),
        connection=policy.connection,
        units_with_stays=units_with_stays,
        entities=tuple(str(entity) for entity in diffs),
        incremental=tuple(str(entity) for entity in diffs if entity in policy.incremental),
        reads=tuple(
            {read.input: read for batch in batches.values() for read in batch.reads}.values()
        ),
        quarantine=quarantine_counts(batches),
        quarantine_sample=quarantine_sample(batches),
        resend=resent,
        carried={str(entity): batch.carried for entity, batch in batches.items()},
        status_findings=status_findings(reservations.quarantine) if reservations else [],
        status_fix=reservations.status_fix if reservations else None,
        tally_by_checkin=(
            pd.concat(by_day, ignore_index=True).loc[:, list(TALLY_BY_CHECKIN_COLUMNS)]
            if by_day
            else None
        ),
    )


QUARANTINE_SAMPLE = 20
"""Quarantine problems a plan or a sync report lists; the rest are counted."""


def quarantine_counts(batches: Mapping[Entity, MappedRecords]) -> dict[str, int]:
    """Problems the mapping quarantined, per entity (rows of unknown external ids included)."""
    return {
        str(entity): len(batch.quarantine) + len(batch.unresolved)
        for entity, batch in batches.items()
    }


def quarantine_sample(batches: Mapping[Entity, MappedRecords]) -> list[dict[str, Any]]:
    """The first quarantine problems (entity, input, rows, field, reason, value)."""
    # The mapping engine already masks sensitive values in the quarantine's ``value`` column.
    # Rows of unknown external ids first: one value there stands for a whole account.
    frames = [
        frame.head(QUARANTINE_SAMPLE)
        for batch in batches.values()
        for frame in (batch.unresolved, batch.quarantine)
        if len(frame)
    ]
    if not frames:
        return []
    sample = pd.concat(frames, ignore_index=True).head(QUARANTINE_SAMPLE)
    return [
        {key: (None if pd.isna(value) else str(value)) for key, value in row.items()}
        for row in sample.to_dict(orient="records")
    ]


def with_resends(
    snapshot: SnapshotStore,
    batches: Mapping[Entity, MappedRecords],
    changes: pd.DataFrame,
    options: ResendOptions,
    *,
    scope: frozenset[str],
    connection: str | None,
    window: DateWindow | None,
    today: date,
    urgency: UrgencyPolicy | None,
) -> tuple[pd.DataFrame, ResendSummary]:
    """The plan's changes in delivery order, with the re-sends of unchanged records.

    Records with open drift join the real changes (the service is known to differ); the
    refresh and the reconciliation come after every one of them, in their own delivery order,
    so a budget spends itself on real changes first.
    """
    horizon = (urgency or UrgencyPolicy()).horizon_days  # "upcoming" means the same here
    found = resend_changes(
        snapshot,
        batches,
        changes,
        replace(options, horizon_days=horizon),
        scope=scope,
        connection=connection,
        window=window,
        today=today,
        columns=CHANGE_COLUMNS[:-1],
    )
    optional = found.rows["reason"].isin(OPTIONAL_REASONS) if len(found.rows) else None
    if optional is None:
        return delivery_order(changes, today, urgency), found.summary
    owed = _concat(changes, found.rows.loc[~optional])
    return (
        _concat(
            delivery_order(owed, today, urgency),
            delivery_order(found.rows.loc[optional], today, urgency),
        ),
        found.summary,
    )


def _concat(first: pd.DataFrame, second: pd.DataFrame) -> pd.DataFrame:
    if not len(second):
        return first.reset_index(drop=True)
    if not len(first):
        return second.reset_index(drop=True)
    return pd.concat([first, second], ignore_index=True)


TALLY_BY_CHECKIN_COLUMNS: tuple[str, ...] = (
    "entity",
    "account_id",
    "action",
    "reason",
    "checkin",
    "n",
)


UNIT_STAYS_COLUMNS: tuple[str, ...] = (
    "account_id",
    "unit_id",
    "stays",  # reservations with a stay in the unit ending today or later
    "last_checkout",
    "released",  # deactivated anyway: the operator approved it
)


def _units_with_stays(
    snapshot: SnapshotStore,
    diffs: Mapping[Entity, tuple[pd.DataFrame, pd.DataFrame]],
    batches: Mapping[Entity, MappedRecords],
    today: date,
) -> pd.DataFrame:
    """Units the plan deactivates that guests still stay in, with their stays (spec §3)."""
    units = diffs.get(Entity.ACCOMMODATION, (_empty(("action",)), None))[0]
    units = units[units["action"] == Action.DEACTIVATE] if len(units) else units
    if not len(units):
        return _empty(UNIT_STAYS_COLUMNS)
    reservations = batches.get(Entity.RESERVATION)
    planned = diffs.get(Entity.RESERVATION, (_empty(("action",)), None))[0]
    cancelled = (
        planned.loc[planned["action"] == Action.CANCEL, ["account_id", "record_id"]]
        if len(planned)
        else _empty(("account_id", "record_id"))
    )
    found = snapshot.unit_stays(
        UnitStaysRequest(
            units=units.loc[:, ["account_id", "record_id"]],
            today=today,
            incoming=reservations.records if reservations is not None else None,
            cancelled=cancelled,
        )
    )
    return found.assign(released=False).loc[:, list(UNIT_STAYS_COLUMNS)]


def _hold_units(
    diff: tuple[pd.DataFrame, pd.DataFrame], held: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The accommodations' diff without the deactivation of ``held`` units, counted as held."""
    changes, counts = diff
    keys = set(zip(held["account_id"], held["unit_id"], strict=True))
    holding = [
        action == Action.DEACTIVATE and (account, record) in keys
        for account, record, action in zip(
            changes["account_id"], changes["record_id"], changes["action"], strict=True
        )
    ]
    holding_mask = pd.Series(holding, index=changes.index, dtype=bool)
    per_account = changes.loc[holding_mask, "account_id"].value_counts()
    counts = counts.copy()
    for account, n in per_account.items():
        deactivations = (
            (counts["account_id"] == account)
            & (counts["action"] == Action.DEACTIVATE)
            & (counts["reason"] == "missing_from_export")
        )
        counts.loc[deactivations, "n"] -= n
    held_rows = pd.DataFrame(
        {
            "account_id": per_account.index.astype(str),
            "action": str(Action.SKIP),
            "reason": SKIP_REASON_UPCOMING_STAYS,
            "n": per_account.to_numpy(),
        }
    )
    counts = pd.concat([counts[counts["n"] > 0], held_rows], ignore_index=True)
    return changes.loc[~holding_mask].reset_index(drop=True), counts


def delivery_order(
    changes: pd.DataFrame, today: date, policy: UrgencyPolicy | None = None
) -> pd.DataFrame:
    """The order of sending: the single place that decides it (classes: connector.plan._urgency).

    Accommodations come before the reservations that reference them. Reservations: stays in
    progress and arrivals within the policy's horizon (and cancellations of stays not yet
    ended) by check-in, soonest first; then other future stays, soonest first; then past
    stays, most recent first. The ``urgency`` column names the class.
    """
    policy = policy or UrgencyPolicy()
    if not len(changes):
        return changes.assign(urgency=pd.Series(dtype="object"))
    frame = changes.copy(deep=False)  # copy-on-write: the sort below is the one copy
    is_unit = frame["entity"] == str(Entity.ACCOMMODATION)
    checkout = pd.to_datetime(frame["checkout"])
    checkin = pd.to_datetime(frame["checkin"])
    start = pd.Timestamp(today)
    not_ended = (~is_unit) & (checkout >= start)
    soon = checkin < start + pd.Timedelta(days=policy.horizon_days + 1)
    cancelling = frame["action"] == Action.CANCEL
    if "payload" in frame:
        cancelling |= documents_containing(frame["payload"], f'"status":"{CANCELLED}"')
    urgent = not_ended & (soon | (cancelling & policy.cancellations_urgent))
    frame["urgency"] = "past"
    frame.loc[not_ended, "urgency"] = "future"
    frame.loc[urgent, "urgency"] = "upcoming"
    frame.loc[is_unit, "urgency"] = "unit"
    rank = frame["urgency"].map({name: i for i, name in enumerate(URGENCY_CLASSES)})
    # Past stays most recent first: sort on the negated check-in (NaT last).
    day = (checkin - start).dt.days.astype("float")
    key = day.where(frame["urgency"] != "past", -day).fillna(float("inf"))
    frame = frame.assign(_rank=rank, _key=key)
    frame = frame.sort_values(["_rank", "_key", "account_id", "record_id"], kind="stable")
    return frame.drop(columns=["_rank", "_key"]).reset_index(drop=True)


def _as_changes(entity: Entity, diff: pd.DataFrame) -> pd.DataFrame:
    if not len(diff):
        return _empty(CHANGE_COLUMNS[:-1])
    # Shallow: copy-on-write copies only a column written below (a first run's documents
    # are large).
    frame = diff.copy(deep=False)
    frame.insert(0, "entity", str(entity))
    frame["event"] = frame["action"].map(lambda action: str(_EVENT_OF_ACTION[action]))
    frame["status_after"] = frame["action"].map(lambda action: str(_STATUS_AFTER_ACTION[action]))
    reconciled = frame["action"].isin([Action.DEACTIVATE, Action.CANCEL])
    if reconciled.any():
        rewritten = [
            _with_status(payload, action)
            for payload, action in zip(
                frame.loc[reconciled, "payload"], frame.loc[reconciled, "action"], strict=True
            )
        ]
        frame.loc[reconciled, "payload"] = [payload for payload, _ in rewritten]
        frame.loc[reconciled, "content_hash"] = [digest for _, digest in rewritten]
    return frame.loc[:, list(CHANGE_COLUMNS[:-1])]


def _with_status(payload: str, action: str) -> tuple[str, str]:
    """The last payload sent, with the status that deactivates or cancels it."""
    resource = json.loads(payload)
    resource["status"] = (
        str(AccommodationStatus.INACTIVE) if action == Action.DEACTIVATE else CANCELLED
    )
    return canonical_json(resource), content_hash(resource)


def extracted_counts(entity: Entity, batch: MappedRecords) -> pd.DataFrame:
    """Per account: the valid and the quarantined records of one entity's batch."""
    return _extracted(entity, batch)


def _extracted(entity: Entity, batch: MappedRecords) -> pd.DataFrame:
    """Per account: valid records, and quarantined records (a record with several problems,
    or a row without a key, counts once; rows without an account count under "")."""
    records = counts_by_text(batch.records["account_id"])
    quarantine = batch.quarantine
    if len(quarantine):
        keyed = quarantine.loc[:, ["account_id", "record_id", "input", "rows"]].copy()
        keyed["account_id"] = keyed["account_id"].fillna("").astype(str)
        # A record is its (account, id); a row without an id is its (input, rows).
        keyed["who"] = keyed["record_id"].where(
            keyed["record_id"].notna() & (keyed["record_id"].astype(str).str.strip() != ""),
            "\x00" + keyed["input"].astype(str) + ":" + keyed["rows"].astype(str),
        )
        quarantined = keyed.drop_duplicates(["account_id", "who"])["account_id"].value_counts()
    else:
        quarantined = pd.Series(dtype="int64")
    accounts = sorted(set(records.index) | set(quarantined.index))
    return pd.DataFrame(
        {
            "entity": str(entity),
            "account_id": accounts,
            "extracted": [int(records.get(a, 0)) for a in accounts],
            "quarantined": [int(quarantined.get(a, 0)) for a in accounts],
        },
        columns=["entity", "account_id", "extracted", "quarantined"],
    )


def _empty(columns: Iterable[str]) -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series(dtype="object") for column in columns})

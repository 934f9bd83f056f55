"""The mass-change guard: the removals of an account that would remove too much are not pushed.

A truncated export, a PMS that exported one hotel instead of two, a filter typo: each reads as
"these records are gone" and would deactivate units or cancel stays by the hundred. Before a
push, per account and entity, the guard compares the plan with the snapshot and the run history:

- **missing**: the deactivations (accommodations) or the cancellations (reservations) trip the
  guard when there are at least ``min_records`` of them (default 3) **and** they are more than
  ``max_missing_share`` of the account's known active records of that entity or more than
  ``max_missing_records`` (defaults 5 % and 50). One villa of five, one room of 19: sent; 40 %
  of 300: held. A record whose rows are in the export but invalid is not missing (it is
  quarantined and kept as acknowledged), so it is never counted here.
- **row drop**: the export's records for the account (valid plus quarantined: an invalid
  record is still a record of the export) trip it when at least ``min_records`` are gone and
  they are more than ``max_row_drop`` fewer than at the last successful run (default 30 %); an
  account of that run with no row at all in this export trips it whatever its size. Skipped
  for reservations of a run limited to a check-in window, whose row count depends on the
  window. A run of some accounts of a connection (Dagster's account partitions) compares each
  of them with its own last successful run; the other accounts are not part of the run.

A rule that trips holds back only the kind of change it is about: the account's deactivations
of that entity or its cancellations (a property deactivation counts as the account's
deactivations). Creates and updates, other entities and other accounts go ahead.
``allow_mass_change`` (CLI ``--allow-mass-change``, Dagster ``sync_checks.allow_mass_change``)
is the approval that sends them; it approves volume only, never the deactivation of a unit or
property guests still stay in (``connector.safety.approvals``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from enum import StrEnum

import pandas as pd

from connector.contract import Entity
from connector.plan import Action, Plan
from connector.records import DateWindow
from connector.snapshot import SnapshotStore

SUCCESSFUL_RUN_STATUSES: frozenset[str] = frozenset({"succeeded", "incomplete", "disagreed"})
"""Runs whose counts are a baseline: they read a full export and pushed it (dry runs,
blocked runs and broken runs are left out, so a truncated export never becomes the baseline)."""

APPROVAL_HINT = (
    "If this is intended, approve it: run again with --allow-mass-change (Dagster: launch the "
    "run with resources.sync_checks.config.allow_mass_change: true)"
)


class MassChangeRule(StrEnum):
    MISSING = "missing"  # deactivations or cancellations against known records
    ROW_DROP = "row_drop"  # export rows against the last successful run


REMOVAL_OF: dict[str, str] = {
    str(Entity.ACCOMMODATION): str(Action.DEACTIVATE),
    str(Entity.RESERVATION): str(Action.CANCEL),
}
"""The kind of change the guard holds back per entity: what a truncated export would send."""


@dataclass(frozen=True)
class GuardRules:
    """Thresholds of the guard; a mapping's ``safety:`` section sets them."""

    max_missing_share: float = 0.05
    max_missing_records: int = 50
    max_row_drop: float = 0.3
    min_records: int = 3  # fewer removals than this never trip: one room of a small hotel

    @classmethod
    def from_mapping(cls, mapping: object) -> GuardRules:
        safety = getattr(mapping, "safety", None)
        if safety is None:
            return cls()
        return cls(
            max_missing_share=safety.max_missing_share,
            max_missing_records=safety.max_missing_records,
            max_row_drop=safety.max_row_drop,
            min_records=safety.min_records,
        )

    def missing_trips(self, missing: int, known: int) -> bool:
        """At least ``min_records``, and more than the share of known records or more than
        the count."""
        if missing <= 0 or missing < self.min_records:
            return False
        return missing > self.max_missing_records or missing > self.max_missing_share * known

    def row_drop_trips(self, rows: int, previous: int) -> bool:
        """More than the share fewer, and at least ``min_records`` fewer unless none is left
        (an account's whole export vanishing is suspicious at any size)."""
        if previous <= 0:
            return False
        dropped = previous - rows
        if dropped < self.min_records and rows > 0:
            return False
        return dropped / previous > self.max_row_drop


@dataclass(frozen=True)
class MassChange:
    """One account and entity over a limit, with the numbers the message names."""

    account_id: str
    entity: str
    rule: MassChangeRule
    count: int  # missing: records to deactivate/cancel; row_drop: records in this export
    base: int  # missing: known active records; row_drop: records at the last successful run
    rules: GuardRules

    @property
    def held_action(self) -> str:
        """The kind of change this finding holds back (deactivate or cancel)."""
        return REMOVAL_OF[self.entity]

    def describe(self) -> str:
        share = self.count / self.base if self.base else 1.0
        if self.rule == MassChangeRule.MISSING:
            verb = "deactivated" if self.entity == Entity.ACCOMMODATION else "cancelled"
            return (
                f"account {self.account_id!r}: {self.count} of {self.base} known "
                f"{self.entity} records would be {verb} ({share:.1%}; limit: at least "
                f"{self.rules.min_records} and more than {self.rules.max_missing_share:.0%} or "
                f"more than {self.rules.max_missing_records} records)"
            )
        drop = 1 - share
        return (
            f"account {self.account_id!r}: the export has {self.count} {self.entity} rows, "
            f"{drop:.1%} fewer than the {self.base} of the last successful run (limit: "
            f"{self.rules.max_row_drop:.0%} fewer)"
        )


@dataclass(frozen=True)
class GuardVerdict:
    changes: tuple[MassChange, ...] = ()
    allowed: bool = False  # approved: pushed anyway

    @property
    def held(self) -> frozenset[tuple[str, str, str]]:
        """(account, entity, action) held back: the kinds of change over a limit."""
        if self.allowed:
            return frozenset()
        return frozenset((c.account_id, c.entity, c.held_action) for c in self.changes)

    @property
    def blocked_accounts(self) -> frozenset[str]:
        """Accounts with a kind of change held back (their other changes are sent)."""
        return frozenset(account for account, _, _ in self.held)

    @property
    def blocked(self) -> bool:
        return bool(self.held)

    def message(self) -> str:
        if not self.changes:
            return ""
        listed = "; ".join(change.describe() for change in self.changes)
        if self.allowed:
            return f"mass change approved (--allow-mass-change): {listed}"
        kinds = ", ".join(
            f"the {entity} {'deactivations' if action == Action.DEACTIVATE else 'cancellations'}"
            f" of account {account!r}"
            for account, entity, action in sorted(self.held)
        )
        return (
            f"mass-change guard: {listed}. Held back: {kinds}; this looks like a truncated "
            f"or partial export. {APPROVAL_HINT}."
        )

    def to_json_dict(self) -> dict[str, object]:
        return {
            "allowed": self.allowed,
            "blocked_accounts": sorted(self.blocked_accounts),
            "held": [
                {"account_id": account, "entity": entity, "action": action}
                for account, entity, action in sorted(self.held)
            ],
            "changes": [
                {
                    "account_id": c.account_id,
                    "entity": c.entity,
                    "rule": str(c.rule),
                    "count": c.count,
                    "base": c.base,
                }
                for c in self.changes
            ],
            "message": self.message(),
        }


def evaluate(
    plan: Plan,
    snapshot: SnapshotStore,
    rules: GuardRules | None = None,
    *,
    allow: bool = False,
    accounts: Collection[str] | None = None,
) -> GuardVerdict:
    """The accounts of the plan over a limit (all of them listed, also when approved).

    ``accounts``: the run covers these accounts of its connection only (a run per account):
    each is compared with its own last successful run, and the connection's other accounts,
    absent from such a run by design, are not read as dropped to zero. None: the run covers
    the connection, and an account of its last successful run with no row now has dropped.
    """
    rules = rules or GuardRules()
    found = _missing(plan, snapshot, rules) + _row_drops(
        plan, snapshot, rules, plan.window, accounts
    )
    found.sort(key=lambda change: (change.account_id, change.entity, str(change.rule)))
    return GuardVerdict(changes=tuple(found), allowed=allow)


def withhold(plan: Plan, held: Collection[tuple[str, str, str]]) -> Plan:
    """The plan without the changes of the held kinds, (account, entity, action) each."""
    if not held or not len(plan.changes):
        return plan
    changes = plan.changes
    kinds = pd.MultiIndex.from_frame(
        changes[["account_id", "entity", "action"]].astype(str), names=None
    )
    keep = ~kinds.isin(list(held))
    return replace(plan, changes=changes.loc[keep].reset_index(drop=True))


def _missing(plan: Plan, snapshot: SnapshotStore, rules: GuardRules) -> list[MassChange]:
    found: list[MassChange] = []
    tally = plan.tally
    if not len(tally):
        return found
    reconciled = tally[tally["action"].isin(["deactivate", "cancel"])]
    for entity, rows in reconciled.groupby("entity"):
        known = snapshot.active_counts(Entity(str(entity)))
        for account, n in rows.groupby("account_id")["n"].sum().items():
            if rules.missing_trips(int(n), known.get(str(account), 0)):
                found.append(
                    MassChange(
                        str(account),
                        str(entity),
                        MassChangeRule.MISSING,
                        int(n),
                        known.get(str(account), 0),
                        rules,
                    )
                )
    return found


def runs_of_connection(runs: pd.DataFrame, connection: str | None) -> pd.DataFrame:
    """The runs of one connection (runs of unnamed library calls when ``connection`` is None)."""
    if runs.empty or "connection" not in runs.columns:
        return runs
    if connection is None:
        return runs[runs["connection"].isna()]
    return runs[runs["connection"] == connection]


def last_successful_rows(snapshot: SnapshotStore, connection: str | None) -> pd.DataFrame:
    """Per (account, entity): rows (extracted + quarantined) of the connection's last successful run."""
    runs = runs_of_connection(snapshot.runs(), connection)
    if runs.empty:
        return pd.DataFrame(columns=["account_id", "entity", "rows"])
    good = runs[runs["status"].isin(SUCCESSFUL_RUN_STATUSES) & ~runs["dry_run"].astype(bool)]
    counts = snapshot.run_counts()
    counts = counts.merge(good[["run_id", "started_at"]], on="run_id")
    if "incremental" in counts:
        # An incremental read's rows are the changed ones: no baseline of the export's size.
        counts = counts[counts["incremental"].fillna(0) == 0]
    if counts.empty:
        return pd.DataFrame(columns=["account_id", "entity", "rows"])
    # A run records counts only for the entities it read: an account with zero rows is one
    # whose export was read empty (an approved removal), and zero is then its baseline.
    counts = counts.assign(rows=counts["extracted"] + counts["quarantined"])
    latest = counts.sort_values("started_at").groupby(["account_id", "entity"]).tail(1)
    return latest.loc[:, ["account_id", "entity", "rows"]].reset_index(drop=True)


def _row_drops(
    plan: Plan,
    snapshot: SnapshotStore,
    rules: GuardRules,
    window: DateWindow | None,
    accounts: Collection[str] | None,
) -> list[MassChange]:
    scope = None if accounts is None else {str(account) for account in accounts}
    previous = {
        (str(a), str(e)): int(r)
        for a, e, r in last_successful_rows(snapshot, plan.connection).itertuples(index=False)
        if scope is None or str(a) in scope
    }
    now = {
        (str(row.account_id), str(row.entity)): int(row.extracted) + int(row.quarantined)
        for row in plan.extracted.itertuples(index=False)
    }
    # An account of the last successful run that has no row at all now dropped to zero.
    for account, entity in previous:
        if entity in plan.entities:
            now.setdefault((account, entity), 0)
    found: list[MassChange] = []
    for (account, entity), rows in sorted(now.items()):
        if window is not None and entity == Entity.RESERVATION:
            continue
        if entity in plan.incremental:
            continue  # the changed rows only: a full read compares the export
        before = previous.get((account, entity), 0)
        if rules.row_drop_trips(rows, before):
            found.append(MassChange(account, entity, MassChangeRule.ROW_DROP, rows, before, rules))
    return found

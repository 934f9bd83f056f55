"""Work a run holds back until an operator approves it, and which approval releases it.

Each risk has its own approval, so approving one never approves the other:

- **mass change** (``--allow-mass-change``, Dagster ``sync_checks.allow_mass_change``): the
  kinds of change the guard holds back (``connector.safety.guard``): volume only.
- **deactivation with stays** (``--allow-deactivation-with-stays``, Dagster
  ``sync_checks.allow_deactivation_with_stays``): units and properties gone from the export
  that guests still stay in (spec §3, rule 1).

A run that holds anything is ``blocked`` (exit 5): completed, work held awaiting an approval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from connector.plan import Plan
from connector.safety.guard import GuardVerdict


class Approval(StrEnum):
    MASS_CHANGE = "mass_change"
    DEACTIVATION_WITH_STAYS = "deactivation_with_stays"

    @property
    def flag(self) -> str:
        """The CLI flag (``sync``; ``apply`` takes ``--allow-mass-change`` too)."""
        return f"--allow-{self.value.replace('_', '-')}"

    @property
    def run_config(self) -> str:
        """The Dagster run config that gives it for one run."""
        return f"resources.sync_checks.config.allow_{self.value}: true"


_NOUN = {"deactivate": "deactivation", "cancel": "cancellation"}


@dataclass(frozen=True)
class HeldWork:
    """Changes of one account and entity (``property``: its one status change) not sent."""

    account_id: str
    entity: str  # accommodation, reservation or property
    action: str  # deactivate or cancel
    records: int  # changes held back this run
    reason: str
    approval: Approval

    def describe(self, dagster: bool = False) -> str:
        how = self.approval.run_config if dagster else self.approval.flag
        return (
            f"account {self.account_id!r}: {self.records} {self.entity} "
            f"{_NOUN.get(self.action, self.action)}(s) held, {self.reason} (approve with {how})"
        )

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "account_id": self.account_id,
            "entity": self.entity,
            "action": self.action,
            "records": self.records,
            "reason": self.reason,
            "approval": str(self.approval),
            "flag": self.approval.flag,
            "dagster_run_config": self.approval.run_config,
        }


def held_by_guard(verdict: GuardVerdict, plan: Plan) -> list[HeldWork]:
    """One item per kind of change the guard held back, counted from the plan."""
    found: list[HeldWork] = []
    tally = plan.tally
    for account, entity, action in sorted(verdict.held):
        if len(tally):
            rows = tally[
                (tally["account_id"] == account)
                & (tally["entity"] == entity)
                & (tally["action"] == action)
            ]
            records = int(rows["n"].sum())
        else:
            records = 0
        why = "; ".join(
            change.describe().removeprefix(f"account {account!r}: ")
            for change in verdict.changes
            if (change.account_id, change.entity) == (account, entity)
        )
        found.append(
            HeldWork(account, entity, action, records, f"mass change: {why}", Approval.MASS_CHANGE)
        )
    return found


def held_for_stays(plan: Plan) -> list[HeldWork]:
    """Per account, the units the plan kept active because guests still stay in them."""
    units = plan.units_with_stays
    if not len(units):
        return []
    held = units[~units["released"].astype(bool)]
    found: list[HeldWork] = []
    for account, rows in held.groupby("account_id", sort=True):
        ids = ", ".join(str(u) for u in rows["unit_id"].head(5))
        more = f" and {len(rows) - 5} more" if len(rows) > 5 else ""
        found.append(
            HeldWork(
                str(account),
                "accommodation",
                "deactivate",
                len(rows),
                f"guests still stay in {ids}{more} until {max(map(str, rows['last_checkout']))}",
                Approval.DEACTIVATION_WITH_STAYS,
            )
        )
    return found


def approval_message(held: Sequence[HeldWork], dagster: bool = False) -> str:
    """What is held and how to approve it, in one paragraph ('' when nothing is)."""
    if not held:
        return ""
    listed = "; ".join(item.describe(dagster) for item in held)
    return (
        f"completed, work held awaiting an approval: {listed}. Everything else was sent. "
        "Approve each risk on its own after checking the export: the mass-change approval "
        "releases volume only, never a unit or property guests still stay in."
    )

"""Work a run holds back until an operator approves it, and which approval releases it.

Each risk has its own approval, so approving one never approves the other:

- **mass change** (``--allow-mass-change``, Dagster ``sync_checks.allow_mass_change``): the
  kinds of change the guard holds back (``connector.safety.guard``): volume only.
- **deactivation with stays** (``--allow-deactivation-with-stays``, Dagster
  ``sync_checks.allow_deactivation_with_stays``): units and properties gone from the export
  that guests still stay in (spec §3, rule 1).

A run that holds anything is ``blocked`` (exit 5): completed, work held awaiting an approval.
The values (``Approval``, ``HeldWork``) are the plan's (``connector.plan``): a plan lists the
work it holds, and ``apply`` of a plan file releases what its approvals allow.
"""

from __future__ import annotations

from collections.abc import Sequence

from connector.plan import Approval, HeldWork, Plan
from connector.safety.guard import GuardVerdict


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


__all__ = ["Approval", "HeldWork", "approval_message", "held_by_guard", "held_for_stays"]

"""The one place that shapes a run's plan: every policy, in one documented order.

``shape_plan`` turns the mapped records into the complete plan, the description of every
effect a run has (docs/cli.md, "What a plan holds"):

1. **diff** (``build_plan``): create, update, skip, deactivate, cancel against the snapshot.
   Records whose answer was lost (possibly stored) are retired like acknowledged ones when
   they leave the export (reason ``possibly_stored_gone``).
2. **stays rule** (in ``build_plan``): a unit gone from the export that guests still stay in
   is held, unless ``release_units_with_stays``.
3. **re-sends and delivery order** (in ``build_plan``): open drift, rolling refresh,
   reconciliation after the real changes, most urgent first.
4. **fingerprint check**: nothing carried over unmapped is sent.
5. **guard**: the kinds of record change over a limit, per account.
6. **properties**: accounts gone from the export are offboarded, returning ones reactivated
   (held for their stays too); an offboarding is a mass change of its account; units pms-sync
   deactivated before are deactivated again after a reactivation with sub-units.
7. **holds**: the work each approval releases (guard, stays, properties).
8. **failed parents**: reservations whose unit was refused before and is not at the service;
   the push holds them back unless the unit is acknowledged first (connector/push/_holdback.py).

What the push decides as it goes is not planned: the budget and the deadline (what is left is
pending for the next run), and holding back reservations whose unit fails in the same run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from connector.accounts import (
    AccountDirectory,
    guard_properties,
    held_properties,
    plan_properties,
    property_effects,
    with_units_kept_inactive,
)
from connector.contract import Entity
from connector.duckdb_memory import memory_named
from connector.errors import SnapshotError
from connector.pipeline._request import SyncRequest
from connector.plan import (
    Action,
    Plan,
    ReconcilePolicy,
    ResendOptions,
    WaitingForUnit,
    build_plan,
)
from connector.push import expected_holdback
from connector.records import MappedRecords
from connector.safety.approvals import held_by_guard, held_for_stays
from connector.safety.guard import GuardVerdict, evaluate
from connector.snapshot import SnapshotStore

DIFF_STEP = "comparing the export with the snapshot (the diff)"


def shape_plan(
    snapshot: SnapshotStore,
    batches: Mapping[Entity, MappedRecords],
    policy: ReconcilePolicy | None,
    request: SyncRequest,
    *,
    directory: AccountDirectory | None,
    passes: Mapping[Entity, Any] | None = None,
) -> tuple[Plan, GuardVerdict]:
    """The run's complete plan and the guard's verdict (the module's docstring: the order)."""
    policy = policy or ReconcilePolicy()
    with memory_named(DIFF_STEP):
        plan = build_plan(
            snapshot,
            batches,
            policy=policy,
            window=request.window,
            force=request.force,
            today=request.today,
            urgency=request.settings.urgency,
            release_units_with_stays=request.release_units_with_stays,
            resend=_resend_options(request, passes),
            by_checkin=request.by_checkin,
        )
    refuse_unmapped_changes(plan)
    verdict = evaluate(
        plan,
        snapshot,
        request.guard,
        allow=request.allow_mass_change,
        # Resolved like the records: account ids, also where the export names external ids.
        accounts=policy.accounts if request.accounts is not None else None,
    )
    if directory is not None:
        plan, verdict = _with_properties(plan, verdict, snapshot, batches, policy, request)
    held = (*held_by_guard(verdict, plan), *held_for_stays(plan))
    return (
        replace(
            plan,
            awaiting_approval=(*held, *plan.awaiting_approval),
            waiting_for_units=_waiting_for_units(plan, snapshot),
        ),
        verdict,
    )


def _waiting_for_units(plan: Plan, snapshot: SnapshotStore) -> tuple[WaitingForUnit, ...]:
    """Step 8: the plan's reservations whose unit the service does not hold."""
    return tuple(
        WaitingForUnit(h.entity, h.account_id, h.record_id, h.action, h.unit_ids, h.reason)
        for h in expected_holdback(plan.changes, snapshot)
    )


def _with_properties(
    plan: Plan,
    verdict: GuardVerdict,
    snapshot: SnapshotStore,
    batches: Mapping[Entity, MappedRecords],
    policy: ReconcilePolicy,
    request: SyncRequest,
) -> tuple[Plan, GuardVerdict]:
    """Step 6: the property changes, guarded, and the units they keep inactive."""
    properties = plan_properties(
        snapshot,
        batches,
        policy,
        request.settings.properties,
        today=request.today,
        release_with_stays=request.release_units_with_stays,
    )
    verdict = guard_properties(verdict, properties, snapshot, request.guard, plan.connection)
    plan = with_units_kept_inactive(plan, snapshot, batches, properties, request.today)
    return (
        replace(
            plan,
            properties=property_effects(properties),
            update_sub_units=properties.update_sub_units,
            properties_left_active=tuple(properties.left_active),
            awaiting_approval=tuple(held_properties(properties)),
        ),
        verdict,
    )


def _resend_options(request: SyncRequest, passes: Mapping[Entity, Any] | None) -> ResendOptions:
    return ResendOptions(
        refresh=request.settings.refresh,
        reconcile_since=(
            {entity: found.started_at for entity, found in passes.items()}
            if passes is not None
            else None
        ),
        horizon_days=request.settings.urgency.horizon_days,
    )


def refuse_unmapped_changes(plan: Plan) -> None:
    """Stop before sending a record carried over by its source fingerprint (no payload).

    Such a record is only carried over while the service holds exactly what it maps to, so
    the diff finds it unchanged. Should anything else have been decided for one (the
    snapshot changed under the run, an external id now names another account), nothing
    is sent: the next run, or ``--remap``, maps it.
    """
    changes = plan.changes
    if not len(changes):
        return
    sending = changes["action"].isin([str(Action.CREATE), str(Action.UPDATE)])
    unmapped = changes.loc[sending & changes["payload"].isna()]
    if len(unmapped):
        sample = ", ".join(
            f"{row.account_id}/{row.record_id}" for row in unmapped.head(5).itertuples()
        )
        raise SnapshotError(
            f"{len(unmapped)} record(s) carried over by source fingerprint would be sent without "
            f"having been mapped ({sample}); the snapshot changed during the run. Run again, "
            "or with --remap to map every record."
        )

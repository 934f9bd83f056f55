"""The plan decided against a real DuckDB snapshot file: what costs a request and what not."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from snapshot_samples import TODAY, acknowledge_all, batches, reservation, unit

from connector.contract import Entity
from connector.errors import SnapshotError
from connector.plan import Force, ReconcilePolicy, build_plan
from connector.records import DateWindow
from connector.snapshot import OnMissing, Refusal, SnapshotStore

CANCEL_FUTURE = ReconcilePolicy(
    on_missing={
        Entity.ACCOMMODATION: OnMissing.DEACTIVATE,
        Entity.RESERVATION: OnMissing.CANCEL_FUTURE,
    }
)


def plan_of(snapshot: SnapshotStore, data, **kwargs):
    return build_plan(snapshot, data, today=TODAY, **kwargs)


def test_records_never_acknowledged_are_created(snapshot: SnapshotStore) -> None:
    plan = plan_of(snapshot, batches([unit("U1"), unit("U2")], [reservation("R1", 3)]))

    assert plan.counts == {"create": 3, "update": 0, "skip": 0, "deactivate": 0, "cancel": 0}
    assert set(plan.changes["event"]) == {"create"}


def test_acknowledged_unchanged_records_are_skipped_without_a_request(
    snapshot: SnapshotStore,
) -> None:
    data = batches([unit("U1")], [reservation("R1", 3)])
    acknowledge_all(snapshot, plan_of(snapshot, data))

    plan = plan_of(snapshot, data)

    assert plan.counts["skip"] == 2
    assert plan.request_count == 0


def test_one_changed_field_is_one_update(snapshot: SnapshotStore) -> None:
    acknowledge_all(snapshot, plan_of(snapshot, batches([unit("U1")], [reservation("R1", 3)])))

    plan = plan_of(
        snapshot, batches([unit("U1")], [reservation("R1", 3, channelName="Booking.com")])
    )

    assert plan.counts == {"create": 0, "update": 1, "skip": 1, "deactivate": 0, "cancel": 0}
    change = plan.changes.iloc[0]
    assert (change.record_id, change.event) == ("R1", "update")
    assert json.loads(change.payload)["channelName"] == "Booking.com"


def test_unit_gone_from_full_export_is_deactivated_once(snapshot: SnapshotStore) -> None:
    acknowledge_all(snapshot, plan_of(snapshot, batches([unit("U1"), unit("U2")])))

    plan = plan_of(snapshot, batches([unit("U1")]))

    assert plan.counts["deactivate"] == 1
    change = plan.changes.iloc[0]
    assert (change.record_id, change.event, change.status_after) == ("U2", "update", "deactivated")
    payload = json.loads(change.payload)
    assert payload["status"] == "INACTIVE"
    assert payload["name"] == "Room U2"  # the last payload sent, only the status changed
    acknowledge_all(snapshot, plan)
    assert plan_of(snapshot, batches([unit("U1")])).request_count == 0


def test_deactivated_unit_that_returns_is_updated_back_to_active(snapshot: SnapshotStore) -> None:
    acknowledge_all(snapshot, plan_of(snapshot, batches([unit("U1"), unit("U2")])))
    acknowledge_all(snapshot, plan_of(snapshot, batches([unit("U1")])))

    plan = plan_of(snapshot, batches([unit("U1"), unit("U2")]))

    assert plan.counts["update"] == 1
    assert json.loads(plan.changes.iloc[0].payload)["status"] == "ACTIVE"


def test_missing_units_are_left_alone_when_policy_ignores_them_or_export_is_partial(
    snapshot: SnapshotStore,
) -> None:
    acknowledge_all(snapshot, plan_of(snapshot, batches([unit("U1"), unit("U2")])))
    ignore = ReconcilePolicy(on_missing={Entity.ACCOMMODATION: OnMissing.IGNORE})
    partial = ReconcilePolicy(full_export={Entity.ACCOMMODATION: False})

    assert plan_of(snapshot, batches([unit("U1")]), policy=ignore).request_count == 0
    assert plan_of(snapshot, batches([unit("U1")]), policy=partial).request_count == 0


def test_accounts_absent_from_the_export_are_not_reconciled(snapshot: SnapshotStore) -> None:
    acknowledge_all(snapshot, plan_of(snapshot, batches([unit("U1")], account="acc-1")))

    plan = plan_of(snapshot, batches([unit("V1")], account="acc-2"))

    assert plan.counts["deactivate"] == 0


def test_missing_future_reservation_is_cancelled_only_with_the_opt_in_policy(
    snapshot: SnapshotStore,
) -> None:
    everything = [reservation("FUTURE", 5), reservation("PAST", -30), reservation("KEPT", 9)]
    acknowledge_all(snapshot, plan_of(snapshot, batches([unit("U1")], everything)))
    remaining = batches([unit("U1")], [reservation("KEPT", 9)])

    assert plan_of(snapshot, remaining).request_count == 0  # default: ignore
    plan = plan_of(snapshot, remaining, policy=CANCEL_FUTURE)

    assert plan.counts["cancel"] == 1
    change = plan.changes.iloc[0]
    assert (change.record_id, change.event) == ("FUTURE", "update")
    assert json.loads(change.payload)["status"] == "CANCELLED"
    acknowledge_all(snapshot, plan)
    assert plan_of(snapshot, remaining, policy=CANCEL_FUTURE).request_count == 0


def test_window_limits_cancellation_to_reservations_checking_in_inside_it(
    snapshot: SnapshotStore,
) -> None:
    data = [reservation("IN", 5), reservation("OUT", 40)]
    acknowledge_all(snapshot, plan_of(snapshot, batches([unit("U1")], data)))
    window = DateWindow(TODAY, TODAY + timedelta(days=30))

    plan = plan_of(snapshot, batches([unit("U1")], []), policy=CANCEL_FUTURE, window=window)

    assert plan.changes["record_id"].tolist() == ["IN"]


def test_dead_lettered_record_is_held_until_its_content_changes_or_forced(
    snapshot: SnapshotStore,
) -> None:
    data = batches([unit("U1")], [reservation("R1", 3)])
    plan = plan_of(snapshot, data)
    refused = plan.changes[plan.changes["record_id"] == "R1"].iloc[0]
    acknowledge_all(snapshot, plan_of(snapshot, batches([unit("U1")])))
    snapshot.record_refusals(
        [Refusal("acc-1", Entity.RESERVATION, "R1", refused.content_hash, 400, "bad", TODAY, "r-1")]
    )

    held = plan_of(snapshot, data)
    changed = plan_of(snapshot, batches([unit("U1")], [reservation("R1", 3, agent="fixed")]))
    forced = plan_of(snapshot, data, force=Force(only_ids=frozenset({"R1"})))

    assert (held.request_count, held.held, held.counts["skip"]) == (0, 1, 2)
    assert changed.changes["record_id"].tolist() == ["R1"]
    assert changed.changes.iloc[0].action == "create"
    assert forced.changes["record_id"].tolist() == ["R1"]


def test_a_refusal_of_the_acknowledged_version_itself_is_reported_not_skipped_silently(
    snapshot: SnapshotStore,
) -> None:
    # Unchanged against what the service acknowledged, yet refused since with that very
    # content: the diff passes it through the full decision (not the unchanged shortcut), so
    # it is counted as held, like any other dead-lettered record.
    data = batches([unit("U1")], [reservation("R1", 3)])
    acknowledge_all(snapshot, plan_of(snapshot, data))
    acknowledged = plan_of(snapshot, data, force=Force(only_ids=frozenset({"R1"})))
    content_hash = acknowledged.changes.iloc[0].content_hash
    snapshot.record_refusals(
        [Refusal("acc-1", Entity.RESERVATION, "R1", content_hash, 400, "bad", TODAY, "r-2")]
    )

    plan = plan_of(snapshot, data)

    assert (plan.request_count, plan.held, plan.counts["skip"]) == (0, 1, 2)
    reasons = plan.tally.set_index("reason")["n"].to_dict()
    assert reasons == {"unchanged": 1, "dead_lettered": 1}


def test_full_resync_resends_every_record_and_only_resends_just_those(
    snapshot: SnapshotStore,
) -> None:
    data = batches([unit("U1"), unit("U2")], [reservation("R1", 3)])
    acknowledge_all(snapshot, plan_of(snapshot, data))

    everything = plan_of(snapshot, data, force=Force(full_resync=True))
    only = plan_of(snapshot, data, force=Force(only_ids=frozenset({"U2", "TYPO"})))

    assert everything.counts["update"] == 3
    assert set(everything.changes["reason"]) == {"forced"}
    assert only.changes["record_id"].tolist() == ["U2"]
    assert only.counts["deactivate"] == 0  # --only never reconciles what it did not select
    assert only.to_json_dict()["force"]["only_ids_not_in_export"] == ["TYPO"]


def test_delivery_order_is_units_then_upcoming_then_future_stays_soonest_first_then_past(
    snapshot: SnapshotStore,
) -> None:
    data = batches(
        [unit("U2"), unit("U1")],
        [
            reservation("LATER", 30),
            reservation("PAST_OLD", -60),
            reservation("SOON", 1),
            reservation("IN_HOUSE", -1),
            reservation("PAST_RECENT", -10),
        ],
    )

    plan = plan_of(snapshot, data)

    assert plan.changes["record_id"].tolist() == [
        "U1",
        "U2",
        "IN_HOUSE",
        "SOON",
        "LATER",
        "PAST_RECENT",
        "PAST_OLD",
    ]
    assert plan.changes["urgency"].tolist()[:3] == ["unit", "unit", "upcoming"]
    assert plan.changes["urgency"].tolist()[3:5] == ["upcoming", "future"]
    assert plan.to_json_dict()["by_urgency"] == {"unit": 2, "upcoming": 2, "future": 1, "past": 2}


def test_plan_prints_as_json_with_counts_per_action_and_as_a_table(
    snapshot: SnapshotStore,
) -> None:
    plan = plan_of(snapshot, batches([unit("U1")], [reservation("R1", 3)]))

    document = json.loads(json.dumps(plan.to_json_dict()))
    table = plan.summary_table()

    assert document["counts"] == {"create": 2, "update": 0, "skip": 0, "deactivate": 0, "cancel": 0}
    assert document["requests"] == 2
    assert table.splitlines()[0].split() == [
        "entity",
        "create",
        "update",
        "skip",
        "deactivate",
        "cancel",
        "held",
        "quarantined",
    ]
    assert table.splitlines()[-1].split() == ["total", "2", "0", "0", "0", "0", "0", "0"]


def test_duplicate_record_ids_in_one_export_are_refused(snapshot: SnapshotStore) -> None:
    data = batches([unit("U1"), unit("U1", name="Other")])

    with pytest.raises(SnapshotError, match="acc-1/U1"):
        plan_of(snapshot, data)


def test_arrivals_beyond_the_horizon_wait_behind_upcoming_ones_but_their_cancellations_do_not(
    snapshot: SnapshotStore,
) -> None:
    from connector.plan import UrgencyPolicy

    data = batches(
        [],
        [
            reservation("FAR", 40),
            reservation("FAR_CANCELLED", 50, status="CANCELLED"),
            reservation("WEEK", 7),
            reservation("PAST", -30),
        ],
    )

    default = plan_of(snapshot, data)
    short = plan_of(snapshot, data, urgency=UrgencyPolicy(horizon_days=3))
    wide = plan_of(snapshot, data, urgency=UrgencyPolicy(horizon_days=60))

    assert default.changes[["record_id", "urgency"]].values.tolist() == [
        ["WEEK", "upcoming"],
        ["FAR_CANCELLED", "upcoming"],
        ["FAR", "future"],
        ["PAST", "past"],
    ]
    assert short.changes["record_id"].tolist() == ["FAR_CANCELLED", "WEEK", "FAR", "PAST"]
    assert wide.by_urgency == {"unit": 0, "upcoming": 3, "future": 0, "past": 1}

"""Re-sends of unchanged records in the plan, decided against a real DuckDB snapshot: the
rolling refresh's choice and order, open drift, and what is never re-sent (docs/drift.md)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pandas as pd
from snapshot_samples import TODAY, batches, reservation, unit

from connector.canonical import canonical_json, content_hash
from connector.contract import Entity
from connector.plan import Force, Plan, ReconcilePolicy, RefreshPolicy, ResendOptions, build_plan
from connector.records import QUARANTINE_COLUMNS, MappedRecords
from connector.snapshot import (
    Acknowledgement,
    DriftEvent,
    RecordStatus,
    RunRecord,
    SnapshotStore,
    acknowledgement_table,
)

RUN_A = datetime(2026, 6, 1, 2, 0)
RUN_B = datetime(2026, 6, 8, 2, 0)


def acknowledge(
    snapshot: SnapshotStore,
    entity: Entity,
    resources: list[dict],
    at: datetime,
    status: RecordStatus = RecordStatus.ACTIVE,
) -> None:
    """What a run starting just before ``at`` recorded for these resources (one second apart)."""
    acks = []
    for n, resource in enumerate(resources):
        units = resource.get("unitReservations") or []
        acks.append(
            Acknowledgement(
                account_id="acc-1",
                entity=entity,
                record_id=resource["id"],
                content_hash=content_hash(resource),
                payload=canonical_json(resource),
                checkin=pd.Timestamp(units[0]["checkin"]).date() if units else None,
                checkout=pd.Timestamp(units[0]["checkout"]).date() if units else None,
                status=status,
                acknowledged_at=at + timedelta(seconds=n + 1),
                request_id=None,
            )
        )
    snapshot.record_acknowledgements(acknowledgement_table(acks))


def record_run(snapshot: SnapshotStore, started: datetime) -> None:
    snapshot.record_run(
        RunRecord(
            run_id=started.isoformat(),
            mapping="m",
            accounts=("acc-1",),
            started_at=started,
            finished_at=started + timedelta(minutes=5),
            dry_run=False,
            requests=0,
            status="succeeded",
        )
    )


def planned(snapshot: SnapshotStore, data, share: float = 0.0, **kwargs) -> Plan:
    return build_plan(
        snapshot,
        data,
        today=TODAY,
        resend=ResendOptions(refresh=RefreshPolicy(share=share)),
        **kwargs,
    )


def refreshed(plan: Plan) -> list[str]:
    rows = plan.changes[plan.changes["reason"] == "refresh"]
    return rows["record_id"].tolist()


def test_the_refresh_takes_the_oldest_run_first_and_within_it_arrivals_soonest_first(
    snapshot: SnapshotStore,
) -> None:
    far, soon, later, past = (
        reservation("FAR", 90),
        reservation("SOON", 2),
        reservation("LATER", 30),
        reservation("PAST", -20),
    )
    newest = reservation("NEWEST", 1)
    record_run(snapshot, RUN_A)
    acknowledge(snapshot, Entity.RESERVATION, [far, later, soon, past], RUN_A)
    record_run(snapshot, RUN_B)
    acknowledge(snapshot, Entity.RESERVATION, [newest], RUN_B)
    data = batches([], [far, soon, later, past, newest])

    half = planned(snapshot, data, share=0.5)
    everything = planned(snapshot, data, share=1.0)

    # Past stays are not eligible: 4 records, half of them re-sent.
    assert half.resend.eligible == {"accommodation": 0, "reservation": 4}
    assert refreshed(half) == ["SOON", "LATER"]
    # Sent in delivery order: the newest run's arrival tomorrow goes first.
    assert refreshed(everything) == ["NEWEST", "SOON", "LATER", "FAR"]
    assert everything.counts == {"create": 0, "update": 0, "skip": 5, "deactivate": 0, "cancel": 0}


def test_only_records_the_service_holds_in_the_version_a_run_would_send_are_refreshed(
    snapshot: SnapshotStore,
) -> None:
    kept, invalid, changed = unit("KEPT"), unit("INVALID"), unit("CHANGED")
    stay = reservation("LEFT_ALONE", 5)  # gone from the export, reservations are left alone
    acknowledge(snapshot, Entity.ACCOMMODATION, [kept, invalid, changed], RUN_A)
    acknowledge(
        snapshot,
        Entity.ACCOMMODATION,
        [unit("GONE", status="INACTIVE")],
        RUN_A,
        RecordStatus.DEACTIVATED,
    )
    acknowledge(snapshot, Entity.RESERVATION, [stay], RUN_A)
    data = batches([kept, unit("CHANGED", name="Renamed")], [])
    data[Entity.ACCOMMODATION] = _with_quarantined(data[Entity.ACCOMMODATION], "INVALID")

    plan = planned(snapshot, data, share=1.0, policy=ReconcilePolicy(connection=None))

    rows = plan.changes.set_index("record_id")
    assert rows["reason"].to_dict() == {"CHANGED": "changed", "KEPT": "refresh", "GONE": "refresh"}
    assert json.loads(rows.loc["GONE", "payload"])["status"] == "INACTIVE"
    assert rows.loc["GONE", "status_after"] == "deactivated"


def test_the_plan_shows_re_sends_apart_from_real_changes(snapshot: SnapshotStore) -> None:
    units = [unit("U1"), unit("U2")]
    acknowledge(snapshot, Entity.ACCOMMODATION, units, RUN_A)

    plan = planned(snapshot, batches(units, []), share=0.5)
    document = json.loads(json.dumps(plan.to_json_dict(), default=str))
    header, *_, total = plan.summary_table().splitlines()

    assert document["counts"]["skip"] == 2 and document["counts"]["update"] == 0
    assert document["resend"] == {"drifted": 0, "reconcile": 0, "refresh": 1}
    assert document["requests"] == 1
    assert document["by_entity"]["accommodation"]["refresh"] == 1
    assert document["resend_policy"]["refresh"]["share"] == 0.5
    assert header.split()[-3:] == ["drifted", "refresh", "reconcile"]
    assert total.split()[-3:] == ["0", "1", "0"]


def test_open_drift_is_re_sent_with_the_real_changes_ahead_of_the_refresh(
    snapshot: SnapshotStore,
) -> None:
    units = [unit("U1"), unit("U2"), unit("U3")]
    acknowledge(snapshot, Entity.ACCOMMODATION, units, RUN_A)
    snapshot.record_drift(
        [
            DriftEvent(
                "acc-1",
                Entity.ACCOMMODATION,
                "U3",
                "unaccounted",
                "counts of 2 records",
                None,
                RUN_B,
                healed=False,
            )
        ]
    )
    data = batches([unit("U1", name="New name"), units[1], units[2]], [])

    plan = planned(snapshot, data, share=1.0)
    only = planned(snapshot, data, share=1.0, force=Force(only_ids=frozenset({"U1"})))

    assert list(zip(plan.changes["record_id"], plan.changes["reason"], strict=True)) == [
        ("U1", "changed"),
        ("U3", "drifted"),
        ("U2", "refresh"),
    ]
    assert only.changes["record_id"].tolist() == ["U1"]


def test_a_reconciliation_re_sends_every_record_acknowledged_before_its_pass_started(
    snapshot: SnapshotStore,
) -> None:
    record_run(snapshot, RUN_A)
    acknowledge(
        snapshot, Entity.RESERVATION, [reservation("OLD", 10), reservation("PAST", -30)], RUN_A
    )
    acknowledge(snapshot, Entity.RESERVATION, [reservation("NEW", 12)], RUN_B)
    data = batches([], [reservation("OLD", 10), reservation("PAST", -30), reservation("NEW", 12)])

    plan = build_plan(
        snapshot,
        data,
        today=TODAY,
        resend=ResendOptions(
            refresh=RefreshPolicy(share=1.0),
            reconcile_since={Entity.RESERVATION: RUN_B, Entity.ACCOMMODATION: RUN_B},
        ),
    )

    # Past stays too; the record acknowledged since the pass started is done.
    assert sorted(plan.changes["record_id"]) == ["OLD", "PAST"]
    assert set(plan.changes["reason"]) == {"reconcile"}


def _with_quarantined(batch: MappedRecords, record_id: str) -> MappedRecords:
    row = dict.fromkeys(QUARANTINE_COLUMNS, "")
    row |= {"entity": "accommodation", "account_id": "acc-1", "record_id": record_id}
    row |= {"input": "units", "rows": "3", "field": "country", "reason": "not an ISO code"}
    batch.quarantine = pd.DataFrame([row], columns=list(QUARANTINE_COLUMNS))
    return batch

"""The two snapshot backends agree: the same operations on a DuckDB file and on a PostgreSQL
schema give identical outcomes (values, columns, dtypes), attempt counts included.

Each scenario runs once per backend and returns what the store answered; the test asserts
both answers are equal and checks what they say.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from snapshot_samples import TODAY, acknowledge_all, batches, reservation, unit

from connector.contract import CONTRACT_FINGERPRINT, Entity
from connector.cursors import CursorKind, CursorValue
from connector.plan import ReconcilePolicy, build_plan
from connector.snapshot import (
    Acknowledgement,
    DiffRequest,
    DiscoveredAccount,
    DriftEvent,
    GuestLinkRecord,
    IncomingEvent,
    OnMissing,
    PossiblyStored,
    PropertyState,
    PropertyStatusRecord,
    RecordStatus,
    Refusal,
    ResendRequest,
    RunCounts,
    RunRecord,
    Snapshot,
    SnapshotStore,
    StoredCursor,
    UnitStaysRequest,
    acknowledgement_table,
)

AT = datetime(2026, 6, 1, 8)
R = Entity.RESERVATION
A = Entity.ACCOMMODATION

Scenario = Callable[[SnapshotStore], dict[str, Any]]


@pytest.fixture
def on_both(tmp_path: Path, postgres_snapshot_url: str) -> Callable[[Scenario], dict[str, Any]]:
    """Runs a scenario on a fresh DuckDB file and a fresh PostgreSQL schema; returns the one
    outcome both gave (the test fails when they differ)."""

    def run(scenario: Scenario) -> dict[str, Any]:
        found: dict[str, dict[str, Any]] = {}
        for backend, location in (
            ("duckdb", tmp_path / "state" / "snapshot.duckdb"),
            ("postgresql", postgres_snapshot_url),
        ):
            with Snapshot.open(location) as store:
                found[backend] = scenario(store)
        assert found["duckdb"].keys() == found["postgresql"].keys()
        differ = {
            key: (found["duckdb"][key], found["postgresql"][key])
            for key in found["duckdb"]
            if found["duckdb"][key] != found["postgresql"][key]
        }
        assert not differ, "\n".join(
            f"{key}:\n  duckdb     {left!r}\n  postgresql {right!r}"
            for key, (left, right) in differ.items()
        )
        return found["duckdb"]

    return run


_TEXT = {"str": "text", "string": "text", "object": "text"}
"""Text columns: DuckDB hands pandas' string dtype, PostgreSQL object; both hold str."""


def shown(frame: pd.DataFrame) -> tuple[list[str], list[str], list[tuple[Any, ...]]]:
    """A frame as comparable values: column names, dtypes, rows (missing values as None)."""
    values = frame.astype(object).where(frame.notna(), None)
    return (
        [str(c) for c in frame.columns],
        [_TEXT.get(str(t), str(t)) for t in frame.dtypes],
        [tuple(row) for row in values.itertuples(index=False)],
    )


def ack(
    record_id: str,
    content_hash: str,
    *,
    entity: Entity = R,
    account: str = "acc-1",
    status: RecordStatus = RecordStatus.ACTIVE,
    payload: str | None = None,
    connection: str | None = "hotel",
    at: datetime = AT,
    checkin: date | None = date(2026, 6, 20),
) -> Acknowledgement:
    return Acknowledgement(
        account_id=account,
        entity=entity,
        record_id=record_id,
        content_hash=content_hash,
        payload=payload or f'{{"id":"{record_id}","v":"{content_hash}"}}',
        checkin=checkin,
        checkout=None if checkin is None else checkin + timedelta(days=3),
        status=status,
        acknowledged_at=at,
        request_id=f"req-{record_id}",
        connection=connection,
    )


def refusal(record_id: str, seen: datetime, message: str = "bad") -> Refusal:
    return Refusal("acc-1", R, record_id, f"h-{record_id}", 400, message, seen, "req")


# -- dead letters ---------------------------------------------------------------------------


def test_a_record_refused_twice_in_one_batch_counts_two_attempts(
    on_both: Callable[[Scenario], dict[str, Any]],
) -> None:
    # Each refusal is one request the service refused: two in one commit are two attempts,
    # as two commits of one each are (the push's batching must not change the count).
    def scenario(store: SnapshotStore) -> dict[str, Any]:
        later = AT + timedelta(minutes=1)
        store.record_refusals([refusal("R1", AT, "first"), refusal("R1", later, "second")])
        store.record_refusals([refusal("R2", AT)])
        store.record_refusals([refusal("R2", later)])
        store.record_refusals([refusal("R1", later + timedelta(minutes=1), "third")])
        return {
            "letters": shown(store.dead_letters()),
            "unacknowledged": shown(store.unacknowledged_dead_letters(R)),
        }

    found = on_both(scenario)
    columns, _, rows = found["letters"]
    letters = {row[columns.index("record_id")]: row for row in rows}
    attempts = columns.index("attempts")
    assert (letters["R1"][attempts], letters["R2"][attempts]) == (3, 2)
    assert letters["R1"][columns.index("message")] == "third"
    assert letters["R1"][columns.index("first_seen")] == AT


# -- acknowledgements, possibly stored, adoption ------------------------------------------


def test_acknowledgements_and_possibly_stored_changes(
    on_both: Callable[[Scenario], dict[str, Any]],
) -> None:
    def scenario(store: SnapshotStore) -> dict[str, Any]:
        def maybe(record_id: str, digest: str, in_flight: str | None = None) -> PossiblyStored:
            return PossiblyStored(
                "acc-1", R, record_id, digest, None, AT, "{}", None, None, "active", "hotel",
                in_flight,
            )  # fmt: skip

        store.record_refusals([refusal("R1", AT)])
        store.record_possibly_stored([maybe("R2", "a"), maybe("R2", "b"), maybe("R3", "c")])
        store.mark_in_flight([maybe("R3", "x", "push-1"), maybe("R4", "d", "push-1")])
        store.mark_in_flight([maybe("R5", "e", "push-1"), maybe("R6", "f", "push-1")])
        store.clear_in_flight("push-1", {("acc-1", "reservation", "R6")})
        before = store.possibly_stored()
        store.record_acknowledgements(
            acknowledgement_table(
                [
                    ack("R1", "stale"),
                    ack("R2", "h2"),
                    ack("R1", "h1"),
                    ack("U1", "u1", entity=A, checkin=None),
                    ack("U2", "u2", entity=A, checkin=None, status=RecordStatus.DEACTIVATED),
                ]
            )
        )
        store.record_acknowledgements(acknowledgement_table([ack("R7", "h7", connection=None)]))
        empty, held = store.fingerprint(["acc-2"]), store.fingerprint(["acc-1", "acc-2"])
        adopted = store.adopt(
            R, pd.DataFrame({"account_id": ["acc-1"] * 3, "record_id": ["R1", "R7", "R9"]}), "spa"
        )
        return {
            "possibly_before": sorted(before.items()),
            "possibly_after": sorted(store.possibly_stored().items()),
            "letters": shown(store.dead_letters()),
            "acknowledged": shown(store.acknowledged().drop(columns=["validated_with"])),
            "reservations": shown(store.acknowledged(R).drop(columns=["validated_with"])),
            "adopted": adopted,
            "fingerprint_empty": empty,
            # The hash sums differ by design (each backend its own hash): a plan is applied
            # against the backend it was made on. The counts agree.
            "fingerprint_counts": held.split("-")[0::2],
            "status": [store.status_of("acc-1", A, "U2"), store.status_of("acc-1", A, "U9")],
            "active": store.active_counts(A),
            "payloads": sorted(store.payloads_of(R, [("acc-1", "R1"), ("acc-1", "R9")]).items()),
            "of_connection": shown(store.accounts_of_connection("hotel")),
            "deactivated": shown(store.deactivated_units(["acc-1"])),
            "stays": shown(store.account_stays(["acc-1"], date(2026, 6, 1))),
        }

    found = on_both(scenario)
    assert found["possibly_before"] == [
        (("acc-1", "reservation", "R2"), "b"),
        (("acc-1", "reservation", "R3"), "c"),
        (("acc-1", "reservation", "R6"), "f"),
    ]
    assert found["possibly_after"] == [
        (("acc-1", "reservation", "R3"), "c"),
        found["possibly_before"][2],
    ]
    assert found["letters"][2] == []
    assert found["adopted"] == 2
    assert found["fingerprint_empty"] == "0-0-0-0"
    assert found["fingerprint_counts"] == ["5", "0"]
    assert found["payloads"] == [(("acc-1", "R1"), '{"id":"R1","v":"h1"}')]
    assert found["status"] == [RecordStatus.DEACTIVATED, None]
    assert found["active"] == {"acc-1": 1}


# -- the plan: diff, stays in units, re-sends, drift ----------------------------------------


def test_plans_and_what_they_mark_valid(
    on_both: Callable[[Scenario], dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = batches([unit("U1"), unit("U2"), unit("U3")], [reservation("B1", 2)])
    second = batches(
        [unit("U1"), unit("U2", name="Renamed"), unit("U4")],
        [reservation("B2", 5)],
    )
    policy = ReconcilePolicy(on_missing={A: OnMissing.DEACTIVATE, R: OnMissing.CANCEL_FUTURE})

    def scenario(store: SnapshotStore) -> dict[str, Any]:
        # Acknowledged under an older contract: the second plan's diff sees U1 and B1's
        # payloads pass the current one (U2 changed, U3 left the export).
        with monkeypatch.context() as patched:
            older_contract(patched)
            acknowledge_all(store, build_plan(store, first, today=TODAY, policy=policy))
        plan = build_plan(store, second, today=TODAY, policy=policy, by_checkin=True)
        stays = store.unit_stays(
            UnitStaysRequest(
                units=pd.DataFrame({"account_id": ["acc-1"], "record_id": ["U1"]}),
                today=TODAY,
            )
        )
        changes = plan.changes.drop(columns=["position"], errors="ignore")
        return {
            "changes": shown(changes),
            "tally": shown(plan.tally),
            "stays": shown(stays),
            "validated": shown(
                store.acknowledged().loc[:, ["record_id", "payload_md5", "validated_with"]]
            ),
        }

    found = on_both(scenario)
    columns, _, rows = found["changes"]
    actions = {(row[columns.index("record_id")], row[columns.index("action")]) for row in rows}
    assert {("U2", "update"), ("U4", "create"), ("B2", "create"), ("B1", "cancel")} <= actions
    assert ("U3", "deactivate") in actions
    columns, _, rows = found["validated"]
    valid = {row[0] for row in rows if row[2] == CONTRACT_FINGERPRINT}
    assert valid == {"U1"}


def test_the_diff_writes_nothing_and_marking_valid_is_a_write_of_its_own(
    on_both: Callable[[Scenario], dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    mapped = batches([unit("U1"), unit("U2")])[A].records

    def scenario(store: SnapshotStore) -> dict[str, Any]:
        with monkeypatch.context() as patched:
            older_contract(patched)
            acknowledge_all(store, build_plan(store, {A: batches([unit("U1")])[A]}, today=TODAY))
        store.diff(DiffRequest(entity=A, records=mapped, scope_accounts=frozenset({"acc-1"})))
        after_diff = store.acknowledged()["validated_with"].tolist()
        store.mark_validated(A, mapped)
        return {
            "after_diff": after_diff,
            "after_mark": store.acknowledged()["validated_with"].tolist(),
        }

    found = on_both(scenario)
    assert found == {"after_diff": ["an-older-contract"], "after_mark": [CONTRACT_FINGERPRINT]}


def older_contract(patched: pytest.MonkeyPatch) -> None:
    """Acknowledgements made from now on record an older contract than the current one."""
    for module in list(sys.modules.values()):
        if module.__name__.startswith("connector.snapshot") and hasattr(
            module, "CONTRACT_FINGERPRINT"
        ):
            patched.setattr(module, "CONTRACT_FINGERPRINT", "an-older-contract")


def test_resends_drift_and_reconciliation_passes(
    on_both: Callable[[Scenario], dict[str, Any]],
) -> None:
    def scenario(store: SnapshotStore) -> dict[str, Any]:
        store.record_acknowledgements(
            acknowledgement_table(
                [ack(f"R{n}", f"h{n}", at=AT + timedelta(seconds=n)) for n in range(1, 6)]
            )
        )
        store.record_run(
            RunRecord(
                "run-1", "hotel", ("acc-1",), AT - timedelta(minutes=1), AT + timedelta(minutes=1),
                False, 5, "succeeded", (RunCounts("acc-1", R, extracted=5, create=5),), "hotel",
            )
        )  # fmt: skip
        store.record_drift(
            [
                DriftEvent("acc-1", R, "R2", "lost_update", "d", "req", AT, False),
                DriftEvent("acc-1", R, "R3", "lost_update", "d", "req", AT, False),
                DriftEvent("acc-1", R, "R4", "lost_update", "d", "req", AT, True),
            ]
        )
        store.record_drift([DriftEvent("acc-1", R, "R3", None, "", "req", AT, False)])
        started = store.start_reconciliation("hotel", R, AT)
        unfinished = store.reconciliation_pass("hotel", R)
        store.finish_reconciliation(started, AT + timedelta(hours=1))
        records = store.acknowledged(R).loc[:, ["account_id", "record_id", "payload",
                                                "content_hash", "checkin", "checkout"]]  # fmt: skip
        result = store.resend(
            ResendRequest(
                entity=R,
                records=records.assign(source_rows=""),
                present_elsewhere=pd.DataFrame(columns=["account_id", "record_id"]),
                sending=pd.DataFrame({"account_id": ["acc-1"], "record_id": ["R5"]}),
                scope_accounts=frozenset({"acc-1"}),
                connection="hotel",
                today=date(2026, 6, 1),
                refresh_share=0.5,
            )
        )
        return {
            "open_drift": shown(store.open_drift()),
            "open_drift_r": shown(store.open_drift(R)),
            "unfinished": unfinished,
            "pass": store.reconciliation_pass("hotel", R),
            "none": store.reconciliation_pass(None, R),
            "resend": shown(result.rows),
            "eligible": result.eligible,
            "runs": shown(store.runs()),
            "run_counts": shown(store.run_counts()),
            "run_counts_1": shown(store.run_counts("run-1")),
        }

    found = on_both(scenario)
    columns, _, rows = found["resend"]
    reasons = [(row[columns.index("record_id")], row[columns.index("reason")]) for row in rows]
    assert reasons[0] == ("R2", "drifted")
    assert found["eligible"] == 5
    assert found["pass"].finished_at == AT + timedelta(hours=1)
    assert found["unfinished"].finished_at is None


# -- the rate-limit log, the Open API, guest links, events, fingerprints --------------------


def test_limiter_accounts_links_events_and_fingerprints(
    on_both: Callable[[Scenario], dict[str, Any]],
) -> None:
    def scenario(store: SnapshotStore) -> dict[str, Any]:
        store.save_limiter_history("svc", [3.0, 1.5])
        store.save_limiter_history("svc", [1.0, 2.0])
        accounts = [
            DiscoveredAccount("ext-1", "acc-1", "Hotel", "tok-1", 100.0, 10.0),
            DiscoveredAccount("ext-2", "acc-2", "Inn", "tok-2", 200.0, 20.0),
        ]
        store.save_discovered_accounts("client", accounts)
        store.save_discovered_accounts("client", [accounts[0]])
        store.forget_discovered_accounts("client", {"ext-2"})
        store.record_property_statuses(
            [PropertyStatusRecord("acc-1", PropertyState.INACTIVE, True, AT, "req", "hotel")]
        )
        store.record_acknowledgements(
            acknowledgement_table([ack("R1", "h1"), ack("R2", "h2", checkin=date(2026, 6, 25))])
        )
        link = GuestLinkRecord(
            "acc-1", "R1", "hotel", date(2026, 6, 20), "app", "chat", "check-in", AT,
            message_has_attachment=False,
        )  # fmt: skip
        store.save_guest_links([link])
        store.save_guest_links([link, link])
        fresh = store.record_events(
            [
                IncomingEvent("hotel", "k1", "acc-1", "created", "{}", AT),
                IncomingEvent("hotel", "k1", "acc-1", "created", "{}", AT + timedelta(seconds=1)),
                IncomingEvent("", "k2", None, "deleted", "{}", AT),
            ]
        )
        mapped = pd.DataFrame(
            {
                "source_account": ["BER", "BER", "BER"],
                "account_id": ["acc-1", "acc-1", "acc-1"],
                "record_id": ["R1", "R2", "R3"],
                "fingerprint": [11, 22, 33],
                "content_hash": ["h1", "other", "h3"],
            }
        )
        kept = store.record_fingerprints("hotel", R, "m1", mapped)
        stored = store.stored_fingerprints("hotel", R, "m1")
        return {
            "limiter": store.limiter_history("svc"),
            "limiter_none": store.limiter_history("other"),
            "discovered": store.discovered_accounts("client"),
            "statuses": store.property_statuses(),
            "candidates": shown(store.link_candidates("hotel", date(2026, 6, 1), date(2026, 7, 1))),
            "links": shown(store.guest_links("hotel")),
            "links_window": shown(store.guest_links("hotel", date(2026, 6, 21), None)),
            "fresh": fresh,
            "events": shown(store.received_events()),
            "events_hotel": shown(store.received_events("hotel", after_seq=0, upto_seq=5)),
            "last_seq": [store.last_event_seq(), store.last_event_seq("")],
            "kept": kept,
            "stored": shown(stored.to_pandas()),
            "stored_schema": str(stored.schema),
        }

    found = on_both(scenario)
    assert found["limiter"] == [1.0, 2.0]
    assert [a.external_id for a in found["discovered"]] == ["ext-1"]
    assert found["fresh"] == [True, False, True]
    # A redelivery takes the next seq too (the order of the last delivery).
    assert found["last_seq"] == [3, 3]
    assert found["kept"] == 1


def test_source_cursors_round_trip_and_keep_what_a_read_did_not_find(
    on_both: Callable[[Scenario], dict[str, Any]],
) -> None:
    stamp = CursorValue("2026-05-31 23:59:59.123456", CursorKind.TIMESTAMP)
    later = CursorValue("2026-06-01 07:00:00", CursorKind.TIMESTAMP)

    def scenario(store: SnapshotStore) -> dict[str, Any]:
        scope = "entities=reservation"
        full = StoredCursor("stays", scope, stamp, AT, AT)
        store.save_source_cursors("hotel", [full, StoredCursor("units", scope, None, AT, AT)])
        # An incremental read that found no row keeps the value and the full read's time.
        store.save_source_cursors(
            "hotel", [StoredCursor("stays", scope, None, None, AT + timedelta(hours=1))]
        )
        after_empty = store.source_cursors("hotel")[("stays", scope)]
        store.save_source_cursors(
            "hotel", [StoredCursor("stays", scope, later, None, AT + timedelta(hours=2))]
        )
        found = store.source_cursors("hotel")
        return {
            "after_empty": (after_empty.value, after_empty.full_read_at),
            "stays": (found[("stays", scope)].value, found[("stays", scope)].full_read_at),
            "units": (found[("units", scope)].value, found[("units", scope)].full_read_at),
            "other connection": store.source_cursors("apartments"),
        }

    found = on_both(scenario)
    assert found == {
        "after_empty": (stamp, AT),
        "stays": (later, AT),
        "units": (None, AT),
        "other connection": {},
    }


def test_event_write_cursors_move_forward_per_connection_and_destination(
    on_both: Callable[[Scenario], dict[str, Any]],
) -> None:
    def scenario(store: SnapshotStore) -> dict[str, Any]:
        store.advance_event_write_cursors("hotel", {"table": 5, "file": 2}, AT)
        # A writer that started earlier and finishes later never moves a cursor back.
        store.advance_event_write_cursors("hotel", {"table": 3, "file": 4}, AT)
        store.advance_event_write_cursors("apartments", {"table": 1}, AT)
        store.advance_event_write_cursors("hotel", {}, AT)
        return {
            "hotel": store.event_write_cursors("hotel"),
            "apartments": store.event_write_cursors("apartments"),
            "none": store.event_write_cursors("nobody"),
        }

    found = on_both(scenario)
    assert found == {"hotel": {"table": 5, "file": 4}, "apartments": {"table": 1}, "none": {}}

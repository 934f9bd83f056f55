"""Parent-failure holdback: a reservation is not sent while its unit is not at the service.

A reservation references its units (``unitReservations[].unitId``). When a unit was refused or
failed in this run, or was refused in an earlier run and never acknowledged, the service would
refuse the reservation too, and the refusal would dead-letter a record that is fine. Such a
reservation is held back instead: not sent, reported with the reason and counted as ``held``.
It is not recorded anywhere as refused, so the next run plans it again and sends it as soon as
its unit is acknowledged (in that run's unit phase, before any reservation goes).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd

from connector.contract import Entity
from connector.snapshot import SnapshotStore


@dataclass(frozen=True)
class HeldRecord:
    """A change not sent because a unit it references is not at the service."""

    entity: str
    account_id: str
    record_id: str
    action: str
    unit_ids: tuple[str, ...]
    reason: str


@dataclass
class UnitTrouble:
    """Units of this run's accounts that the service does not (reliably) hold, with why."""

    reasons: dict[tuple[str, str], str] = field(default_factory=dict)  # (account, unit) -> why

    @classmethod
    def from_dead_letters(cls, letters: Iterable[tuple[str, str, int, str]]) -> UnitTrouble:
        """(account, unit id, HTTP status, message) of units refused and never acknowledged."""
        trouble = cls()
        for account, unit, status, message in letters:
            trouble.reasons[(str(account), str(unit))] = (
                f"unit {unit} was refused in an earlier run (HTTP {status}: {message}) and the "
                f"service does not hold it"
            )
        return trouble

    @classmethod
    def from_snapshot(cls, snapshot: SnapshotStore) -> UnitTrouble:
        letters = snapshot.unacknowledged_dead_letters(Entity.ACCOMMODATION)
        return cls.from_dead_letters(letters.itertuples(index=False, name=None))

    def add(self, account: str, unit: str, outcome: str, http_status: int | None) -> None:
        status = f"HTTP {http_status}" if http_status else "no answer"
        self.reasons[(account, unit)] = f"unit {unit} was {outcome} in this run ({status})"

    def resolve(self, account: str, unit: str) -> None:
        self.reasons.pop((account, unit), None)

    def reason_for(self, account: str, payload: str) -> tuple[tuple[str, ...], str] | None:
        """The troubled units a reservation payload references and the reason, or None."""
        if not self.reasons:
            return None
        units = [
            str(item.get("unitId"))
            for item in json.loads(payload).get("unitReservations") or []
            if item.get("unitId") is not None
        ]
        troubled = tuple(unit for unit in dict.fromkeys(units) if (account, unit) in self.reasons)
        if not troubled:
            return None
        return troubled, "; ".join(self.reasons[(account, unit)] for unit in troubled)


def held_record(
    entity: str, account: str, record: str, action: str, found: tuple[tuple[str, ...], str]
) -> HeldRecord:
    units, reason = found
    return HeldRecord(
        entity=entity,
        account_id=account,
        record_id=record,
        action=action,
        unit_ids=units,
        reason=f"held back: {reason}; sent once the unit is acknowledged",
    )


def expected_holdback(changes: pd.DataFrame, snapshot: SnapshotStore) -> list[HeldRecord]:
    """The reservations among ``changes`` that reference a unit refused in an earlier run and
    never acknowledged: the push holds them back unless its unit phase has the unit
    acknowledged first (a plan lists them; the push decides)."""
    trouble = UnitTrouble.from_snapshot(snapshot)
    if not trouble.reasons or not len(changes):
        return []
    rows = changes.loc[(changes["entity"] == str(Entity.RESERVATION)) & changes["payload"].notna()]
    found: list[HeldRecord] = []
    for row in rows.itertuples(index=False):
        reason = trouble.reason_for(str(row.account_id), str(row.payload))
        if reason is not None:
            found.append(
                held_record(
                    str(row.entity),
                    str(row.account_id),
                    str(row.record_id),
                    str(row.action),
                    reason,
                )
            )
    return found

"""The plan's effects beyond record changes: property status changes, the work held until
an approval releases it (each with its reason and that approval), and the reservations that
wait for their unit to be at the service.

Values only: :mod:`connector.accounts` decides the property changes, :mod:`connector.safety`
the holds; the plan carries them so that it describes everything a run will do.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import date
from enum import Enum, StrEnum
from typing import Any


def fields_json(item: Any) -> dict[str, Any]:
    """A dataclass's fields, in order, as JSON values: tuples as lists, enumerations as their
    value, dates as ISO text."""
    return {key: _json_value(value) for key, value in asdict(item).items()}


def _json_value(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, date):
        return value.isoformat()
    return value


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
        return fields_json(self) | {
            "flag": self.approval.flag,
            "dagster_run_config": self.approval.run_config,
        }

    @classmethod
    def from_json_dict(cls, item: dict[str, Any]) -> HeldWork:
        return cls(
            account_id=str(item["account_id"]),
            entity=str(item["entity"]),
            action=str(item["action"]),
            records=int(item["records"]),
            reason=str(item["reason"]),
            approval=Approval(item["approval"]),
        )


@dataclass(frozen=True)
class PropertyEffect:
    """One planned ``PUT /properties/{account id}``: a property deactivated (offboarded) or
    reactivated. ``held_for_stays``: guests still stay in it, it waits for that approval."""

    account_id: str
    action: str  # deactivate | reactivate
    units: int = 0  # the connection's units of the account in the snapshot
    stays: int = 0  # reservations with a stay ending today or later
    last_checkout: date | None = None
    held_for_stays: bool = False

    def describe(self) -> str:
        stays = f", {self.stays} stay(s) until {self.last_checkout}" if self.stays else ""
        return f"property {self.action:<10} {self.account_id} ({self.units} unit(s){stays})"

    def to_json_dict(self) -> dict[str, Any]:
        return fields_json(self)

    @classmethod
    def from_json_dict(cls, item: dict[str, Any]) -> PropertyEffect:
        checkout = item.get("last_checkout")
        return cls(
            account_id=str(item["account_id"]),
            action=str(item["action"]),
            units=int(item.get("units") or 0),
            stays=int(item.get("stays") or 0),
            last_checkout=date.fromisoformat(checkout) if checkout else None,
            held_for_stays=bool(item.get("held_for_stays")),
        )


@dataclass(frozen=True)
class WaitingForUnit:
    """A reservation change whose unit is not at the service (refused in an earlier run and
    never acknowledged): the push holds it back unless the unit is acknowledged first in the
    same run; no approval releases it, the unit's acknowledgement does."""

    entity: str
    account_id: str
    record_id: str
    action: str
    unit_ids: tuple[str, ...]
    reason: str

    def describe(self) -> str:
        return f"waits      {self.entity} {self.account_id}/{self.record_id}: {self.reason}"

    def to_json_dict(self) -> dict[str, Any]:
        return fields_json(self)

    @classmethod
    def from_json_dict(cls, item: dict[str, Any]) -> WaitingForUnit:
        return cls(
            entity=str(item["entity"]),
            account_id=str(item["account_id"]),
            record_id=str(item["record_id"]),
            action=str(item["action"]),
            unit_ids=tuple(str(u) for u in item["unit_ids"]),
            reason=str(item["reason"]),
        )

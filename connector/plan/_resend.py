"""Re-sends of acknowledged records that did not change: how a run heals drift at the service.

Three kinds, all sent as ``update`` with the payload the service acknowledged last
(docs/drift.md):

- ``drifted``: records whose drift an earlier answer revealed and left open
  (:mod:`connector.plan._drift`); always sent, with the real changes;
- ``refresh``: the rolling refresh, a share of the acknowledged records each run, oldest
  acknowledgement first, sent after every real change and within the run's budget;
- ``reconcile``: a full reconciliation pass, every record once, resumable across runs.

:func:`resend_changes` asks the snapshot which records, and returns them as plan rows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import pandas as pd

from connector.contract import Entity, SyncEvent
from connector.errors import ConfigError
from connector.plan._drift import REASON_RECONCILE, REASON_REFRESH, RESEND_REASONS
from connector.records import DateWindow, MappedRecords
from connector.snapshot import ResendRequest, SnapshotStore

DEFAULT_REMOTE_REFRESH_DAYS = 7
"""Against a remote service every acknowledged record is re-sent at least once a week."""

_DAYS = re.compile(r"^\s*(\d+)\s*d(ays?)?\s*$", re.IGNORECASE)
_PERCENT = re.compile(r"^\s*(\d+(\.\d+)?)\s*%\s*$")
_OFF = ("off", "none", "no", "false", "0")


@dataclass(frozen=True)
class RefreshPolicy:
    """The rolling refresh: ``share`` of the eligible acknowledged records re-sent per run.

    ``max_requests`` caps the refresh's requests per run (None: no cap); real changes and
    drifted records do not count against it. Past stays (check-out before today) are left out
    unless ``include_past_stays``: no guest message depends on them.
    """

    share: float = 0.0
    max_requests: int | None = None
    include_past_stays: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.share <= 1:
            raise ValueError(f"the refresh share must be from 0 to 1, got {self.share}")
        if self.max_requests is not None and self.max_requests < 0:
            raise ValueError(f"the refresh cap must be 0 or more, got {self.max_requests}")

    @property
    def enabled(self) -> bool:
        return self.share > 0 and self.max_requests != 0

    @property
    def period_runs(self) -> int | None:
        """Runs within which every eligible record is re-sent, when the cap does not bind."""
        return math.ceil(1 / self.share - 1e-9) if self.share > 0 else None

    def describe(self) -> str:
        if not self.enabled:
            return "off"
        text = f"{self.share:.4g} of the acknowledged records per run"
        if self.period_runs is not None and abs(self.share * self.period_runs - 1) < 1e-9:
            text = f"every acknowledged record within {self.period_runs} runs"
        if self.max_requests is not None:
            text += f", at most {self.max_requests} requests"
        return text

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "share": round(self.share, 6),
            "max_requests": self.max_requests,
            "include_past_stays": self.include_past_stays,
        }


def parse_share(text: str, where: str) -> float:
    """``7d`` (every record within 7 runs), ``15%``, ``0.15`` or ``off`` as a share."""
    value = text.strip().lower()
    if value in _OFF:
        return 0.0
    days = _DAYS.match(value)
    percent = _PERCENT.match(value)
    try:
        if days:
            share = 1 / int(days.group(1)) if int(days.group(1)) else 0.0
        elif percent:
            share = float(percent.group(1)) / 100
        else:
            share = float(value)
    except (ValueError, ZeroDivisionError):
        share = -1.0
    if not 0 <= share <= 1:
        raise ConfigError(
            f"{where}: expected a refresh share such as 7d (every record within 7 runs), 15%, "
            f"0.15 or off, got {text!r}"
        )
    return share


@dataclass(frozen=True)
class ResendOptions:
    """What a plan re-sends besides real changes (drifted records always)."""

    refresh: RefreshPolicy = field(default_factory=RefreshPolicy)
    # Per entity, the start of the reconciliation pass this run continues (None: no pass).
    reconcile_since: Mapping[Entity, datetime] | None = None
    horizon_days: int = 14

    @property
    def reconciling(self) -> bool:
        return self.reconcile_since is not None


@dataclass(frozen=True)
class ResendSummary:
    """How the plan's re-sends were chosen, for the plan's JSON and table."""

    refresh: RefreshPolicy = field(default_factory=RefreshPolicy)
    reconciling: bool = False
    eligible: Mapping[str, int] = field(default_factory=dict)  # per entity
    reconcile_since: Mapping[str, str] = field(default_factory=dict)  # per entity, ISO time

    @property
    def active(self) -> bool:
        return self.refresh.enabled or self.reconciling

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "refresh": self.refresh.to_json_dict() | {"enabled": self.refresh.enabled},
            "reconcile": ({"since": dict(self.reconcile_since)} if self.reconciling else None),
            "eligible": dict(self.eligible),
        }


@dataclass(frozen=True)
class ResendPlan:
    rows: pd.DataFrame  # plan change rows without ``urgency`` (connector.plan.CHANGE_COLUMNS)
    summary: ResendSummary


def resend_changes(
    snapshot: SnapshotStore,
    batches: Mapping[Entity, MappedRecords],
    sending: pd.DataFrame,
    options: ResendOptions,
    *,
    scope: frozenset[str],
    connection: str | None,
    window: DateWindow | None,
    today: date,
    columns: tuple[str, ...],
) -> ResendPlan:
    """The re-sends of one plan, as change rows with ``columns`` (entity first)."""
    frames: list[pd.DataFrame] = []
    eligible: dict[str, int] = {}
    cap_left = options.refresh.max_requests
    for entity, batch in batches.items():
        since = (options.reconcile_since or {}).get(entity)
        found = snapshot.resend(
            ResendRequest(
                entity=entity,
                records=batch.records,
                present_elsewhere=pd.concat(
                    [batch.quarantined_keys(), batch.present_elsewhere], ignore_index=True
                ),
                # The keys only: a first run's plan holds every document.
                sending=sending.loc[sending["entity"] == str(entity), ["account_id", "record_id"]],
                scope_accounts=scope,
                connection=connection,
                today=today,
                window=window,
                horizon_days=options.horizon_days,
                include_past_stays=options.refresh.include_past_stays or since is not None,
                refresh_share=(
                    options.refresh.share
                    if options.refresh.enabled and not options.reconciling
                    else 0.0
                ),
                refresh_max=cap_left,
                reconcile_since=since,
            )
        )
        eligible[str(entity)] = found.eligible
        if cap_left is not None:
            cap_left -= int((found.rows["reason"] == REASON_REFRESH).sum())
        if len(found.rows):
            frames.append(_as_changes(entity, found.rows, columns))
    rows = pd.concat(frames, ignore_index=True) if frames else _empty(columns)
    summary = ResendSummary(
        refresh=options.refresh,
        reconciling=options.reconciling,
        eligible=eligible,
        reconcile_since={
            str(entity): since.isoformat(sep=" ", timespec="seconds")
            for entity, since in (options.reconcile_since or {}).items()
        },
    )
    return ResendPlan(rows=rows, summary=summary)


def resend_counts(changes: pd.DataFrame) -> dict[str, int]:
    """Per re-send reason, the plan's rows (``drifted``, ``refresh``, ``reconcile``)."""
    found = changes["reason"].value_counts() if len(changes) else {}
    return {reason: int(found.get(reason, 0)) for reason in sorted(RESEND_REASONS)}


def _as_changes(entity: Entity, rows: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    frame = rows.copy()
    frame.insert(0, "entity", str(entity))
    frame["action"] = "update"  # the service holds them (or should): an update, like --only
    frame["event"] = str(SyncEvent.UPDATE)
    # The acknowledgement keeps the snapshot's status: a deactivated unit stays deactivated.
    frame["status_after"] = frame["status"]
    for day in ("checkin", "checkout"):
        frame[day] = pd.to_datetime(frame[day])
    return frame.loc[:, list(columns)]


def _empty(columns: tuple[str, ...]) -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series(dtype="object") for column in columns})


__all__ = [
    "DEFAULT_REMOTE_REFRESH_DAYS",
    "REASON_RECONCILE",
    "REASON_REFRESH",
    "RefreshPolicy",
    "ResendOptions",
    "ResendPlan",
    "ResendSummary",
    "parse_share",
    "resend_changes",
    "resend_counts",
]

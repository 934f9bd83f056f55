"""Count anomalies: a run whose counts are far from the account's recent history.

A run can succeed and still be wrong: an export that lost a third of its rows without tripping
the mass-change guard, a mapping change that suddenly updates every record, a service that
acknowledged nothing. Per account and entity this compares the run's counts with the median
of the last ``history_runs`` successful runs (``runs``/``run_counts`` in the snapshot; dry runs
and blocked runs are not history):

- ``extracted`` (records + quarantined rows): a warning below ``1 - extracted_drop`` times the
  median (default -30 %) or above ``1 + extracted_rise`` times it (default +100 %);
- ``changed`` (create + update + deactivate + cancel) and ``acknowledged``: a warning above
  ``1 + changed_rise`` times the median (default 5x) when also above ``min_changed`` (20), so
  the usual quiet nights (0 or 1 change) do not make every small batch an anomaly;
- an **error** when the run sent records and the service acknowledged none of them.

Without history (a connection's first run) only the error rule applies.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import pandas as pd

from connector.safety.guard import SUCCESSFUL_RUN_STATUSES, runs_of_connection


class Severity(StrEnum):
    WARN = "warn"
    ERROR = "error"


@dataclass(frozen=True)
class AnomalyBands:
    history_runs: int = 7
    extracted_drop: float = 0.3
    extracted_rise: float = 1.0
    changed_rise: float = 4.0
    min_changed: int = 20


@dataclass(frozen=True)
class CurrentCounts:
    """One account's counts of the run being checked."""

    account_id: str
    extracted: int  # records + quarantined rows
    changed: int  # create + update + deactivate + cancel
    acknowledged: int
    sent: int  # changes sent (acknowledged + dead-lettered + failed + pending)
    incremental: bool = False  # the entity was read incrementally: its changed rows only


@dataclass(frozen=True)
class Anomaly:
    account_id: str
    metric: str
    value: int
    baseline: float | None  # median of the history; None for the error rule
    severity: Severity
    message: str


def history(
    runs: pd.DataFrame,
    run_counts: pd.DataFrame,
    entity: str,
    exclude: str,
    connection: str | None = None,
) -> pd.DataFrame:
    """Per account: the connection's successful runs' counts of this entity, newest first."""
    columns = ["account_id", "started_at", "extracted", "changed", "acknowledged"]
    runs = runs_of_connection(runs, connection)
    if runs.empty or run_counts.empty:
        return pd.DataFrame(columns=columns)
    good = runs[
        runs["status"].isin(SUCCESSFUL_RUN_STATUSES)
        & ~runs["dry_run"].astype(bool)
        & (runs["run_id"] != exclude)
    ]
    counts = run_counts[run_counts["entity"] == entity].merge(
        good[["run_id", "started_at"]], on="run_id"
    )
    counts = counts.assign(
        extracted=counts["extracted"] + counts["quarantined"],
        changed=counts["create"] + counts["update"] + counts["deactivate"] + counts["cancel"],
    )
    counts = counts[counts["extracted"] > 0]  # runs that read this entity
    if "incremental" in counts:
        # An incremental read's counts are its changed rows': not the export's history.
        counts = counts[counts["incremental"].fillna(0) == 0]
    return counts.sort_values("started_at", ascending=False).loc[:, columns]


def count_anomalies(
    current: list[CurrentCounts], past: pd.DataFrame, bands: AnomalyBands | None = None
) -> list[Anomaly]:
    """The deviations of each account's counts from its recent history."""
    bands = bands or AnomalyBands()
    found: list[Anomaly] = []
    for counts in current:
        if counts.sent > 0 and counts.acknowledged == 0:
            found.append(
                Anomaly(
                    counts.account_id,
                    "acknowledged",
                    0,
                    None,
                    Severity.ERROR,
                    f"account {counts.account_id!r}: {counts.sent} change(s) sent, none "
                    "acknowledged",
                )
            )
        recent = past[past["account_id"] == counts.account_id].head(bands.history_runs)
        if recent.empty:
            continue
        extracted = float(recent["extracted"].median())
        if extracted > 0 and not counts.incremental:
            ratio = counts.extracted / extracted
            if ratio < 1 - bands.extracted_drop or ratio > 1 + bands.extracted_rise:
                found.append(
                    Anomaly(
                        counts.account_id,
                        "extracted",
                        counts.extracted,
                        extracted,
                        Severity.WARN,
                        f"account {counts.account_id!r}: {counts.extracted} rows extracted, "
                        f"{ratio - 1:+.0%} against the median {extracted:g} of the last "
                        f"{len(recent)} run(s) (band -{bands.extracted_drop:.0%} / "
                        f"+{bands.extracted_rise:.0%})",
                    )
                )
        for metric in ("changed", "acknowledged"):
            value = int(getattr(counts, metric))
            median = float(recent[metric].median())
            if value > bands.min_changed and value > (1 + bands.changed_rise) * median:
                found.append(
                    Anomaly(
                        counts.account_id,
                        metric,
                        value,
                        median,
                        Severity.WARN,
                        f"account {counts.account_id!r}: {value} {metric}, above "
                        f"{1 + bands.changed_rise:g}x the median {median:g} of the last "
                        f"{len(recent)} run(s)",
                    )
                )
    return found

"""One sync's report restricted to a window of check-in dates: what the run did for those stays.

A run over several months (a backfill, the nightly window) is one plan and one push; its report
split month by month tells each month's own counts, as a run of that month alone would have
reported them: the records whose check-in lies in the month, the problems of its rows (rows
whose check-in could not be read belong to every month, as they are read by every month's run),
the changes planned for them and the service's answers to those changes. What belongs to the
run as a whole (its duration, the mass-change guard's verdict, 429s, time spent waiting for
rate-limit windows) is kept as it is.

The sync must have been run with ``by_checkin=True`` (``connector.pipeline.sync_batches``), so
the plan kept its reservations' tally per check-in day.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import replace
from datetime import date

import numpy as np
import pandas as pd

from connector.contract import Entity
from connector.errors import PmsSyncError
from connector.pipeline._run import SyncReport, drift_open_within
from connector.plan import Plan, WaitingForUnit, extracted_counts
from connector.push import OUTCOMES, PushResult
from connector.records import DateWindow, MappedRecords, status_findings


def report_within(
    report: SyncReport,
    batch: MappedRecords,
    window: DateWindow,
    accounts: Collection[str] | None = None,
) -> SyncReport:
    """``report`` (of a sync of ``batch``'s reservations) restricted to check-ins in ``window``
    and, with ``accounts``, to those accounts: named as ``batch`` names them (the export's
    values, external ids before the run resolved them), as account partitions are."""
    if report.plan.tally_by_checkin is None:
        raise PmsSyncError(
            "the report keeps no counts per check-in day: run the sync with by_checkin=True "
            "to split it by window"
        )
    part = records_within(batch, window)
    if accounts is not None:
        part = part.of_accounts(accounts)
        accounts = _as_report_names(report, batch, accounts)
    plan = _plan_within(report.plan, part, window, accounts)
    keys = set(zip(plan.changes["account_id"], plan.changes["record_id"], strict=True))
    sample = [row for row in report.quarantine_sample if _row_in(row.get("checkin"), window)]
    return replace(
        report,
        plan=plan,
        push=_push_within(report.push, keys, plan.accounts, window, accounts),
        quarantine={str(batch.entity): len(part.quarantine)},
        quarantine_sample=sample,
        diff_sample=[c for c in report.diff_sample if (c.account_id, c.record_id) in keys],
        drift_open={
            key: n
            for key, n in drift_open_within(report.drift_open_rows, window).items()
            if accounts is None or key[1] in accounts
        },
    )


def _as_report_names(
    report: SyncReport, batch: MappedRecords, accounts: Collection[str]
) -> set[str]:
    """The accounts as the report names them: where the export names accounts by external id,
    the account ids the run resolved them to (one unknown to the service names none)."""
    if not batch.account_is_external_id:
        return {str(account) for account in accounts}
    resolved = report.accounts.resolved
    return {resolved[str(account)] for account in accounts if str(account) in resolved}


def records_within(batch: MappedRecords, window: DateWindow) -> MappedRecords:
    """The records with check-in in ``window``, and the problems of rows in it or of rows
    whose check-in could not be read."""
    return records_by_window(batch, [window])[window]


def records_by_window(
    batch: MappedRecords, windows: Iterable[DateWindow]
) -> dict[DateWindow, MappedRecords]:
    """``records_within`` of each window, the check-ins read once for all of them."""
    # Sorted once, each window is a slice of the order: no mask over the whole batch per window.
    checkin = pd.to_datetime(batch.records["checkin"]).to_numpy(dtype="datetime64[ns]")
    order = np.argsort(checkin, kind="stable")
    ordered = checkin[order]
    # A problem row whose check-in cannot be read (blank, malformed, beyond pandas' dates) is
    # read by every window's run, so it belongs to every window.
    problem_day = pd.to_datetime(
        batch.quarantine["checkin"].fillna("").astype(str).str[:10],
        format="%Y-%m-%d",
        errors="coerce",
    )
    unread = problem_day.isna()
    parts: dict[DateWindow, MappedRecords] = {}
    for window in windows:
        start, end = pd.Timestamp(window.start), pd.Timestamp(window.end)
        low, high = np.searchsorted(ordered, [start.to_datetime64(), end.to_datetime64()])
        inside = np.sort(order[low:high])
        quarantine = batch.quarantine.loc[
            (unread | ((problem_day >= start) & (problem_day < end))).to_numpy()
        ]
        records = batch.records.take(inside).reset_index(drop=True)
        parts[window] = MappedRecords(
            entity=batch.entity,
            records=records,
            quarantine=quarantine.reset_index(drop=True),
            known_valid=0,  # counted for the whole batch only
            present_elsewhere=batch.present_elsewhere,
            account_is_external_id=batch.account_is_external_id,
            carried=int(records["payload"].isna().sum()),  # carried over by fingerprint
        )
    return parts


def _row_in(day: object, window: DateWindow) -> bool:
    text = "" if day is None else str(day)[:10]
    if not text:
        return True  # its check-in could not be read: every window's run reads it
    try:
        return window.contains(date.fromisoformat(text))
    except ValueError:
        return True  # a check-in beyond the supported dates: reported wherever it is read


def _plan_within(
    plan: Plan, part: MappedRecords, window: DateWindow, accounts: Collection[str] | None
) -> Plan:
    changes = plan.changes
    if len(changes):
        days = pd.to_datetime(changes["checkin"])
        mask = (
            (changes["entity"] == str(Entity.RESERVATION))
            & (days >= pd.Timestamp(window.start))
            & (days < pd.Timestamp(window.end))
            & _of_accounts(changes, accounts)
        )
        changes = changes.loc[mask.to_numpy()].reset_index(drop=True)
    tally = plan.tally_by_checkin
    assert tally is not None
    if len(tally):
        days = pd.to_datetime(tally["checkin"])
        inside = (
            (days >= pd.Timestamp(window.start))
            & (days < pd.Timestamp(window.end))
            & _of_accounts(tally, accounts)
        )
        tally = tally.loc[inside.to_numpy()]
    return replace(
        plan,
        changes=changes,
        tally=tally.loc[:, ["entity", "account_id", "action", "reason", "n"]].reset_index(
            drop=True
        ),
        extracted=extracted_counts(Entity.RESERVATION, part),
        window=window,
        units_with_stays=plan.units_with_stays.iloc[0:0],
        waiting_for_units=_waiting_within(plan, changes),
        tally_by_checkin=None,
        status_findings=status_findings(part.quarantine),
    )


def _waiting_within(plan: Plan, changes: pd.DataFrame) -> tuple[WaitingForUnit, ...]:
    """The plan's reservations waiting for a unit, of this window's changes only."""
    if not plan.waiting_for_units:
        return ()
    keys = set(zip(changes["account_id"], changes["record_id"], strict=True))
    return tuple(w for w in plan.waiting_for_units if (w.account_id, w.record_id) in keys)


def _of_accounts(frame: pd.DataFrame, accounts: Collection[str] | None) -> pd.Series:
    if accounts is None:
        return pd.Series(True, index=frame.index)
    return frame["account_id"].astype(str).isin(list(accounts))


def _push_within(
    push: PushResult,
    keys: set[tuple[str, str]],
    accounts: list[str],
    window: DateWindow,
    only: Collection[str] | None,
) -> PushResult:
    counters = {
        key: counter
        for key, counter in push.by_checkin.items()
        if key[2] is not None and window.contains(key[2]) and (only is None or key[1] in only)
    }
    outcomes = {str(o): 0 for o in OUTCOMES}
    by_account: dict[tuple[str, str], Counter[str]] = {}
    deferred: Counter[str] = Counter()
    pending: Counter[str] = Counter()
    requests = unconfirmed = healed = 0
    for (entity, account, _day, urgency), counter in counters.items():
        for outcome in outcomes:
            outcomes[outcome] += counter.get(outcome, 0)
        by_account.setdefault((entity, account), Counter()).update(
            {name: n for name, n in counter.items() if name not in ("deferred", "unconfirmed")}
        )
        deferred[urgency] += counter.get("deferred", 0)
        pending[urgency] += counter.get("pending", 0)
        requests += counter.get("requests", 0)
        unconfirmed += counter.get("unconfirmed", 0)
        healed += counter.get("drift_healed", 0)
    return replace(
        push,
        outcomes=outcomes,
        requests=requests,
        problems=[p for p in push.problems if (p.account_id, p.record_id) in keys],
        disagreements=[d for d in push.disagreements if (d.account_id, d.record_id) in keys],
        stopped_accounts={a: e for a, e in push.stopped_accounts.items() if a in accounts},
        postponed_accounts={a: r for a, r in push.postponed_accounts.items() if a in accounts},
        by_account=by_account,
        held_back=[h for h in push.held_back if (h.account_id, h.record_id) in keys],
        deferred=+deferred,
        pending_by_urgency=+pending,
        unconfirmed=unconfirmed,
        by_checkin=counters,
        drift=[d for d in push.drift if (d.account_id, d.record_id) in keys],
        drift_healed=healed,
    )

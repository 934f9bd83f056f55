"""Monthly partitions of reservations by check-in, and the windows runs cover.

A partition key is a month (``2025-07``); a run of one partition, or of a range of them, maps,
diffs, pushes and reconciles only the reservations whose check-in falls in that window.
"""

from __future__ import annotations

from datetime import date, datetime

import dagster as dg

from connector.records import DateWindow

# Dagster exports these tag names only from an internal module; the values are stable strings.
ASSET_PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"
ASSET_PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"

PARTITION_FORMAT = "%Y-%m"
DEFAULT_PARTITIONS_START = "2020-01"
"""First month of check-in a connection can backfill when its mapping names none."""

FUTURE_MONTHS = 11
"""Months after the current one that exist as partitions: stays are booked ahead, a PMS's
booking horizon is a year, so the current month and the eleven after it are a year of arrivals.
A twelfth month ahead would hold a few days' bookings at most, and the UI's asset page opens on
the last partition."""

RECENT_MONTHS = 1
"""Months before the current one that the nightly run still covers: late changes to past stays
(no-shows, extensions, cancellations after the fact) land in the month just ended."""


def reservation_partitions(
    partitions_start: str | None, timezone: str
) -> dg.MonthlyPartitionsDefinition:
    """Monthly partitions from ``partitions_start`` (YYYY-MM) to FUTURE_MONTHS ahead."""
    start = datetime.strptime(partitions_start or DEFAULT_PARTITIONS_START, PARTITION_FORMAT)
    return dg.MonthlyPartitionsDefinition(
        start_date=start,
        fmt=PARTITION_FORMAT,
        timezone=timezone,
        # Dagster's last monthly partition is the last complete month: +1 adds the current one.
        end_offset=FUTURE_MONTHS + 1,
    )


def window_of(time_window: dg.TimeWindow) -> DateWindow:
    """The check-in window [start, end) of a partition or a contiguous range of partitions.

    Partition boundaries are midnights in the connection's timezone, so the local dates are
    the check-in dates.
    """
    return DateWindow(start=time_window.start.date(), end=time_window.end.date())


def current_range(
    partitions: dg.MonthlyPartitionsDefinition, today: date | None = None
) -> dg.PartitionKeyRange:
    """The partitions of the nightly run: RECENT_MONTHS back to FUTURE_MONTHS ahead."""
    today = today or date.today()
    month_index = today.year * 12 + today.month - 1 - RECENT_MONTHS
    first = date(month_index // 12, month_index % 12 + 1, 1).strftime(PARTITION_FORMAT)
    with dg.partition_loading_context(effective_dt=datetime.combine(today, datetime.min.time())):
        keys = partitions.get_partition_keys()
    # A connection whose history starts later than RECENT_MONTHS ago starts at its first month.
    first = max(first, keys[0])
    return dg.PartitionKeyRange(start=first, end=keys[-1])


def range_tags(partition_range: dg.PartitionKeyRange) -> dict[str, str]:
    """Run tags that make one run cover a contiguous range of partitions (a single-run window).

    These are the tags Dagster's own single-run backfills put on their runs.
    """
    return {
        ASSET_PARTITION_RANGE_START_TAG: partition_range.start,
        ASSET_PARTITION_RANGE_END_TAG: partition_range.end,
    }


def nightly_tags(
    partitions: dg.MonthlyPartitionsDefinition | None, today: date | None = None
) -> dict[str, str]:
    """Tags of a nightly or drop-folder run: the current window, if reservations are synced."""
    return range_tags(current_range(partitions, today)) if partitions is not None else {}


def full_range_tags(
    partitions: dg.MonthlyPartitionsDefinition | None, today: date | None = None
) -> dict[str, str]:
    """Tags of a run over every partition (a full reconciliation), if reservations are synced."""
    if partitions is None:
        return {}
    today = today or date.today()
    with dg.partition_loading_context(effective_dt=datetime.combine(today, datetime.min.time())):
        keys = partitions.get_partition_keys()
    return range_tags(dg.PartitionKeyRange(start=keys[0], end=keys[-1]))

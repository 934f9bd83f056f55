"""The asset page opens on a month that can hold stays."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import dagster as dg

from pms_sync.partitions import current_range, reservation_partitions


def test_the_last_partition_lies_within_a_year_of_bookings_every_day_of_the_year() -> None:
    # The UI's asset page opens on the last partition: it must be a month a year-ahead booking
    # horizon covers (a month it barely reaches would show a page of zeros), and the nightly
    # run must reach it.
    partitions = reservation_partitions("2020-01", "UTC")
    day = date(2026, 1, 1)
    while day < date(2027, 1, 1):
        with dg.partition_loading_context(effective_dt=datetime.combine(day, datetime.min.time())):
            last = partitions.get_last_partition_key()
        assert last is not None
        start = datetime.strptime(last, "%Y-%m").date()
        end = (start + timedelta(days=31)).replace(day=1)
        assert start > day
        assert end <= day + timedelta(days=366), (day, last)
        assert current_range(partitions, day).end == last
        day += timedelta(days=1)

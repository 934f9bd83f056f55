"""Property tests of the mapping engine's conversions and of the diff.

Dates written with any strptime format come back as the same ISO date; offset datetimes come
back as the same instant in UTC; half-hour times come back unchanged; every spelling of a
country the reference table knows maps to its ISO code, and the code maps to itself. And any
sequence of source edits, synced run after run, leaves the sandbox holding exactly the source.

Examples per property: PMS_SYNC_PROPERTY_EXAMPLES (default 5: each maps a CSV through the real
engine or syncs against the sandbox); `make soak` raises it.
"""

from __future__ import annotations

import csv
import json
import random
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connector.contract import Entity
from connector.mapping.reference_data import country_table
from connector.pipeline import load_batches, sync_batches
from connector.sandbox.testing import SandboxHandle
from connector.settings import load_settings
from tests.reliability.campaign import TOKEN, Source, budget, differences

EXAMPLES = budget("PMS_SYNC_PROPERTY_EXAMPLES", 5)
PROPERTY_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,  # a fixed sequence of examples: the same on every run of the suite
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
COUNTRIES = sorted(country_table().items())
DATE_FORMATS = ["%d.%m.%Y", "%Y-%m-%d", "%m/%d/%Y", "%d-%b-%Y", "%Y%m%d"]

MAPPING = """\
name: transforms
account: {constant: demo}
inputs:
  units: {type: csv, path: units.csv}
  stays: {type: csv, path: stays.csv}
entities:
  accommodation:
    input: units
    fields:
      id: unit_id
      status: {constant: ACTIVE}
      name: unit_id
      street: {constant: Hauptstraße}
      streetNumber: {constant: "7"}
      country: country
      city: {constant: Berlin}
      wifiName: {constant: guest}
      wifiCode: {constant: secret}
      doorCode: {constant: secret}
      minimumCheckInTime: checkin_time
  reservation:
    input: stays
    fields:
      id: stay_id
      status: {constant: CONFIRMED}
      createdAt: created
      primaryGuest:
        firstName: {constant: Ada}
      unitReservations:
        fields:
          id: stay_id
          unitId: {constant: U0}
          unitName: {constant: U0}
          checkin: {column: arrival, format: "%s"}
          checkout: {column: arrival, format: "%s", add_days: {constant: 2}}
          adults: {constant: 2}
"""

row_of_values = st.tuples(
    st.dates(min_value=date(1900, 1, 1), max_value=date(2262, 4, 9)),
    st.datetimes(
        min_value=datetime(1970, 1, 2), max_value=datetime(2999, 12, 30), timezones=st.just(UTC)
    ).map(lambda moment: moment.replace(microsecond=0)),
    st.integers(min_value=-14 * 4, max_value=14 * 4).map(
        lambda q: timezone(timedelta(minutes=15 * q))
    ),
    st.integers(min_value=0, max_value=47).map(lambda h: f"{h // 2:02d}:{30 * (h % 2):02d}"),
    st.sampled_from(COUNTRIES),
)


def _write(folder: Path, fmt: str, rows: list[tuple]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "units.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["unit_id", "country", "checkin_time"])
        for n, (_, _, _, time_of_day, (spelling, _)) in enumerate(rows):
            writer.writerow([f"U{n}", spelling, time_of_day])
    with (folder / "stays.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["stay_id", "arrival", "created"])
        for n, (day, moment, offset, _, _) in enumerate(rows):
            writer.writerow([f"S{n}", day.strftime(fmt), moment.astimezone(offset).isoformat()])
    mapping = folder / "mapping.yaml"
    mapping.write_text(MAPPING.replace("%s", fmt))
    return mapping


@PROPERTY_SETTINGS
@given(fmt=st.sampled_from(DATE_FORMATS), rows=st.lists(row_of_values, min_size=1, max_size=25))
def test_dates_datetimes_times_and_countries_survive_the_mapping(
    tmp_path_factory: pytest.TempPathFactory, fmt: str, rows: list[tuple]
) -> None:
    batches, _ = load_batches(_write(tmp_path_factory.mktemp("transforms"), fmt, rows))

    units = {
        r.record_id: json.loads(r.payload)
        for r in batches[Entity.ACCOMMODATION].records.itertuples()
    }
    stays = {
        r.record_id: json.loads(r.payload) for r in batches[Entity.RESERVATION].records.itertuples()
    }
    assert batches[Entity.ACCOMMODATION].quarantine.empty
    assert batches[Entity.RESERVATION].quarantine.empty
    for n, (day, moment, _, time_of_day, (_, code)) in enumerate(rows):
        unit_reservation = stays[f"S{n}"]["unitReservations"][0]
        assert unit_reservation["checkin"] == day.isoformat()
        assert unit_reservation["checkout"] == (day + timedelta(days=2)).isoformat()
        assert stays[f"S{n}"]["createdAt"] == moment.strftime("%Y-%m-%dT%H:%M:%SZ")
        assert units[f"U{n}"]["minimumCheckInTime"] == time_of_day
        assert units[f"U{n}"]["country"] == code
        assert country_table().get(code.lower(), code) == code  # the code maps to itself


edit_sizes = st.lists(st.integers(min_value=1, max_value=25), min_size=2, max_size=4)


@pytest.mark.slow
@PROPERTY_SETTINGS
@given(seed=st.integers(min_value=0, max_value=2**32), edits=edit_sizes)
def test_any_sequence_of_source_edits_synced_run_by_run_converges_the_sandbox(
    clean_sandbox: SandboxHandle,
    tmp_path_factory: pytest.TempPathFactory,
    seed: int,
    edits: list[int],
) -> None:
    clean_sandbox.reset()
    rng = random.Random(seed)
    folder = tmp_path_factory.mktemp("edits")
    source = Source.generate(rng, units=4, stays=10)
    settings_ = load_settings(
        base_url=clean_sandbox.base_url, snapshot=folder / "s.duckdb", token=TOKEN, env={}
    )

    for changes in [0, *edits]:
        source.edit(rng, changes)
        batches, policy = load_batches(source.write(folder / "export"))
        report = sync_batches(
            batches, settings_, policy=policy, allow_mass_change=True, release_units_with_stays=True
        )

        assert report.push.complete
        assert differences(clean_sandbox, batches) == {
            "lost": [],
            "not_retired": [],
            "duplicated": 0,
        }

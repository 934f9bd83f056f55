"""``make demo`` regenerates a bundled sample generated around another month, and only that."""

import json
import shutil
from datetime import date
from pathlib import Path

from assets.samples import refresh_stale_samples

MAPPINGS = Path(__file__).resolve().parents[2] / "mappings"


def test_a_sample_of_another_month_is_regenerated_around_this_month_with_its_own_arguments(
    tmp_path: Path,
) -> None:
    for example in ("hotel", "vacation_rental"):
        shutil.copytree(MAPPINGS / example, tmp_path / example)
    hotel = tmp_path / "hotel" / "data"
    manifest = json.loads((hotel / "sample.json").read_text())
    manifest["anchor"] = "2031-05-01"  # the vacation rental's stays a month ago, the hotel's now
    (hotel / "sample.json").write_text(json.dumps(manifest))
    rental = tmp_path / "vacation_rental" / "data"
    rental_manifest = json.loads((rental / "sample.json").read_text())
    rental_manifest["anchor"] = "2031-04-01"
    (rental / "sample.json").write_text(json.dumps(rental_manifest))
    rental_before = (rental / "bookings.csv").read_bytes()
    hotel_before = (hotel / "bookings.csv").read_bytes()

    stale = refresh_stale_samples(tmp_path, today=date(2031, 5, 17))

    assert [sample.manifest.parent.parent.name for sample in stale] == ["vacation_rental"]
    assert json.loads((rental / "sample.json").read_text())["anchor"] == "2031-05-01"
    assert (rental / "bookings.csv").read_bytes() != rental_before
    assert (hotel / "bookings.csv").read_bytes() == hotel_before  # this month's: left alone

"""A hotel that leaves the export is deactivated with one PUT /properties/{id}, with approval,
and reactivated when it comes back (spec §4.6, §3 rule 1)."""

from __future__ import annotations

from pathlib import Path

from connector.sandbox.testing import SandboxHandle
from tests.accounts.chain import (
    ChainExport,
    account,
    booking,
    document,
    hotel,
    pms_sync,
    property_requests,
    units_of,
)


def statuses(chain: SandboxHandle, account_id: str) -> set[tuple[str, str]]:
    """(resource status, property status) of the account's stored units."""
    return {
        (r["resource"]["status"], r["propertyStatus"])
        for r in chain.records(account_id, "accommodation")
    }


def test_removing_every_row_of_a_hotel_deactivates_its_property_once_approved(
    chain: SandboxHandle, tmp_path: Path, export: ChainExport
) -> None:
    pms_sync(chain, tmp_path, "sync", "--json", str(export.write(units_of(1, 2, 3))))
    export.write(units_of(1, 3))

    held = pms_sync(chain, tmp_path, "sync", "--json", str(export.mapping))
    approved = pms_sync(
        chain, tmp_path, "sync", "--json", "--allow-mass-change", str(export.mapping)
    )

    assert held.exit_code == 5  # the mass-change guard: a whole hotel would stop
    assert "PUT /properties/acc-002" in document(held)["guard"]["message"]
    assert approved.exit_code == 0
    [change] = document(approved)["properties"]["changes"]
    assert (change["account_id"], change["action"], change["outcome"]) == (
        "acc-002",
        "deactivate",
        "applied",
    )
    assert change["updated_sub_units"] == 2
    assert property_requests(chain) == {"200": 1}
    assert chain.health()["inactiveProperties"] == ["acc-002"]
    assert statuses(chain, "acc-002") == {("INACTIVE", "INACTIVE")}
    assert statuses(chain, "acc-001") == {("ACTIVE", "ACTIVE")}


def test_a_deactivated_property_is_not_deactivated_again_and_comes_back_with_its_rows(
    chain: SandboxHandle, tmp_path: Path, export: ChainExport
) -> None:
    pms_sync(chain, tmp_path, "sync", "--json", str(export.write(units_of(1, 2))))
    export.write(units_of(1))
    pms_sync(chain, tmp_path, "sync", "--json", "--allow-mass-change", str(export.mapping))

    still_gone = pms_sync(chain, tmp_path, "sync", "--json", str(export.mapping))
    export.write(units_of(1, 2))
    back = pms_sync(chain, tmp_path, "sync", "--json", str(export.mapping))

    assert still_gone.exit_code == 0
    assert document(still_gone)["properties"]["changes"] == []
    assert back.exit_code == 0
    [change] = document(back)["properties"]["changes"]
    assert (change["action"], change["outcome"]) == ("reactivate", "applied")
    assert property_requests(chain) == {"200": 2}  # one deactivation, one reactivation
    assert chain.health()["inactiveProperties"] == []
    assert statuses(chain, "acc-002") == {("ACTIVE", "ACTIVE")}


def test_a_property_with_upcoming_stays_is_held_unless_the_stays_are_approved(
    chain: SandboxHandle, tmp_path: Path, export: ChainExport
) -> None:
    stays = [booking(hotel(2), 1, days_from_today=3), booking(hotel(1), 2, days_from_today=5)]
    pms_sync(chain, tmp_path, "sync", "--json", str(export.write(units_of(1, 2), stays)))
    export.write(units_of(1), stays[1:])

    held = pms_sync(chain, tmp_path, "sync", "--json", "--allow-mass-change", str(export.mapping))
    # The removal was approved above: releasing the stays is the one approval left.
    released = pms_sync(
        chain, tmp_path, "sync", "--json", "--allow-deactivation-with-stays", str(export.mapping)
    )

    [kept] = document(held)["properties"]["changes"]
    assert (held.exit_code, document(held)["status"]) == (5, "blocked")  # work held
    assert (kept["outcome"], kept["stays"]) == ("held", 1)
    assert "--allow-deactivation-with-stays" in kept["message"]
    [sent] = document(released)["properties"]["changes"]
    assert released.exit_code == 0
    assert sent["outcome"] == "applied"
    assert property_requests(chain) == {"200": 1}
    assert chain.health()["inactiveProperties"] == ["acc-002"]


def test_reactivating_with_sub_units_keeps_units_deactivated_earlier_inactive(
    chain: SandboxHandle, tmp_path: Path, export: ChainExport
) -> None:
    approve = ("sync", "--json", "--allow-mass-change")
    pms_sync(chain, tmp_path, "sync", "--json", str(export.write(units_of(1, 2, count=3))))
    # Unit 3 of hotel 1 leaves first (deactivated on its own), then the whole hotel leaves.
    hotel_2 = units_of(2, count=3)
    pms_sync(chain, tmp_path, *approve, str(export.write([*units_of(1, count=2), *hotel_2])))
    pms_sync(chain, tmp_path, *approve, str(export.write(hotel_2)))

    back = pms_sync(
        chain, tmp_path, "sync", "--json", str(export.write([*units_of(1, count=2), *hotel_2]))
    )

    report = document(back)
    assert back.exit_code == 0
    assert report["properties"]["units_kept_inactive"] == 1
    unit_status = {
        r["id"]: r["resource"]["status"] for r in chain.records(account(1), "accommodation")
    }
    assert unit_status == {
        "HOTEL-001-U1": "ACTIVE",
        "HOTEL-001-U2": "ACTIVE",
        "HOTEL-001-U3": "INACTIVE",
    }


def test_without_sub_units_only_the_property_changes(
    chain: SandboxHandle, tmp_path: Path, export: ChainExport
) -> None:
    pms_sync(chain, tmp_path, "sync", "--json", str(export.write(units_of(1, 2))))
    export.write(units_of(1))

    result = pms_sync(
        chain,
        tmp_path,
        "sync",
        "--json",
        "--allow-mass-change",
        "--no-update-sub-units",
        str(export.mapping),
    )

    assert document(result)["properties"]["changes"][0]["updated_sub_units"] == 0
    assert statuses(chain, "acc-002") == {("ACTIVE", "INACTIVE")}  # units read as inactive


def test_a_dry_run_reports_the_property_change_and_sends_nothing(
    chain: SandboxHandle, tmp_path: Path, export: ChainExport
) -> None:
    pms_sync(chain, tmp_path, "sync", "--json", str(export.write(units_of(1, 2))))
    export.write(units_of(1))

    result = pms_sync(
        chain, tmp_path, "sync", "--json", "--dry-run", "--allow-mass-change", str(export.mapping)
    )

    [change] = document(result)["properties"]["changes"]
    assert (change["action"], change["outcome"]) == ("deactivate", "planned")
    assert property_requests(chain) == {}
    assert chain.health()["inactiveProperties"] == []


def test_with_offboarding_off_a_hotel_gone_from_the_export_is_named_and_left_active(
    chain: SandboxHandle, tmp_path: Path, export: ChainExport
) -> None:
    off = {"PMS_SYNC_OFFBOARD_PROPERTIES": "off"}
    pms_sync(chain, tmp_path, "sync", "--json", str(export.write(units_of(1, 2))), **off)
    export.write(units_of(1))

    result = pms_sync(
        chain, tmp_path, "sync", "--json", "--allow-mass-change", str(export.mapping), **off
    )

    report = document(result)
    assert result.exit_code == 0
    assert report["properties"]["changes"] == []
    assert report["properties"]["left_active"] == ["acc-002"]
    # Named again by every run while it is gone, in the text report too.
    again = pms_sync(chain, tmp_path, "sync", str(export.mapping), **off)
    assert again.exit_code == 0
    assert "property acc-002: gone from the export, left active (offboarding is off" in (
        again.stderr
    )
    assert property_requests(chain) == {}
    assert chain.health()["inactiveProperties"] == []

"""The plan is the complete description of a run's effects: `plan` shows a property
offboarding, a unit held for its stays and the retirement of a possibly stored record, and
`apply` of its plan file performs exactly them (over real sockets, the sandbox and its
Open API)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from connector.sandbox.faults import Misbehaviour
from connector.sandbox.testing import SandboxHandle
from pms_sync.resources import SyncChecksResource
from tests.accounts.chain import (
    ChainExport,
    account,
    booking,
    document,
    hotel,
    pms_sync,
    property_requests,
    unit,
    units_of,
)
from tests.accounts.test_dagster_accounts import materialized, resources
from tests.dagster.code_location import code_location

ATTEMPTS = 3  # PMS_SYNC_MAX_ATTEMPTS of tests.accounts.chain.pms_sync
GHOST = f"{hotel(3)}-U99"
STAYED_IN = f"{hotel(1)}-U2"
LEFT = f"{hotel(1)}-U3"  # gone, no stay: deactivated in the same account as the held unit


def unit_statuses(chain: SandboxHandle) -> dict[str, str]:
    return {
        r["id"]: r["resource"]["status"]
        for n in (1, 2, 3)
        for r in chain.records(account(n), "accommodation")
    }


def webhook_requests(chain: SandboxHandle) -> int:
    requests: dict[str, dict[str, int]] = chain.stats()["requests"]
    return sum(sum(by.values()) for path, by in requests.items() if "/hooks/" in path)


def offboarding_run(chain: SandboxHandle, tmp_path: Path, export: ChainExport) -> None:
    """Acknowledged: hotels 1-3, a stay in unit U2 of hotel 1. Possibly stored: unit U99 of
    hotel 3 (every answer lost). Then the export: hotel 2 gone, U2, U3 and U99 gone too."""
    stay = booking(hotel(1), 1, days_from_today=3) | {"unit_id": STAYED_IN}
    everything = [*units_of(1, count=6), *units_of(2), *units_of(3, count=6)]
    assert pms_sync(chain, tmp_path, "sync", str(export.write(everything, [stay]))).exit_code == 0
    chain.set_faults(misbehave_next=ATTEMPTS, misbehaviour=Misbehaviour.RESET_AFTER_HEADERS)
    lost = pms_sync(
        chain,
        tmp_path,
        "sync",
        "--json",
        str(export.write([*everything, unit(hotel(3), 99)], [stay])),
    )
    chain.set_faults()
    assert document(lost)["outcomes"]["pending"] == 1
    assert unit_statuses(chain)[GHOST] == "ACTIVE"  # stored, the answer never came
    kept = [
        u
        for u in [*units_of(1, count=6), *units_of(3, count=6)]
        if u["unit_id"] not in (STAYED_IN, LEFT)
    ]
    export.write(kept, [stay])


def effects(summary: dict[str, Any]) -> dict[str, Any]:
    return {
        "properties": [(p["account_id"], p["action"]) for p in summary["properties"]],
        "retired": [(r["record_id"], r["action"]) for r in summary["possibly_stored_retirements"]],
        "held": sorted(
            (h["account_id"], h["entity"], h["action"], h["approval"])
            for h in summary["awaiting_approval"]
        ),
    }


EXPECTED = {
    "properties": [(account(2), "deactivate")],
    "retired": [(GHOST, "deactivate")],
    "held": [
        (account(1), "accommodation", "deactivate", "deactivation_with_stays"),
        (account(2), "accommodation", "deactivate", "mass_change"),
    ],
}


def test_plan_shows_every_effect_and_apply_performs_exactly_them(
    chain: SandboxHandle, tmp_path: Path, export: ChainExport
) -> None:
    offboarding_run(chain, tmp_path, export)
    before, statuses_before = webhook_requests(chain), unit_statuses(chain)

    text = pms_sync(chain, tmp_path, "plan", str(export.mapping))
    as_json = pms_sync(chain, tmp_path, "plan", "--json", str(export.mapping))
    plan_file = tmp_path / "plan.json"
    written = pms_sync(
        chain, tmp_path, "plan", "--json", "--out", str(plan_file), str(export.mapping)
    )
    planned = document(written)
    sent_before_apply = webhook_requests(chain)
    applied = pms_sync(chain, tmp_path, "apply", "--json", "--allow-mass-change", str(plan_file))

    assert effects(document(as_json)) == EXPECTED
    assert effects(planned) == EXPECTED
    assert "property deactivate acc-002 (2 unit(s))" in text.stdout
    assert f"retire     accommodation acc-003/{GHOST}" in text.stdout
    assert "held       account 'acc-001': 1 accommodation deactivation(s) held" in text.stdout
    assert "--allow-deactivation-with-stays" in text.stdout
    assert sent_before_apply == before  # planning sends nothing
    assert property_requests(chain) == {"200": 1}
    # Exactly the plan: the property and the planned record changes, nothing else.
    report = document(applied)
    [change] = report["properties"]["changes"]
    assert (change["account_id"], change["action"], change["outcome"]) == (
        account(2),
        "deactivate",
        "applied",
    )
    payloads = json.loads(plan_file.read_text())["payloads"]
    planned_records = Counter((c["record_id"], c["action"]) for c in payloads)
    # Hotel 2's units stop with their property (updateSubUnits): no request of their own.
    assert planned_records == Counter({(GHOST, "deactivate"): 1, (LEFT, "deactivate"): 1})
    assert webhook_requests(chain) - before == report["requests"] == sum(planned_records.values())
    assert chain.health()["inactiveProperties"] == [account(2)]
    statuses = unit_statuses(chain)
    changed = {uid for uid, status in statuses.items() if status != statuses_before[uid]}
    assert changed == {f"{hotel(2)}-U1", f"{hotel(2)}-U2", GHOST, LEFT}
    assert statuses[STAYED_IN] == "ACTIVE" and statuses[GHOST] == "INACTIVE"
    assert (applied.exit_code, report["status"]) == (5, "blocked")  # the stays still hold U2
    assert [h["approval"] for h in report["awaiting_approval"]] == ["deactivation_with_stays"]


def test_a_dagster_run_of_the_same_shows_the_same_effects(
    chain: SandboxHandle, tmp_path: Path
) -> None:
    export = ChainExport(tmp_path / "mappings" / "chain")
    offboarding_run(chain, tmp_path, export)
    given = resources(chain, tmp_path) | {"sync_checks": SyncChecksResource(allow_mass_change=True)}
    defs = code_location(tmp_path / "mappings", given)

    result = defs.resolve_job_def("chain_sync").execute_in_process(raise_on_error=False)

    synced = materialized(result, "synced_accommodations")
    assert "| acc-002 | deactivate | 2 | 0 | no |" in synced["planned_properties"]
    assert (
        f"| accommodation | acc-003 | {GHOST} | deactivate |"
        in synced["possibly_stored_retirements"]
    )
    assert synced["possibly_stored_retired"] == 1
    assert (synced["requests_to_send_records"], synced["requests_to_send_properties"]) == (2, 1)
    [held] = [line for line in synced["awaiting_approval"].splitlines() if "acc-" in line]
    assert "acc-001" in held and "allow_deactivation_with_stays" in held
    assert "| acc-002 | deactivate | applied |" in synced["properties"]
    assert chain.health()["inactiveProperties"] == [account(2)]
    statuses = unit_statuses(chain)
    assert (statuses[STAYED_IN], statuses[GHOST], statuses[LEFT]) == (
        "ACTIVE",
        "INACTIVE",
        "INACTIVE",
    )

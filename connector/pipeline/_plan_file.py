"""Reviewed plans: ``pms-sync plan MAPPING --out plan.json`` then ``pms-sync apply plan.json``.

A plan file has two parts, for two readers:

- ``changes``: for people. One entry per request with its field-level differences (old → new
  per field; see :mod:`connector.plan._diff`), every secret and guest contact masked. This is
  what a reviewer reads, pastes into a ticket or diffs.
- ``summary``: the complete plan (``Plan.to_json_dict``): its counts and every other effect,
  property status changes (offboarding, reactivation), retirements of possibly stored
  records, and the work held awaiting an approval with the approval that releases it.
- ``payloads``: for ``apply``. The exact canonical JSON of each request, in the same order,
  so the push sends byte for byte what was planned (not a re-mapping of an export that may
  have changed since). These hold door codes and guest contacts like the snapshot does: the
  file is written readable by its owner only (0600) and must be kept like the snapshot.

The file records the snapshot's fingerprint (:meth:`SnapshotStore.fingerprint`) for the
plan's accounts. ``apply`` refuses the plan when the snapshot has changed since (another sync
acknowledged or refused something, so the diff the plan was made from is no longer true), and
when the file was edited after it was written (a SHA-256 digest of every part). ``apply``
carries out exactly the plan: its property changes, then its payloads, without the work
held for an approval not given (``--allow-mass-change`` releases the guard's holds).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from connector.errors import MassChangeError, PlanFileError
from connector.pipeline._execute import execute_plan
from connector.pipeline._request import SyncRequest
from connector.plan import (
    CHANGE_COLUMNS,
    UNIT_STAYS_COLUMNS,
    Force,
    HeldWork,
    Plan,
    PropertyEffect,
    WaitingForUnit,
    field_changes,
)
from connector.private_files import open_private
from connector.records import DateWindow
from connector.safety.guard import GuardVerdict
from connector.snapshot import Snapshot, SnapshotStore, snapshot_location

if TYPE_CHECKING:
    from connector.pipeline._run import SyncReport

FORMAT = "pms-sync-plan/2"  # /2: property changes and held work
_TALLY_COLUMNS = ("entity", "account_id", "action", "reason", "n")
_EXTRACTED_COLUMNS = ("entity", "account_id", "extracted", "quarantined")


@dataclass(frozen=True)
class PlanFile:
    plan: Plan
    mapping: str
    snapshot_location: str
    fingerprint: str
    guard: dict[str, Any]


def plan_document(
    plan: Plan, snapshot: SnapshotStore, *, mapping: str, verdict: GuardVerdict
) -> dict[str, Any]:
    """The plan file's content (see the module's docstring)."""
    differences: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for change in field_changes(plan.changes, snapshot):
        differences.setdefault((change.entity, change.account_id, change.record_id), []).append(
            {"field": change.field, "old": change.old, "new": change.new}
        )
    rows = [_row(row) for row in plan.changes.loc[:, list(CHANGE_COLUMNS)].to_dict("records")]
    changes = [
        {
            key: row[key]
            for key in ("entity", "account_id", "record_id", "action", "reason", "urgency")
        }
        | {"fields": differences.get((row["entity"], row["account_id"], row["record_id"]), [])}
        for row in rows
    ]
    document: dict[str, Any] = {
        "format": FORMAT,
        "mapping": mapping,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "snapshot": {
            "location": snapshot.location,
            "fingerprint": snapshot.fingerprint(plan.accounts),
        },
        "summary": plan.to_json_dict(),
        "guard": verdict.to_json_dict(),
        "changes": changes,
        "payloads": rows,
        "tally": [_row(r) for r in plan.tally.to_dict("records")],
        "extracted": [_row(r) for r in plan.extracted.to_dict("records")],
    }
    document["digest"] = _digest(document)
    return document


def write_plan_file(path: Path, document: dict[str, Any]) -> None:
    # Owner-only from the first byte (folders it creates 0700), written atomically: the
    # payloads hold door codes and guest contacts.
    with open_private(path, "w") as handle:
        json.dump(document, handle, indent=2, ensure_ascii=False, default=str)
        handle.write("\n")


def plan_to_file(request: SyncRequest, out: Path) -> tuple[Plan, GuardVerdict, dict[str, Any]]:
    """Map, shape the complete plan of ``request.mapping`` and write the plan file; sends
    nothing, writes nothing else."""
    from connector.pipeline._run import planned

    with planned(request.mapping, request) as (plan, verdict, snapshot):
        document = plan_document(plan, snapshot, mapping=request.mapping, verdict=verdict)
    write_plan_file(out, document)
    return plan, verdict, document


def read_plan_file(path: Path) -> PlanFile:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise PlanFileError(f"cannot read the plan file {path}: {error}") from error
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise PlanFileError(f"{path} is not a pms-sync plan file (format {FORMAT})")
    if document.get("digest") != _digest(document):
        raise PlanFileError(
            f"the plan file {path} was changed after it was written (its digest does not match); "
            "make a new plan with `pms-sync plan MAPPING --out FILE`"
        )
    return PlanFile(
        plan=_plan_of(document),
        mapping=str(document["mapping"]),
        snapshot_location=str(document["snapshot"]["location"]),
        fingerprint=str(document["snapshot"]["fingerprint"]),
        guard=document["guard"],
    )


def _plan_of(document: dict[str, Any]) -> Plan:
    summary = document["summary"]
    changes = pd.DataFrame(document["payloads"], columns=list(CHANGE_COLUMNS))
    window = summary.get("window")
    force = summary.get("force") or {}
    return Plan(
        changes=changes,
        tally=pd.DataFrame(document["tally"], columns=list(_TALLY_COLUMNS)),
        extracted=pd.DataFrame(document["extracted"], columns=list(_EXTRACTED_COLUMNS)),
        window=(
            DateWindow(date.fromisoformat(window["start"]), date.fromisoformat(window["end"]))
            if window
            else None
        ),
        force=Force(
            full_resync=bool(force.get("full_resync")),
            only_ids=frozenset(force["only_ids"]) if force.get("only_ids") else None,
        ),
        # The owner recorded for what apply acknowledges, as a sync of the mapping would.
        connection=summary.get("connection"),
        units_with_stays=pd.DataFrame(
            summary.get("units_with_stays") or [], columns=list(UNIT_STAYS_COLUMNS)
        ),
        entities=tuple(summary.get("entities") or ()),
        properties=tuple(PropertyEffect.from_json_dict(p) for p in summary["properties"]),
        update_sub_units=bool(summary["update_sub_units"]),
        properties_left_active=tuple(summary.get("properties_left_active") or ()),
        awaiting_approval=tuple(HeldWork.from_json_dict(h) for h in summary["awaiting_approval"]),
        waiting_for_units=tuple(
            WaitingForUnit.from_json_dict(w) for w in summary["waiting_for_units"]
        ),
    )


def check_applicable(plan_file: PlanFile, snapshot: SnapshotStore, *, allow: bool) -> None:
    """Refuse a stale plan, and a plan the guard held back unless approved."""
    now = snapshot.fingerprint(plan_file.plan.accounts)
    if now != plan_file.fingerprint:
        raise PlanFileError(
            f"the snapshot {snapshot.location} changed since the plan was made (another sync "
            f"acknowledged or refused records of account(s) "
            f"{', '.join(plan_file.plan.accounts)}): the plan no longer describes what would "
            "change. Nothing was sent; make a new plan with `pms-sync plan MAPPING --out FILE`"
        )
    blocked = plan_file.guard.get("blocked_accounts") or []
    if blocked and not allow:
        raise MassChangeError(
            f"{plan_file.guard.get('message', 'the mass-change guard held this plan back')} "
            "(for a reviewed plan: `pms-sync apply PLAN --allow-mass-change`)"
        )


def _row(row: dict[str, Any]) -> dict[str, Any]:
    """JSON-friendly values: dates as ISO text, missing as None, numpy ints as int."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if value is None or (not isinstance(value, (str, list, dict)) and pd.isna(value)):
            out[key] = None
        elif isinstance(value, (pd.Timestamp, datetime, date)):
            out[key] = pd.Timestamp(value).date().isoformat()
        elif hasattr(value, "item"):
            out[key] = value.item()
        else:
            out[key] = value
    return out


def _digest(document: dict[str, Any]) -> str:
    content = {key: value for key, value in document.items() if key != "digest"}
    text = json.dumps(content, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def apply_plan_file(
    path: Path, request: SyncRequest, *, snapshot_path: str | Path | None = None
) -> SyncReport:
    """Carry out exactly the plan file's plan, property changes included, and record the run
    (``request``: the settings and the approvals; the mapping is the plan file's).

    The snapshot is the one named by ``snapshot_path`` (CLI ``--snapshot``), else the one the
    plan was made against. Parent-failure holdback applies as in any push.
    """
    from connector.accounts import AccountDiscovery
    from connector.client import RunStop
    from connector.pipeline._run import _now, _record_run, _report

    plan_file = read_plan_file(path)
    started = _now()
    request = replace(request, mapping=plan_file.mapping)
    settings = request.settings
    location = snapshot_location(snapshot_path or plan_file.snapshot_location)
    stop = RunStop(settings.push.budget.max_duration_s)
    with (
        stop.signals_handled(),
        Snapshot.open(location, lock_timeout=settings.lock_timeout) as snapshot,
    ):
        check_applicable(plan_file, snapshot, allow=request.allow_mass_change)
        plan = plan_file.plan.released(request.approved)
        # Tokens of accounts without a given one come from the Open API client, if any.
        discovery = AccountDiscovery(settings.open_api, settings.client, snapshot)
        executed = execute_plan(plan, snapshot, discovery, request, stop=stop)
        report = _report(request, started, plan, executed.push, snapshot, discovery)
        _record_run(snapshot, report)
    return report

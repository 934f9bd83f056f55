"""Field-level differences of a plan's changes, for people to review: old → new per field.

An update is compared with the payload the service last acknowledged (from the snapshot); a
create lists its fields as new; a deactivation or cancellation shows its status change. Every
value of a sensitive member (door and Wi-Fi codes, tokens, guest e-mail and phone; see
:mod:`connector.secrets`) is masked, and so is a member under one: a diff names that such a
field changed, never what it was or became.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd

from connector.contract import Entity
from connector.plan._effects import fields_json
from connector.secrets import MASK, is_sensitive
from connector.snapshot import SnapshotStore

_ABSENT = object()


@dataclass(frozen=True)
class FieldChange:
    entity: str
    account_id: str
    record_id: str
    action: str
    field: str  # dotted path, list items by index: unitReservations.0.checkin
    old: Any  # None when absent; masked for sensitive members
    new: Any

    def to_json_dict(self) -> dict[str, Any]:
        return fields_json(self)


def flatten(value: Any, prefix: str = "", masked: bool = False) -> Iterator[tuple[str, Any]]:
    """(dotted path, leaf value) of a JSON value; leaves under a sensitive member are masked."""
    if isinstance(value, dict):
        if not value and prefix:
            yield prefix, {}
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            yield from flatten(item, path, masked or is_sensitive(str(key)))
    elif isinstance(value, list):
        if not value and prefix:
            yield prefix, []
        for index, item in enumerate(value):
            yield from flatten(item, f"{prefix}.{index}", masked)
    else:
        yield prefix, (MASK if masked and value not in (None, "") else value)


def record_differences(old_payload: str | None, new_payload: str) -> list[tuple[str, Any, Any]]:
    """(field, old, new) for every leaf that differs, sorted by field; values masked."""
    old = dict(flatten(json.loads(old_payload))) if old_payload else {}
    new = dict(flatten(json.loads(new_payload)))
    found: list[tuple[str, Any, Any]] = []
    for path in sorted(set(old) | set(new)):
        before, after = old.get(path, _ABSENT), new.get(path, _ABSENT)
        if before == after and before is not _ABSENT:
            # A masked secret that changed looks equal here; compare the raw values below.
            continue
        found.append(
            (path, None if before is _ABSENT else before, None if after is _ABSENT else after)
        )
    if old_payload:
        found += _changed_secrets(old_payload, new_payload, {path for path, _, _ in found})
    return sorted(found, key=lambda item: item[0])


def _changed_secrets(
    old_payload: str, new_payload: str, already: set[str]
) -> list[tuple[str, Any, Any]]:
    # Masking hides a change of a secret's value: name it with both sides masked.
    old_raw = dict(_raw_leaves(json.loads(old_payload)))
    new_raw = dict(_raw_leaves(json.loads(new_payload)))
    old_masked = dict(flatten(json.loads(old_payload)))
    return [
        (path, MASK, MASK)
        for path, value in new_raw.items()
        if path not in already
        and path in old_raw
        and old_raw[path] != value
        and old_masked.get(path) == MASK
    ]


def _raw_leaves(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _raw_leaves(item, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _raw_leaves(item, f"{prefix}.{index}")
    else:
        yield prefix, value


def field_changes(
    changes: pd.DataFrame, snapshot: SnapshotStore, *, limit: int | None = None
) -> list[FieldChange]:
    """Field-level differences of the first ``limit`` changes (all when None), plan order."""
    selected = changes if limit is None else changes.head(limit)
    if not len(selected):
        return []
    old: dict[tuple[str, str, str], str] = {}
    for entity in (Entity.ACCOMMODATION, Entity.RESERVATION):
        rows = selected[selected["entity"] == str(entity)]
        keys = list(zip(rows["account_id"].astype(str), rows["record_id"].astype(str), strict=True))
        for (account, record), payload in snapshot.payloads_of(entity, keys).items():
            old[(str(entity), account, record)] = payload
    found: list[FieldChange] = []
    for row in selected.itertuples(index=False):
        before = old.get((str(row.entity), str(row.account_id), str(row.record_id)))
        for path, was, now in record_differences(before, row.payload):
            found.append(
                FieldChange(
                    str(row.entity),
                    str(row.account_id),
                    str(row.record_id),
                    str(row.action),
                    path,
                    was,
                    now,
                )
            )
    return found


def render_value(value: Any) -> str:
    """A cell of a diff table: JSON text, ``—`` when absent."""
    if value is None:
        return "—"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

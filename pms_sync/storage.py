"""Where mapped records wait between the mapping step and the sync step of a run.

Dagster's default filesystem IO manager stores one object per partition and cannot take the
output of a run that covers a range of partitions (a single-run backfill, the nightly window).
This one stores one pickle per asset and partition range, which is exactly what the next step
of the same run loads. The pickles hold door codes and guest contacts: each is owner-only
(0600) in folders created 0700 (``connector.private_files``).
"""

from __future__ import annotations

import os
import pickle
from collections import OrderedDict
from pathlib import Path
from typing import Any

import dagster as dg

from connector.private_files import open_private
from pms_sync.account_partitions import account_range_of_tags

OPTIONAL_INPUT = "pms_sync/optional"
"""Metadata of an input that may be absent (its asset never materialized): the step gets None."""

_KEPT_OUTPUTS = 8
# Outputs this process wrote, by path, with the identity of the file written: the next step of
# an in-process run takes the object itself instead of reading it back.
_kept: OrderedDict[Path, tuple[tuple[int, int, int], Any]] = OrderedDict()


def _identity(path: Path) -> tuple[int, int, int]:
    status = os.stat(path)
    return status.st_ino, status.st_size, status.st_mtime_ns


def _keep(path: Path, obj: Any) -> None:
    _kept[path] = (_identity(path), obj)
    _kept.move_to_end(path)
    while len(_kept) > _KEPT_OUTPUTS:
        _kept.popitem(last=False)


def _kept_output(path: Path) -> tuple[bool, Any]:
    """The object this process wrote to ``path``, if the file is still the one it wrote (a
    step of another process, or a re-execution, may have replaced it since)."""
    kept = _kept.get(path)
    if kept is None:
        return False, None
    identity, obj = kept
    try:
        return _identity(path) == identity, obj
    except FileNotFoundError:
        return False, None


class MappedRecordsIOManager(dg.ConfigurableIOManager):
    """Pickles step outputs under ``base_dir/<asset key>/<partition range>.pkl``."""

    base_dir: str

    def _path(self, context: dg.OutputContext | dg.InputContext) -> Path:
        key = context.asset_key.path
        if context.has_asset_partitions:
            keys = context.asset_partition_key_range
            name = keys.start if keys.start == keys.end else f"{keys.start}..{keys.end}"
        else:
            name = _accounts_name(context)
        return Path(self.base_dir, *key, f"{name}.pkl")

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        if obj is None:
            return
        # Written then renamed: a crashed step never leaves half a file for the next one to load.
        # The file stays the record of the output: a retry or a re-execution in another
        # process loads it.
        path = self._path(context)
        with open_private(path, "wb") as handle:
            pickle.dump(obj, handle, protocol=pickle.HIGHEST_PROTOCOL)
        _keep(path, obj)

    def load_input(self, context: dg.InputContext) -> Any:
        path = self._path(context)
        if not path.exists() and context.definition_metadata.get(OPTIONAL_INPUT):
            return None
        if not path.exists():
            raise dg.Failure(
                f"{context.asset_key.to_user_string()} has no stored output for "
                f"{path.stem}: materialize it in the same run (select its upstream assets too)",
                allow_retries=False,
            )
        found, obj = _kept_output(path)
        if found:
            return obj
        with path.open("rb") as handle:
            return pickle.load(handle)


def _accounts_name(context: dg.OutputContext | dg.InputContext) -> str:
    """An unpartitioned output's name: ``all``, or in a run of some accounts (account
    partitions) those accounts, so concurrent runs of different accounts keep their own."""
    try:
        tags = context.step_context.dagster_run.tags
    except dg.DagsterInvariantViolationError:  # no run behind it (a direct call)
        return "all"
    bounds = account_range_of_tags(tags)
    if bounds is None:
        return "all"
    first, last = bounds
    return f"accounts={first}" if first == last else f"accounts={first}..{last}"

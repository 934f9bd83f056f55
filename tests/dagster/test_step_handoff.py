"""The mapped records a step hands to the next: kept in memory within the run's process,
and always written, so that a retry or a re-execution in another process finds them."""

from __future__ import annotations

import pickle
import stat
from pathlib import Path

import dagster as dg

from pms_sync.storage import MappedRecordsIOManager

KEY = dg.AssetKey(["hotel", "mapped_accommodations"])


def _contexts(io: MappedRecordsIOManager) -> tuple[dg.OutputContext, dg.InputContext]:
    output = dg.build_output_context(asset_key=KEY)
    return output, dg.build_input_context(asset_key=KEY, upstream_output=output)


def test_the_next_step_of_the_process_gets_the_object_itself_and_the_file_is_written(
    tmp_path: Path,
) -> None:
    io = MappedRecordsIOManager(base_dir=str(tmp_path))
    output, given = _contexts(io)
    handed = {"records": [1, 2, 3]}

    io.handle_output(output, handed)
    loaded = io.load_input(given)

    assert loaded is handed  # not read back and unpickled
    written = tmp_path / "hotel" / "mapped_accommodations" / "all.pkl"
    assert pickle.loads(written.read_bytes()) == handed
    assert stat.S_IMODE(written.stat().st_mode) == 0o600


def test_a_file_replaced_by_another_process_is_read_not_the_kept_object(tmp_path: Path) -> None:
    io = MappedRecordsIOManager(base_dir=str(tmp_path))
    output, given = _contexts(io)
    io.handle_output(output, {"run": "first"})
    # Another process (a re-execution, a concurrent run) writes the same output afterwards.
    written = tmp_path / "hotel" / "mapped_accommodations" / "all.pkl"
    replacement = written.with_name("other.tmp")
    replacement.write_bytes(pickle.dumps({"run": "second"}))
    replacement.replace(written)

    assert io.load_input(given) == {"run": "second"}

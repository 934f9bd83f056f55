"""A CSV or Parquet file written back whole, owner-only from its first byte (it holds guest
links or events), atomically: a reader never sees half a file."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from connector.private_files import open_private
from connector.writeback._result import WriteBackError, WriteResult


def write_file(rows: pd.DataFrame, path: Path) -> WriteResult:
    """Replace ``path`` (``.csv`` or ``.parquet``) by ``rows``."""
    existed = path.exists()
    suffix = path.suffix.lower()
    try:
        if suffix == ".csv":
            with open_private(path, "w") as handle:
                rows.to_csv(handle, index=False, lineterminator="\n")
        elif suffix == ".parquet":
            with open_private(path, "wb") as handle:
                rows.to_parquet(handle, index=False)
        else:
            raise WriteBackError(f"{path}: expected a .csv or .parquet file, got {suffix!r}")
    except OSError as error:
        raise WriteBackError(f"cannot write {path}: {error.strerror or error}") from None
    return WriteResult(destination=str(path), rows=len(rows), created=not existed)

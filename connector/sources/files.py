"""Resolving the paths and globs of file inputs, relative to the mapping file."""

from __future__ import annotations

import glob
from pathlib import Path

from connector.errors import SourceError


def resolve_files(pattern: str, base_dir: Path, input_name: str) -> list[Path]:
    """The files a path or glob names, in name order; an error when there are none."""
    candidate = Path(pattern).expanduser()
    full = candidate if candidate.is_absolute() else base_dir / candidate
    if glob.has_magic(str(full)):
        matches = sorted(Path(match) for match in glob.glob(str(full)) if Path(match).is_file())
        if not matches:
            raise SourceError(f"no file matches {pattern!r}", source=input_name)
        return matches
    if not full.is_file():
        raise SourceError(f"file not found: {full}", source=input_name)
    return [full]

"""Resolving the paths and globs of file inputs, relative to the mapping file."""

from __future__ import annotations

import glob
from dataclasses import dataclass
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


@dataclass(frozen=True)
class FileState:
    """What tells a file rewritten or replaced apart from the one read before: its inode (a
    new file renamed into place), size and modification time."""

    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> FileState:
        """Raises ``OSError`` when the file cannot be read (gone, replaced mid-write)."""
        status = path.stat()
        return cls(inode=status.st_ino, size=status.st_size, mtime_ns=status.st_mtime_ns)

"""Files that hold secrets or guest data: readable by their owner only, from the first byte.

Tokens, door and Wi-Fi codes and guest contacts live in a few files pms-sync writes: the Open
API token cache, plan files (``plan --out``), the sandbox's data file, the Dagster IO manager's
stored step outputs. Each is created 0600 in folders created 0700, whatever the umask, and
written atomically: the content goes to a temporary file beside the target, created 0600 with
a unique name (never a leftover file whose mode would carry over), then renamed over it.

Folders that already exist keep their mode: pms-sync does not change a folder it did not
create (a home directory, ``/tmp``, a shared data folder). Files it owns are tightened to 0600
when it writes them again.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any, Literal

PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Create the folder ``path`` and its missing parents, each 0700; existing ones stay as they are."""
    folder = Path(path)
    missing: list[Path] = []
    current = folder
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    for created in reversed(missing):
        try:
            created.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            continue  # another process made it first: not ours to change
        os.chmod(created, PRIVATE_DIR_MODE)  # the umask may have taken bits off mkdir's mode
    return folder


@contextmanager
def open_private(
    path: str | os.PathLike[str], mode: Literal["wb", "w"] = "wb", *, encoding: str = "utf-8"
) -> Iterator[IO[Any]]:
    """``with open_private(path) as handle:`` write ``path`` atomically, 0600, folders 0700.

    The target is replaced only when the block ends without an exception; otherwise it keeps
    its previous content and the temporary file is removed.
    """
    target = Path(path)
    private_dir(target.parent)
    descriptor, temporary = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
    )
    try:
        os.fchmod(descriptor, PRIVATE_FILE_MODE)  # mkstemp's 0600, whatever the umask
        with os.fdopen(descriptor, mode, encoding=None if "b" in mode else encoding) as handle:
            yield handle
        os.replace(temporary, target)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def write_private(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, owner-only (see :func:`open_private`)."""
    with open_private(path, "wb") as handle:
        handle.write(data)


def ensure_private_file(path: str | os.PathLike[str]) -> Path:
    """Make ``path`` exist as an owner-only file, for files a library then writes in place.

    SQLite creates its database file with the umask's mode (0644): created empty here first,
    0600, it keeps that mode, and so do the journal files SQLite derives from it. A file that
    exists already is tightened to 0600.
    """
    target = Path(path)
    private_dir(target.parent)
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT, PRIVATE_FILE_MODE)
    try:
        os.fchmod(descriptor, PRIVATE_FILE_MODE)
    finally:
        os.close(descriptor)
    return target

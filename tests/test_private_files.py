"""Files that hold secrets or guest data are owner-only from the first byte, whatever the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from connector.private_files import ensure_private_file, open_private, write_private


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    # The usual default: without care, files would be 0644 and folders 0755.
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def test_a_private_file_is_0600_and_the_folders_created_for_it_0700(tmp_path: Path) -> None:
    target = tmp_path / "cache" / "nested" / "tokens.json"

    write_private(target, b'{"token": "x"}')

    assert target.read_bytes() == b'{"token": "x"}'
    assert mode(target) == 0o600
    assert mode(tmp_path / "cache") == mode(tmp_path / "cache" / "nested") == 0o700


def test_an_existing_file_readable_by_others_is_replaced_by_an_owner_only_one(
    tmp_path: Path,
) -> None:
    target = tmp_path / "plan.json"
    target.write_text("old")
    target.chmod(0o644)
    # A leftover temporary file of an older version must not lend its mode either.
    (tmp_path / "plan.tmp").write_text("stale")

    with open_private(target, "w") as handle:
        handle.write("new")

    assert target.read_text() == "new"
    assert mode(target) == 0o600


def test_folders_that_exist_keep_their_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)

    write_private(shared / "data" / "file.bin", b"x")

    assert mode(shared) == 0o755
    assert mode(shared / "data") == 0o700


def test_a_failed_write_keeps_the_previous_content_and_leaves_no_temporary_file(
    tmp_path: Path,
) -> None:
    target = tmp_path / "records.pkl"
    write_private(target, b"first")

    with pytest.raises(RuntimeError), open_private(target) as handle:
        handle.write(b"half")
        raise RuntimeError("the step crashed")

    assert target.read_bytes() == b"first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["records.pkl"]


def test_a_file_another_library_writes_is_created_empty_0600_or_tightened(
    tmp_path: Path,
) -> None:
    fresh = ensure_private_file(tmp_path / "data" / "sandbox.sqlite3")
    existing = tmp_path / "old.sqlite3"
    existing.write_bytes(b"content")
    existing.chmod(0o644)

    ensure_private_file(existing)

    assert (fresh.read_bytes(), mode(fresh), mode(fresh.parent)) == (b"", 0o600, 0o700)
    assert (existing.read_bytes(), mode(existing)) == (b"content", 0o600)

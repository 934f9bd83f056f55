"""The bundled hotel sample, pinned to a day: the committed one follows the current month."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HOTEL = Path(__file__).resolve().parents[1] / "mappings" / "hotel"
PAST_ANCHOR = "2025-07-02"
"""Stays from 2025-01-01 to mid 2026: all ended, so no unit is held for its guests."""


def pinned_hotel(folder: Path, anchor: str = PAST_ANCHOR) -> Path:
    """A copy of the hotel example in ``folder`` with its sample generated around ``anchor``;
    returns its mapping file."""
    shutil.copytree(HOTEL, folder)
    subprocess.run(
        [
            sys.executable,
            str(folder / "generate.py"),
            "--anchor",
            anchor,
            "--out",
            str(folder / "data"),
        ],
        check=True,
    )
    return folder / "mapping.yaml"

"""The bundled sample exports, kept around the current date for ``make demo``.

Each ``mappings/<example>/generate.py`` writes its sample around an anchor day and records it in
``sample.json``. A sample whose anchor month is not the current one is stale: its stays drift out
of the nightly window (last month to eleven months ahead) and a scheduled run would sync none.
``refresh_stale_samples`` regenerates those with the same arguments around this month.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from datetime import date
from pathlib import Path

MANIFEST = "sample.json"


@dataclass(frozen=True)
class Sample:
    generator: Path
    manifest: Path

    @property
    def anchor(self) -> date:
        return date.fromisoformat(json.loads(self.manifest.read_text())["anchor"])

    def arguments(self) -> list[str]:
        options: list[str] = []
        for name, value in json.loads(self.manifest.read_text()).get("arguments", {}).items():
            flag = "--" + name.replace("_", "-")
            if value is True:
                options.append(flag)
            elif value is not False and value is not None:
                options += [flag, str(value)]
        return options

    def stale(self, today: date) -> bool:
        return (self.anchor.year, self.anchor.month) != (today.year, today.month)

    def regenerate(self, today: date) -> None:
        anchor = today.replace(day=1).isoformat()
        command = [sys.executable, str(self.generator), *self.arguments(), "--anchor", anchor]
        command += ["--out", str(self.manifest.parent)]
        subprocess.run(command, check=True, capture_output=True, text=True)


def samples(mappings: Path) -> list[Sample]:
    """The generated samples of the mappings folder (a generator and its manifest)."""
    found = []
    for generator in sorted(mappings.glob("*/generate.py")):
        for manifest in (generator.parent / "data" / MANIFEST, generator.parent / MANIFEST):
            if manifest.exists():
                found.append(Sample(generator, manifest))
                break
    return found


def refresh_stale_samples(mappings: Path, today: date | None = None) -> list[Sample]:
    """Regenerate the samples generated around another month than ``today``'s; return them."""
    today = today or date.today()
    stale = [sample for sample in samples(mappings) if sample.stale(today)]
    for sample in stale:
        sample.regenerate(today)
    return stale

"""The table of every setting, as docs/configuration.md shows it (a test keeps them equal)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from connector.config._model import SECTIONS
from connector.config._reading import Section


def settings_table() -> str:
    """One Markdown row per setting: variable, meaning, CLI flag, Dagster member, default."""
    rows = [
        "| variable | setting | flag | Dagster member | default |",
        "|---|---|---|---|---|",
    ]
    for name, section in SECTIONS.items():
        for field in section.model_fields:
            flag = section.flag(field)
            member = section.dagster(field)
            rows.append(
                f"| `{section.variable(field)}` | {name}: {_cell(section.description(field))} "
                f"| {f'`{flag}`' if flag else ''} | {f'`{member}`' if member else ''} "
                f"| {_default(section, field)} |"
            )
    return "\n".join(rows) + "\n"


def _default(section: type[Section], field: str) -> str:
    shown = section.shown(field)
    if shown:
        return _cell(shown)
    value: Any = section.default(field)
    if value is None or value == ():
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, Path):
        return f"`{value}`"
    return f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")

"""`pms-sync init`'s draft scored against a hand-finished mapping of the same export.

Every member the finished mapping sets (flattened: ``reservation.unitReservations.checkin``) is
**right** when the draft's member reads the same columns (joined columns named by the input
they come from, so aliases do not matter) and, for a ``map``, sends the same values to
CANCELLED; **wrong** when the draft sets it otherwise; **to fill in** when the draft leaves a
``fill_in`` placeholder or nothing. Formats, regular expressions and the like are not compared:
the score says whether init found the right source, which is what a newcomer fixes by hand.

``python -m tests.mapping.gallery.score`` prints the table of every shape and its misses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from connector.mapping.expressions import SOURCE_KEYS

RIGHT, WRONG, TO_FILL_IN = "right", "wrong", "to fill in"
_PLACEHOLDER = re.compile(r"(?<!\{)\{([^{}|@][^{}|]*)(\|[^{}]*)?\}")


@dataclass(frozen=True)
class Source:
    """What an expression reads: its columns, constants and row numbers, and the values its
    map sends to CANCELLED."""

    reads: frozenset[str]
    cancelled: frozenset[str] = frozenset()


@dataclass
class Score:
    """One shape's members by verdict, with the draft's and the finished expressions."""

    shape: str
    verdicts: dict[str, str] = field(default_factory=dict)
    misses: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # member → (draft, done)

    def count(self, verdict: str) -> int:
        return sum(1 for found in self.verdicts.values() if found == verdict)

    @property
    def right(self) -> int:
        return self.count(RIGHT)

    @property
    def wrong(self) -> int:
        return self.count(WRONG)

    @property
    def to_fill_in(self) -> int:
        return self.count(TO_FILL_IN)

    def row(self) -> str:
        return f"| {self.shape} | {self.right} | {self.wrong} | {self.to_fill_in} |"


def members(mapping: dict[str, Any]) -> dict[str, tuple[Any, dict[str, str]]]:
    """Each member an entity sets, by flattened path: its expression and the entity's aliases
    (join alias → input, the entity's own input under "")."""
    found: dict[str, tuple[Any, dict[str, str]]] = {}
    for entity, spec in (mapping.get("entities") or {}).items():
        aliases = {"": spec["input"]}
        aliases |= {join.get("as", join["input"]): join["input"] for join in spec.get("joins", [])}
        for path, expression in _flatten(spec.get("fields") or {}, ()):
            found[".".join((entity, *path))] = (expression, aliases)
    return found


def _flatten(fields: dict[str, Any], path: tuple[str, ...]) -> list[tuple[tuple[str, ...], Any]]:
    flat: list[tuple[tuple[str, ...], Any]] = []
    for key, value in fields.items():
        if key == "unitReservations" and isinstance(value, dict) and "fields" in value:
            flat += _flatten(value["fields"], (*path, key))
        elif isinstance(value, dict) and "input" in value:
            flat.append(((*path, key), {"list_from": value["input"]}))
        elif isinstance(value, dict) and not set(SOURCE_KEYS) & set(value):
            flat += _flatten(value, (*path, key))
        elif not isinstance(value, list):  # fixed lists (bed types) are not scored
            flat.append(((*path, key), value))
    return flat


def source(expression: Any, aliases: dict[str, str]) -> Source | None:
    """What ``expression`` reads; None for a placeholder."""
    if isinstance(expression, dict) and "fill_in" in expression:
        return None
    reads = frozenset(_reads(expression, aliases))
    cancelled: frozenset[str] = frozenset()
    if isinstance(expression, dict) and isinstance(expression.get("map"), dict):
        cancelled = frozenset(
            str(key) for key, value in expression["map"].items() if value == "CANCELLED"
        )
    return Source(reads, cancelled)


def _reads(expression: Any, aliases: dict[str, str]) -> set[str]:
    if isinstance(expression, str):
        return {_column(expression, aliases)}
    if not isinstance(expression, dict):
        return {f"={expression}"}
    found: set[str] = set()
    for key, value in expression.items():
        if key == "column":
            found.add(_column(str(value), aliases))
        elif key == "constant":
            found.add(f"={value}")
        elif key == "template":
            found |= {_column(name.strip(), aliases) for name, _ in _PLACEHOLDER.findall(value)}
            found |= {f"@{name}" for name in re.findall(r"\{@(\w+)\}", value)}
        elif key == "row_number":
            found.add("@row_number")
        elif key == "list_from":
            found.add(f"list:{value}")
        elif key == "sql":
            found.add(f"sql:{value}")
        elif key in ("coalesce", "sum", "product", "difference"):
            for item in value:
                found |= _reads(item, aliases)
        elif key == "date_parts":
            found |= {_column(str(item), aliases) for item in value.values()}
        elif key in ("add_days", "subtract_days") and not isinstance(value, int | float):
            found |= _reads(value, aliases)
    return found


def _column(name: str, aliases: dict[str, str]) -> str:
    """A column named by the input it belongs to: ``rt.name`` → ``room_types.name``."""
    alias, dot, rest = name.partition(".")
    if dot and alias in aliases:
        return f"{aliases[alias]}.{rest}"
    return f"{aliases['']}.{name}"


def score(shape: str, draft: dict[str, Any], finished: dict[str, Any]) -> Score:
    """The draft's members judged against the finished mapping's."""
    result = Score(shape)
    drafted = members(draft)
    for path, (expression, aliases) in members(finished).items():
        done = source(expression, aliases)
        found = source(*drafted[path]) if path in drafted else None
        verdict = TO_FILL_IN if found is None else RIGHT if found == done else WRONG
        result.verdicts[path] = verdict
        if verdict != RIGHT:
            result.misses[path] = (drafted.get(path, (None,))[0], expression)
    return result


def table(scores: list[Score]) -> str:
    """The scores as a Markdown table, one row per shape."""
    lines = ["| shape | right | wrong | to fill in |", "|---|---|---|---|"]
    return "\n".join([*lines, *(found.row() for found in scores)])


if __name__ == "__main__":
    import sys
    import tempfile
    from pathlib import Path

    from tests.mapping.test_gallery import gallery_scores

    with tempfile.TemporaryDirectory() as folder:
        scores = gallery_scores(Path(folder))
    sys.stdout.write(table(scores) + "\n")
    for found in scores:
        for path, (draft, done) in found.misses.items():
            sys.stdout.write(
                f"{found.shape} {path}: {found.verdicts[path]}: {draft!r} / {done!r}\n"
            )

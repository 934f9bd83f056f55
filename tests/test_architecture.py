"""The architecture page matches the code: docs/architecture.md's stage table is the rule.

The table names every unit of ``connector/`` (a package or a root module) and ``pms_sync``, its
public names and the units it may import. These tests read the table and every import of
``connector/`` and ``pms_sync/`` (module level, inside functions and under ``TYPE_CHECKING``
alike), so a new dependency between stages, a reach into another package's private module or a
new unit shows up here until the page says so.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
TABLE_MARKER = "<!-- the stage table: tests/test_architecture.py parses it -->"
CHECKED = ("connector", "pms_sync")
BACK_EDGE = "↩"


@dataclass(frozen=True)
class Row:
    unit: str
    public_names: tuple[str, ...]
    may_import: frozenset[str]
    back_edges: frozenset[str]


def _full_name(short: str) -> str:
    return short if short in CHECKED else f"connector.{short}"


def stage_table() -> dict[str, Row]:
    lines = PAGE.read_text().splitlines()
    start = lines.index(TABLE_MARKER) + 3  # the marker, the header, the separator
    rows: dict[str, Row] = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        _stage, unit, names, may_import = (cell.strip() for cell in line.strip("|").split("|"))
        allowed = re.findall(rf"`([\w.]+)`({BACK_EDGE})?", may_import)
        rows[unit.strip("`")] = Row(
            unit=unit.strip("`"),
            public_names=tuple(re.findall(r"`([\w.]+)`", names)),
            may_import=frozenset(_full_name(name) for name, _ in allowed),
            back_edges=frozenset(_full_name(name) for name, back in allowed if back),
        )
    return rows


def code_units() -> set[str]:
    """Every package and root module of connector/, and pms_sync."""
    connector = ROOT / "connector"
    units = {f"connector.{p.stem}" for p in connector.glob("*.py") if p.stem != "__init__"}
    units |= {f"connector.{p.parent.name}" for p in connector.glob("*/__init__.py")}
    return units | {"pms_sync"}


def unit_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] == "pms_sync":
        return "pms_sync"
    if parts[0] != "connector" or len(parts) < 2:
        return None
    return f"connector.{parts[1]}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@dataclass(frozen=True)
class Import:
    path: Path
    line: int
    module: str  # a module, or a module's attribute (a name imported from it)

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def imports_of(path: Path) -> Iterator[Import]:
    """Every connector/pms_sync import of a file, as the dotted names it reaches."""
    own = module_name(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(path, node.lineno, alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            for alias in node.names:
                yield Import(path, node.lineno, f"{module}.{alias.name}")


def checked_files() -> list[Path]:
    return sorted(p for name in CHECKED for p in (ROOT / name).rglob("*.py"))


def is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_every_unit_of_the_code_has_a_row_and_every_row_a_unit() -> None:
    table = set(stage_table())
    units = code_units()
    assert units - table == set(), "units missing from docs/architecture.md's stage table"
    assert table - units == set(), "rows of docs/architecture.md's stage table with no code"


def test_units_import_only_what_the_table_allows() -> None:
    table = stage_table()
    offences = []
    for path in checked_files():
        own = unit_of(module_name(path))
        for found in imports_of(path):
            target = unit_of(found.module)
            if own is None or target is None or target == own or target not in table:
                continue  # a unit with no row fails the test above
            if target not in table[own].may_import:
                offences.append(f"{found.where()}: {own} imports {found.module}")
    assert offences == [], "imports the stage table does not allow:\n" + "\n".join(offences)


def test_nothing_imports_another_package_s_private_modules() -> None:
    offences = []
    for path in checked_files():
        own = unit_of(module_name(path))
        for found in imports_of(path):
            target = unit_of(found.module)
            if target is None or target == own:
                continue
            inner = found.module.split(".")[len(target.split(".")) :]
            # A private segment that is a module (a private *name* of a public module is the
            # package's business, e.g. tests reaching a helper; not checked here).
            for depth, segment in enumerate(inner, start=1):
                dotted = ".".join([target, *inner[:depth]])
                if segment.startswith("_") and not segment.startswith("__") and is_module(dotted):
                    offences.append(f"{found.where()}: {own} imports {dotted}")
                    break
    assert offences == [], "private modules imported from outside:\n" + "\n".join(offences)


def test_the_public_names_of_the_page_exist() -> None:
    missing = []
    for row in stage_table().values():
        package = importlib.import_module(row.unit)
        for name in row.public_names:
            head, _, attribute = name.rpartition(".")
            owner = importlib.import_module(f"{row.unit}.{head}") if head else package
            if not hasattr(owner, attribute):
                missing.append(f"{row.unit}: {name}")
            elif not head and hasattr(package, "__all__") and name not in package.__all__:
                missing.append(f"{row.unit}: {name} (not in __all__)")
    assert missing == []


def test_a_package_with_private_modules_re_exports_its_public_names() -> None:
    packages = sorted(u for u in code_units() if (ROOT / u.replace(".", "/")).is_dir())
    with_private = [
        package
        for package in packages
        if any(
            not p.name.startswith("__") for p in (ROOT / package.replace(".", "/")).glob("_*.py")
        )
    ]
    assert "connector.plan" in with_private and "connector.push" in with_private
    silent = [p for p in with_private if not getattr(importlib.import_module(p), "__all__", None)]
    assert silent == [], "packages whose __init__ re-exports nothing"


def test_the_table_without_its_back_edges_has_no_cycle() -> None:
    table = stage_table()
    edges = {unit: row.may_import - row.back_edges for unit, row in table.items()}
    done: list[str] = []
    remaining = dict(edges)
    while remaining:
        ready = sorted(u for u, needs in remaining.items() if needs <= set(done))
        assert ready, f"a cycle among {sorted(remaining)}"
        done += ready
        for unit in ready:
            del remaining[unit]
    assert set(done) == set(table)


def test_the_back_edges_are_imports_the_code_makes() -> None:
    """A back edge is an exception: it stays on the page only while the code needs it."""
    table = stage_table()
    made = {
        (unit_of(module_name(path)), unit_of(found.module))
        for path in checked_files()
        for found in imports_of(path)
    }
    declared = {(unit, back) for unit, row in table.items() for back in row.back_edges}
    assert declared - made == set()

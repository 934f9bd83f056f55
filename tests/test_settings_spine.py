"""One configuration: connector.config declares every PMS_SYNC_* setting, nothing else reads
one, and the documented table is the model's."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from connector.config import SECTIONS, parse_flag, settings_table

ROOT = Path(__file__).resolve().parents[1]
SETTINGS_PACKAGE = ROOT / "connector" / "config"
SCANNED = ("connector", "pms_sync", "assets")
TABLE_MARKER = "<!-- generated from connector.config; tests/test_settings_spine.py checks it -->"

EXCEPTIONS: dict[str, str] = {
    # path relative to the repository -> why it may read a PMS_SYNC_* variable itself.
    # None today: the sandbox's admin token is routed through SandboxSection too.
}

ENVIRONMENT_NAMES = frozenset({"environ", "getenv", "env", "environ_get"})


def _prefixed_constants(tree: ast.Module) -> set[str]:
    """Module-level names bound to a PMS_SYNC_* literal (``X_VARIABLE = "PMS_SYNC_X"``)."""
    names = set()
    for node in tree.body:
        if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
            continue
        value = node.value.value if isinstance(node.value, ast.Constant) else None
        if isinstance(value, str) and value.startswith("PMS_SYNC_"):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def _mentions_environment(node: ast.AST) -> bool:
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name) and inner.id in ENVIRONMENT_NAMES:
            return True
        if isinstance(inner, ast.Attribute) and inner.attr in ENVIRONMENT_NAMES:
            return True
    return False


def _names_a_variable(node: ast.AST, constants: set[str]) -> bool:
    for inner in ast.walk(node):
        if isinstance(inner, ast.Constant) and str(inner.value).startswith("PMS_SYNC_"):
            return True
        if isinstance(inner, ast.Name) and inner.id in constants:
            return True
    return False


def environment_reads(source: str) -> Iterator[int]:
    """Lines that read a PMS_SYNC_* variable: an environment lookup (``os.environ[...]``,
    ``.get``, ``getenv``, ``in os.environ``, a mapping named ``env``) naming one, or a click
    option reading one itself (``envvar=``)."""
    tree = ast.parse(source)
    constants = _prefixed_constants(tree)
    for node in ast.walk(tree):
        lookup = isinstance(node, ast.Call | ast.Subscript | ast.Compare)
        if lookup and _mentions_environment(node) and _names_a_variable(node, constants):
            yield node.lineno
        envvar = isinstance(node, ast.keyword) and node.arg == "envvar"
        if envvar and _names_a_variable(node.value, constants):
            yield node.value.lineno


def scanned_files() -> list[Path]:
    return sorted(
        path
        for folder in SCANNED
        for path in (ROOT / folder).rglob("*.py")
        if SETTINGS_PACKAGE not in path.parents
    )


def test_no_module_outside_the_settings_package_reads_a_pms_sync_variable() -> None:
    offences = []
    for path in scanned_files():
        relative = str(path.relative_to(ROOT))
        if relative in EXCEPTIONS:
            continue
        for line in sorted(set(environment_reads(path.read_text()))):
            offences.append(f"{relative}:{line}")
    assert offences == [], (
        "PMS_SYNC_* variables read outside connector/config (declare the setting in "
        "connector/config/_model.py and read its section):\n" + "\n".join(offences)
    )


@pytest.mark.parametrize(
    "source",
    [
        'import os\nvalue = os.environ.get("PMS_SYNC_CONCURRENCY")',
        'import os\nvalue = os.getenv("PMS_SYNC_CONCURRENCY", "16")',
        'import os\nVARIABLE = "PMS_SYNC_DEBUG"\ndebug = os.environ[VARIABLE]',
        'import os\nflag = "PMS_SYNC_DEBUG" in os.environ',
        'def read(env):\n    return env.get("PMS_SYNC_TOKEN")',
        'import click\noption = click.option("--x", envvar="PMS_SYNC_X")',
    ],
)
def test_the_check_finds_every_way_of_reading_a_variable(source: str) -> None:
    assert list(environment_reads(source))


def test_a_message_naming_a_variable_is_no_read() -> None:
    source = 'import os\nhint = "set PMS_SYNC_TOKEN"\nhome = os.environ.get("HOME")'
    assert list(environment_reads(source)) == []


def test_every_exception_is_a_file_that_exists() -> None:
    assert all((ROOT / path).is_file() for path in EXCEPTIONS)


def test_each_variable_is_declared_once() -> None:
    variables = [s.variable(f) for s in SECTIONS.values() for f in s.model_fields]
    assert len(variables) == len(set(variables))
    assert all(v.startswith("PMS_SYNC_") for v in variables)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("on", True),
        ("TRUE", True),
        (" yes", True),
        ("1", True),
        ("enabled", True),
        ("off ", False),
        ("False", False),
        ("no", False),
        ("0", False),
        ("disabled", False),
    ],
)
def test_on_off_values_read_one_way(text: str, expected: bool) -> None:
    assert parse_flag(text) is expected


def test_the_documented_table_is_the_models() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    assert TABLE_MARKER in page
    documented = page.split(TABLE_MARKER, 1)[1].lstrip("\n")
    table = documented[: documented.index("\n\n") + 1] if "\n\n" in documented else documented
    assert table == settings_table(), (
        "docs/configuration.md's table differs from connector.config: paste the output of "
        "`python -c 'from connector.config import settings_table; print(settings_table())'`"
    )

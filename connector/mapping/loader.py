"""Reading a mapping file: YAML with line numbers, ${ENV_VAR} references, schema validation.

A value read from an environment variable whose name says secret (``${PMS_SYNC_TOKEN}``,
``${DB_PASSWORD}``; the password of a ``${PMS_DB_URL}``) is registered with
:func:`connector.secrets.register_secret`, so it is masked wherever it could be shown.

Every error names the file, the line and the member (``entities.reservation.fields.id``), so a
data engineer can jump straight to the mistake.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from connector.errors import MappingError
from connector.mapping.checks import expression_problems
from connector.mapping.model import Mapping
from connector.secrets import register_environment_value

MAX_NODES = 50_000
"""Upper bound on YAML nodes after alias expansion: a "billion laughs" file stops here."""

_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

Path_ = tuple[str | int, ...]


class _Builder:
    """Turns a composed YAML node tree into plain data, remembering each member's line."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.lines: dict[Path_, int] = {}
        self.nodes = 0
        self._constructor = yaml.constructor.SafeConstructor()

    def build(self, node: yaml.Node, path: Path_) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise MappingError(
                f"the file expands to more than {MAX_NODES} YAML nodes (aliases repeated too often)",
                file=self.file,
                line=node.start_mark.line + 1,
            )
        self.lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            result: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    raise MappingError(
                        "merge keys (<<) are not supported; write the members out",
                        file=self.file,
                        line=key_node.start_mark.line + 1,
                    )
                if not isinstance(key_node, yaml.ScalarNode):
                    raise MappingError(
                        "mapping keys must be plain values",
                        file=self.file,
                        line=key_node.start_mark.line + 1,
                    )
                # Keys are always text: YAML 1.1 would read `on:` or `yes:` as booleans.
                key = key_node.value
                if key in result:
                    raise MappingError(
                        f"member {key!r} appears twice",
                        file=self.file,
                        line=key_node.start_mark.line + 1,
                        member=".".join(str(part) for part in (*path, key)),
                    )
                self.lines[(*path, key)] = key_node.start_mark.line + 1
                result[key] = self.build(value_node, (*path, key))
            return result
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, index)) for index, item in enumerate(node.value)]
        if node.tag == "tag:yaml.org,2002:bool" and node.value.lower() not in ("true", "false"):
            # YAML 1.2 semantics: only true/false are booleans; Y, yes, on, off stay text.
            return self._resolve_env(node.value, path, node.start_mark.line + 1)
        value = self._constructor.construct_object(node)
        if isinstance(value, str):
            return self._resolve_env(value, path, node.start_mark.line + 1)
        if not isinstance(value, str | int | float | bool | type(None)):
            # Dates and timestamps would arrive as Python objects; a mapping means the text.
            return node.value
        return value

    def _resolve_env(self, text: str, path: Path_, line: int) -> str:
        _refuse_reference_in_query(text, path, self.file, line)

        def replace(match: re.Match[str]) -> str:
            name, fallback = match.group(1), match.group(2)
            value = os.environ.get(name)
            if value is None or value == "":
                if fallback is not None:
                    return fallback
                raise MappingError(
                    f"environment variable {name} is not set (referenced as ${{{name}}})",
                    file=self.file,
                    line=line,
                    member=".".join(str(part) for part in path),
                )
            # A token, password or code read from the environment is masked in every sink from
            # now on (connector.secrets.is_secret_variable); ids such as ${HOTEL_BER_ACCOUNT}
            # and fallbacks written in the file are not secrets.
            register_environment_value(name, value)
            return value

        return _ENV_REFERENCE.sub(replace, text)


def _refuse_reference_in_query(text: str, path: Path_, file: str, line: int) -> None:
    """An SQL input's query text takes no ${ENV_VAR}: a value pasted into SQL can change which
    rows are read (``' OR '1'='1``). It goes to params:, bound by the database driver."""
    if len(path) != 3 or path[0] != "inputs" or path[2] != "query":
        return
    found = _ENV_REFERENCE.search(text)
    if found is None:
        return
    variable = found.group(1)
    parameter = variable.lower()
    raise MappingError(
        f"${{{variable}}} in a query's text is refused: a value pasted into SQL can change which "
        f"rows are read; write a bind parameter :{parameter} in the query and give its value "
        f'in params: {{{parameter}: "${{{variable}}}"}}',
        file=file,
        line=line,
        member=".".join(str(part) for part in path),
    )


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _dedented_line(text: str, line: int) -> int | None:
    """The line a "mapping values are not allowed here" error really is about, if dedented.

    A member indented too little (``  street: x`` among ``      name: y``) is valid YAML on
    its own line; the parser only fails on the next line, indented deeper again, which cannot
    continue it. That earlier line is the mistake.
    """
    lines = text.splitlines()
    meaningful = [
        number
        for number in range(1, min(line, len(lines)) + 1)
        if lines[number - 1].strip() and not lines[number - 1].lstrip().startswith("#")
    ]
    if len(meaningful) < 3 or meaningful[-1] != line:
        return None
    before_previous, previous = meaningful[-3], meaningful[-2]
    indents = [_indent(lines[number - 1]) for number in (before_previous, previous, line)]
    if indents[1] < indents[0] and indents[2] > indents[1] and ":" in lines[previous - 1]:
        return previous
    return None


def _read_yaml(path: Path, what: str = "mapping file") -> tuple[Any, dict[Path_, int]]:
    """The file's data and the line of each member; ``what`` names the kind of file in
    errors (the webhooks files of ``connector.webhooks`` are read the same way)."""
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MappingError(f"{what} not found", file=file) from None
    except (OSError, UnicodeDecodeError) as error:
        raise MappingError(f"cannot read the {what}: {error}", file=file) from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark else None
        message = f"invalid YAML: {error.problem or error}"
        dedented = (
            _dedented_line(text, line)
            if line and error.problem == "mapping values are not allowed here"
            else None
        )
        if dedented is not None:
            shown = text.splitlines()[dedented - 1].strip()
            line, message = (
                dedented,
                (
                    f"invalid YAML: line {dedented} ({shown!r}) is indented less than the line "
                    f"before it, and the next line deeper again; indent it like its neighbours "
                    f"(the parser says: {error.problem} on the next line)"
                ),
            )
        raise MappingError(message, file=file, line=line) from None
    except yaml.YAMLError as error:
        raise MappingError(f"invalid YAML: {error}", file=file) from None
    if root is None:
        raise MappingError(f"the {what} is empty", file=file, line=1)
    builder = _Builder(file)
    data = builder.build(root, ())
    if not isinstance(data, dict):
        raise MappingError(f"a {what} must be a YAML mapping (key: value)", file=file, line=1)
    return data, builder.lines


_UNION_TAGS = frozenset({"expression", "column", "constant", "rows", "list", "csv", "xlsx", "sql"})


def _member_path(location: tuple[str | int, ...], data: Any) -> Path_:
    """The error location restricted to members that exist in the file's data.

    pydantic inserts union tags (``expression``, ``rows``) into locations; they are skipped,
    while the missing member itself (the last step) is kept so the message can name it.
    """
    path: list[str | int] = []
    node = data
    for step in location:
        if (isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node)) or (
            isinstance(node, dict) and step in node
        ):
            path.append(step)
            node = node[step]  # type: ignore[index]  # a list's step is an int: checked above
        elif (
            isinstance(node, dict)
            and isinstance(step, str)
            and step.isidentifier()
            and step not in _UNION_TAGS
        ):
            # A required or an unknown member: the member itself is the news.
            path.append(step)
            break
    return tuple(path)


def _first_line(lines: dict[Path_, int], path: Path_) -> int | None:
    for end in range(len(path), -1, -1):
        if tuple(path[:end]) in lines:
            return lines[tuple(path[:end])]
    return None


_KINDS = {"_input_kind()": "input type", "_expression_kind()": "expression", "_list_kind()": "list"}


def _problem_message(problem: Any, member_path: Path_) -> str:
    """A pydantic error in the words of a mapping file."""
    kind = problem["type"]
    message = str(problem["msg"]).removeprefix("Value error, ")
    if kind == "extra_forbidden" and member_path:
        return f"unknown member {member_path[-1]!r}"
    if kind == "missing" and member_path:
        return f"required member {member_path[-1]!r} is missing"
    if kind == "union_tag_invalid":
        context = problem.get("ctx", {})
        what = _KINDS.get(str(context.get("discriminator")), "kind")
        expected = str(context.get("expected_tags", "")).replace("'", "")
        return f"unknown {what} {context.get('tag')!r}; expected one of {expected}"
    if kind == "bool_type":
        return (
            f"expected true or false, got {problem.get('input')!r} (only true and false are "
            "booleans in a mapping file; yes, no, on and off stay text)"
        )
    return message


def _schema_error(
    file: str, error: ValidationError, data: Any, lines: dict[Path_, int]
) -> MappingError:
    """Every problem pydantic found, each with its line and member (none hidden)."""
    problems: list[MappingError] = []
    seen: set[tuple[str | None, str]] = set()
    for problem in error.errors(include_url=False):
        member_path = _member_path(tuple(problem["loc"]), data)
        member = ".".join(str(part) for part in member_path) or None
        message = _problem_message(problem, member_path)
        if (member, message) in seen:
            continue
        seen.add((member, message))
        problems.append(
            MappingError(message, file=file, line=_first_line(lines, member_path), member=member)
        )
    return MappingError.listing(problems)


def load_mapping(path: str | os.PathLike[str]) -> Mapping:
    """Read and validate a mapping file; raises :class:`MappingError` naming file, line, member.

    Every problem of the file is reported at once (``MappingError.problems``): schema errors,
    then, in a file that passes the schema, expressions whose type does not fit the member they
    feed and constants the member cannot take (connector.mapping.checks).
    """
    source = Path(path).resolve()
    file = str(path)
    data, lines = _read_yaml(source)
    data.setdefault("name", source.stem if source.stem != "mapping" else source.parent.name)
    try:
        mapping = Mapping.model_validate(data)
    except ValidationError as error:
        raise _schema_error(file, error, data, lines) from None
    mapping._source_file = source
    mapping._lines = lines
    problems = expression_problems(mapping)
    if problems:
        # Named by the path as given, like the schema's errors.
        raise MappingError.listing(
            [
                MappingError(problem.message, file=file, line=problem.line, member=problem.member)
                for problem in problems
            ]
        )
    if mapping.dagster.drop_folder is not None:
        mapping.dagster.drop_folder = str((source.parent / mapping.dagster.drop_folder).resolve())
    return mapping

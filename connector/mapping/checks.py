"""Checks of a mapping's expressions that need the contract, run when the file is loaded.

The schema checks each expression on its own; these checks know which contract member an
expression feeds. So a mistake that would otherwise cost one quarantine entry per row, or a
run that only fails on the data, is one error at load time naming the line:

- a constant (or a ``default``) the member's type cannot take (``maxNumberOfGuests: {constant:
  lots}``), converted exactly as the compiled SQL converts it, then judged by the contract;
- arithmetic, ``round``, ``date_parts`` and ``add_days``/``subtract_days`` feeding a member of
  another type (a sum into a date), or operands that can never be numbers.

``placeholders`` lists the ``fill_in`` placeholders `pms-sync init` writes: the file loads with
them (it passes the schema), but nothing maps until each is replaced.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any

import duckdb
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from connector.contract import Accommodation, Entity, Reservation
from connector.errors import MappingError
from connector.mapping.expressions import ARITHMETIC_KEYS, Expression, as_expression
from connector.mapping.model import Mapping, RowsBlock, field_shape
from connector.secrets import mask_text
from connector.sources.base import ROW_COLUMN, SOURCE_COLUMN

MemberPath = tuple[str | int, ...]

NUMBER_TARGETS = frozenset({"integer", "number", "number_text", "string"})
DATE_TARGETS = frozenset({"date", "datetime", "string"})
_TEXT_CHANGES = ("regex", "map", "lookup", "case")
_DESCRIBED = {
    "integer": "a whole number",
    "number": "a number",
    "number_text": "a number as text",
    "string": "text",
    "boolean": "yes/no",
    "date": "a date",
    "datetime": "a date and time",
    "time": "a time of day",
    "half_hour": "a time of day",
    "country": "a country",
    "currency": "a currency",
    "language": "a language",
}


@dataclass(frozen=True)
class FieldUse:
    """One expression of the file and the contract member it feeds."""

    value: Any  # the expression as written (shorthand or Expression)
    info: FieldInfo | None  # None for the account, which is text
    member: MemberPath
    path: str  # contract path, e.g. unitReservations.adults

    @property
    def expression(self) -> Expression:
        return as_expression(self.value)

    @property
    def target(self) -> str:
        from connector.mapping.scope_sql import target_conversion

        implied = target_conversion(self.info)[0] if self.info is not None else "string"
        return self.expression.as_ or implied


def field_uses(mapping: Mapping) -> Iterator[FieldUse]:
    """Every expression feeding a contract member (or an account), in file order."""
    if _is_expression(mapping.account):
        yield FieldUse(mapping.account, None, ("account",), "accountId")
    for entity, spec in mapping.entities.items():
        member: MemberPath = ("entities", entity.value)
        if _is_expression(spec.account):
            yield FieldUse(spec.account, None, (*member, "account"), "accountId")
        contract = Accommodation if entity == Entity.ACCOMMODATION else Reservation
        yield from _walk(spec.fields, contract, (*member, "fields"), "")


def _is_expression(value: Any) -> bool:
    """An expression or its shorthand (other account forms are checked where they are defined)."""
    return isinstance(value, str | int | float | Expression) and value is not None


def _walk(
    fields: BaseModel, contract: type[BaseModel], member: MemberPath, prefix: str
) -> Iterator[FieldUse]:
    for name, info in contract.model_fields.items():
        value = getattr(fields, name, None)
        if value is None:
            continue
        path = f"{prefix}{name}"
        shape, sub = field_shape(info.annotation)
        if shape == "object":
            yield from _walk(value, sub, (*member, name), f"{path}.")  # type: ignore[arg-type]
        elif shape == "object_list":
            if isinstance(value, RowsBlock):
                yield from _walk(value.fields, sub, (*member, name, "fields"), f"{path}.")  # type: ignore[arg-type]
            else:
                for index, item in enumerate(value):
                    yield from _walk(item, sub, (*member, name, index), f"{path}.")  # type: ignore[arg-type]
        else:
            yield FieldUse(value, info, (*member, name), path)


def _nested(expression: Expression, member: MemberPath) -> Iterator[tuple[Any, MemberPath]]:
    """The expressions inside one (operands, parts, items, days), each with its member path."""
    for index, item in enumerate(expression.coalesce or []):
        yield item, (*member, "coalesce", index)
    if expression.date_parts is not None:
        for part in ("year", "month", "day"):
            yield getattr(expression.date_parts, part), (*member, "date_parts", part)
    for key in ARITHMETIC_KEYS:
        for index, item in enumerate(getattr(expression, key) or []):
            yield item, (*member, key, index)
    for key in ("add_days", "subtract_days"):
        if getattr(expression, key) is not None:
            yield getattr(expression, key), (*member, key)


def _all_expressions(value: Any, member: MemberPath) -> Iterator[tuple[Expression, MemberPath]]:
    expression = as_expression(value)
    yield expression, member
    for item, item_member in _nested(expression, member):
        yield from _all_expressions(item, item_member)


def placeholders(mapping: Mapping) -> list[MappingError]:
    """Every ``fill_in`` placeholder of the file: what `pms-sync validate` lists to fill in."""
    found = []
    for use in field_uses(mapping):
        for expression, member in _all_expressions(use.value, use.member):
            if expression.source == "fill_in":
                found.append(_error(mapping, f"to fill in: {expression.fill_in}", member))
    return found


def expression_problems(mapping: Mapping) -> list[MappingError]:
    """Type mistakes of expressions and constants, each naming its line and member."""
    problems: list[MappingError] = []
    constants: list[tuple[FieldUse, Expression, MemberPath]] = []
    for use in field_uses(mapping):
        expression = use.expression
        for message, member in _type_problems(expression, use.target, use.member):
            problems.append(_error(mapping, message, member))
        if _is_plain_constant(expression) and expression.add_days is None:
            constants.append((use, expression, (*use.member, "constant")))
        elif expression.default is not None and expression.round is None:
            # The default goes through the same conversion as the column's text.
            as_constant = Expression.model_validate(
                {
                    "constant": expression.default,
                    **expression.model_dump(
                        by_alias=True,
                        exclude_unset=True,
                        include={"as_", "format", "decimal", "thousands", "currency"},
                    ),
                }
            )
            constants.append((use, as_constant, (*use.member, "default")))
    problems.extend(_constant_problems(mapping, constants))
    return problems


def _is_plain_constant(expression: Expression) -> bool:
    return expression.source == "constant" and not any(
        getattr(expression, key) is not None for key in _TEXT_CHANGES
    )


def _produces(expression: Expression) -> str | None:
    """What an expression's text is before conversion: "number", "date", or None (any text)."""
    if any(getattr(expression, key) is not None for key in _TEXT_CHANGES):
        return None
    if expression.round is not None:
        return "number"
    if expression.source in ARITHMETIC_KEYS or expression.source == "row_number":
        return "number"
    if expression.source == "date_parts":
        return "date"
    return None


def _type_problems(
    expression: Expression, target: str, member: MemberPath
) -> Iterator[tuple[str, MemberPath]]:
    produced = _produces(expression)
    wanted = _DESCRIBED.get(target, target)
    for key in ("thousands", "currency"):
        if getattr(expression, key) is not None and target not in NUMBER_TARGETS - {"string"}:
            yield f"{key} applies to numbers; this member expects {wanted}", (*member, key)
    if produced == "number" and target not in NUMBER_TARGETS:
        what = "round" if expression.round is not None else expression.source
        yield f"{what} gives a number, but this member expects {wanted}", member
    if produced == "date" and target not in DATE_TARGETS:
        yield f"date_parts gives a date, but this member expects {wanted}", member
    for key in ("add_days", "subtract_days"):
        days = getattr(expression, key)
        if days is None:
            continue
        if target not in ("date", "datetime"):
            yield f"{key} applies to a date or timestamp; this member expects {wanted}", member
        yield from _operand_problems(days, (*member, key), "a number of days")
    for key in ARITHMETIC_KEYS:
        for index, item in enumerate(getattr(expression, key) or []):
            yield from _operand_problems(item, (*member, key, index), f"an operand of {key}")


def _operand_problems(
    value: Any, member: MemberPath, role: str
) -> Iterator[tuple[str, MemberPath]]:
    """An operand of arithmetic or a day count: anything that can be read as a number."""
    operand = as_expression(value)
    if operand.source == "constant" and not any(
        getattr(operand, key) is not None for key in (*_TEXT_CHANGES, "default")
    ):
        constant = operand.constant
        text = str(constant).strip()
        if operand.thousands is not None:
            text = text.replace(operand.thousands, "")
        if operand.decimal == ",":
            text = text.replace(".", "").replace(",", ".")
        try:
            readable = not isinstance(constant, bool) and float(text) == float(text)
        except ValueError:
            readable = False
        if not readable:
            yield f"{role} must be a number, got {constant!r}", member
    if operand.as_ is not None and operand.as_ not in NUMBER_TARGETS:
        yield f"{role} must be a number, but it says as: {operand.as_}", member
    if _produces(operand) == "date":
        yield f"{role} must be a number, but date_parts gives a date", member
    yield from _type_problems(operand, operand.as_ or "number", member)


def _error(mapping: Mapping, message: str, member: MemberPath) -> MappingError:
    # A constant may come from ${PMS_SYNC_TOKEN}: the message shows it masked, as every sink.
    return MappingError(
        mask_text(message),
        file=str(mapping.source_file) if mapping.source_file else None,
        line=mapping.line_of(member),
        member=".".join(str(part) for part in member),
    )


# ---------------------------------------------------------------------------- constants


def _adapter(info: FieldInfo) -> TypeAdapter[Any]:
    annotation: Any = (
        Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation
    )
    return TypeAdapter(annotation, config=ConfigDict(strict=True, allow_inf_nan=False))


def _constant_problems(
    mapping: Mapping, constants: list[tuple[FieldUse, Expression, MemberPath]]
) -> list[MappingError]:
    """Convert every constant as the compiled SQL would, in one query; judge the results."""
    if not constants:
        return []
    from connector.mapping import sql_functions
    from connector.mapping.compiler import Compiler
    from connector.mapping.document_sql import ScopeCompiler
    from connector.mapping.scope_sql import Scope

    compiler = Compiler(mapping, {})
    scope = ScopeCompiler(compiler, Scope("constants", "k", set()), ())
    leaves = []
    for index, (use, expression, member) in enumerate(constants):
        try:
            leaf = scope.leaf(expression, use.info, member, f"{index}.{use.path}")
        except MappingError as error:
            return [error]
        leaves.append(leaf)
    values = ", ".join(f"to_json({leaf.sql}) AS v{index}" for index, leaf in enumerate(leaves))
    sql = (
        f"WITH raw AS (SELECT k.{SOURCE_COLUMN}, k.{ROW_COLUMN}, {', '.join(scope.raw_columns)} "
        f"FROM (SELECT 'constant' AS {SOURCE_COLUMN}, 1::BIGINT AS {ROW_COLUMN}) AS k), "
        f"val AS (SELECT raw.*, {', '.join(scope.value_columns)} FROM raw "
        f"{' '.join(scope.value_joins)}) "
        f"SELECT {scope.errors()} AS errs, {values} FROM val"
    )
    with duckdb.connect(":memory:") as connection:
        sql_functions.install(connection)
        errors, *texts = connection.execute(sql).fetchone()  # type: ignore[misc]
    problems: list[MappingError] = []
    failed: set[int] = set()
    for item in errors or []:
        index = int(str(item["path"]).split(".", 1)[0])
        failed.add(index)
        problems.append(_error(mapping, _constant_reason(item["reason"]), constants[index][2]))
    for index, ((use, _expression, member), text) in enumerate(zip(constants, texts, strict=True)):
        if index in failed or use.info is None or text is None:
            continue
        try:
            _adapter(use.info).validate_json(text)
        except ValidationError as error:
            reason = str(error.errors(include_url=False)[0]["msg"]).removeprefix("Value error, ")
            problems.append(_error(mapping, f"{reason}, got {text}", member))
    return problems


def _constant_reason(reason: str) -> str:
    return reason.replace(", got '", " for this member, got '", 1)

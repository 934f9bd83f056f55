"""The expression vocabulary of a mapping file: how one contract field is computed from a row.

An expression is data, never code: a source (a column, a constant, a template, a row number,
arithmetic, …) followed by transforms applied in a fixed, documented order (trim → regex → case
→ map/lookup → default → round → convert (as) → add_days/subtract_days → split).
:mod:`connector.mapping.compiler` turns it into DuckDB SQL.
"""

from __future__ import annotations

import re
import string
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    StrictBool,
    Tag,
    field_validator,
    model_validator,
)

Scalar = str | int | float | bool
"""A constant value in a mapping file."""

Conversion = Literal[
    "string",
    "integer",
    "number",
    "number_text",
    "boolean",
    "date",
    "datetime",
    "time",
    "half_hour",
    "country",
    "currency",
    "language",
]
"""Targets of ``as:``; when left out, the contract field's type chooses one (see docs/mapping.md)."""

ARITHMETIC_KEYS: tuple[str, ...] = ("sum", "difference", "product")
"""Sources that compute a number from numeric operands."""

SOURCE_KEYS: tuple[str, ...] = (
    "column",
    "constant",
    "template",
    "coalesce",
    "sql",
    "date_parts",
    "row_number",
    *ARITHMETIC_KEYS,
    "fill_in",
)

TEMPLATE_TRANSFORMS: tuple[str, ...] = ("trim", "upper", "lower", "title", "slug", "number_text")
"""What may follow a template placeholder's name after ``|``: ``{hotel|slug}``."""

ROW_PLACEHOLDERS: tuple[str, ...] = ("@row_number", "@file", "@occurrence")
"""Template placeholders that are no column: the row's number as the reader counts it, the
file (or table) it came from, and its number among rows whose template text is the same."""

_formatter = string.Formatter()


def template_placeholders(template: str) -> list[tuple[str, str, list[str]]]:
    """(literal text before, placeholder name or "", transforms) for each piece of a template.

    Raises ValueError naming the problem: unbalanced braces, an empty placeholder, an unknown
    transform or an unknown ``@`` placeholder.
    """
    try:
        parsed = list(_formatter.parse(template))
    except ValueError as error:
        raise ValueError(
            f"invalid template {template!r}: {error} (write {{{{ and }}}} for braces)"
        ) from None
    pieces: list[tuple[str, str, list[str]]] = []
    for literal_text, name, spec, conversion in parsed:
        if name is None:
            pieces.append((literal_text, "", []))
            continue
        # A column name may hold ":" or "!" (string.Formatter's format spec and conversion).
        full = name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
        column, *transforms = [part.strip() for part in full.split("|")]
        if not column:
            raise ValueError(f"a placeholder of template {template!r} needs a column name")
        unknown = [item for item in transforms if item not in TEMPLATE_TRANSFORMS]
        if unknown:
            raise ValueError(
                f"unknown template transform {unknown[0]!r} in {{{full}}}; expected one of "
                f"{', '.join(TEMPLATE_TRANSFORMS)}"
            )
        if column.startswith("@") and column not in ROW_PLACEHOLDERS:
            raise ValueError(
                f"unknown placeholder {{{column}}}; the placeholders that are no column are "
                f"{', '.join(ROW_PLACEHOLDERS)}"
            )
        pieces.append((literal_text, column, transforms))
    return pieces


class StrictModel(BaseModel):
    """A part of the mapping file: unknown members are errors, so typos never pass silently."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def _expression_kind(value: Any) -> str:
    if isinstance(value, str):
        return "column"
    if isinstance(value, bool | int | float):
        return "constant"
    return "expression"


class DateParts(StrictModel):
    """A date composed from separate year, month and day columns (month by number or name)."""

    year: ExprLike
    month: ExprLike = Field(
        description="A month number (1-12) or a month name or abbreviation in English, German, "
        "French, Spanish, Italian or Dutch."
    )
    day: ExprLike


class Expression(StrictModel):
    """How a field's value is computed: exactly one source, then optional transforms."""

    column: str | None = Field(
        default=None, description="A column of the input; `alias.column` for a joined input."
    )
    constant: Scalar | None = Field(default=None, description="A fixed value.")
    template: str | None = Field(
        default=None,
        description='Text with {column} placeholders, e.g. "{street} {no}". Missing values '
        "become empty; when every placeholder is missing the result is missing.",
    )
    coalesce: list[ExprLike] | None = Field(
        default=None, description="The first of these expressions that has a value."
    )
    sql: str | None = Field(
        default=None,
        description="Escape hatch: a DuckDB SQL expression over the row's columns, evaluated "
        "with file and network access disabled.",
    )
    date_parts: DateParts | None = Field(
        default=None, description="A date from year, month (number or name) and day columns."
    )
    row_number: Literal[True] | None = Field(
        default=None,
        description="The row's number as the reader counts it in error messages (1 = the first "
        "data row of its file): an id for exports without one. It changes when rows above it "
        "are deleted; see docs/mapping.md, Exports without ids.",
    )
    sum: list[ExprLike] | None = Field(
        default=None,
        min_length=2,
        description="The sum of these numbers, e.g. [week_nights, weekend_nights].",
    )
    difference: list[ExprLike] | None = Field(
        default=None,
        min_length=2,
        max_length=2,
        description="The first number minus the second, e.g. [total, deposit].",
    )
    product: list[ExprLike] | None = Field(
        default=None, min_length=2, description="The product of these numbers, e.g. [rate, nights]."
    )
    fill_in: str | None = Field(
        default=None,
        description="A placeholder `pms-sync init` writes where it found no column: what to put "
        "here. The file loads, but nothing runs until every placeholder is replaced.",
    )

    trim: StrictBool = Field(default=False, description="Remove surrounding blanks.")
    regex: str | None = Field(
        default=None,
        description="Keep the first capture group of this regular expression (or the whole "
        "match when it has no group); no match gives a missing value.",
    )
    case: Literal["upper", "lower", "title"] | None = Field(default=None)
    map: dict[str, Scalar | None] | None = Field(
        default=None, description="Replace values: source text → result."
    )
    map_default: Scalar | None = Field(
        default=None,
        description="Result for values `map` or `lookup` does not list; without it they stay "
        "unchanged (map) or become missing (lookup).",
    )
    lookup: str | None = Field(
        default=None, description="Replace the value through a table of the `lookups` section."
    )
    as_: Conversion | None = Field(
        default=None,
        alias="as",
        description="Convert to this type; defaults to what the contract field expects.",
    )
    format: str | list[str] | None = Field(
        default=None,
        description="strptime format(s) for `as: date`/`datetime`, e.g. %d.%m.%Y; tried in order.",
    )
    decimal: Literal[".", ","] = Field(
        default=".", description="Decimal separator of numbers in the input."
    )
    thousands: Literal[",", ".", " ", "'"] | None = Field(
        default=None,
        description='Thousands separator of numbers in the input: "1,445,000.00" with '
        'thousands: ",". A number must then group every three digits with it, or not at all; '
        'a value written otherwise ("12,50") is refused. " " also reads no-break spaces, '
        '"\'" also a typographic apostrophe.',
    )
    currency: Literal["strip"] | None = Field(
        default=None,
        description='strip: a currency code or symbol before or after the number ("Rp1,445,000.00", '
        '"1.234,50 €", "USD 12") is removed; any other text around it is refused.',
    )
    round: int | None = Field(
        default=None,
        ge=0,
        le=10,
        description="Round the number to this many decimals (0: a whole number), half away "
        "from zero; applied before the conversion.",
    )
    add_days: ExprLike | None = Field(
        default=None,
        description="Days to add to a date: a number, a column such as nights, or arithmetic.",
    )
    subtract_days: ExprLike | None = Field(
        default=None, description="Days to subtract from a date, e.g. a lead-time column."
    )
    split: str | None = Field(
        default=None, description="Split text into a list at this separator (items trimmed)."
    )
    default: Scalar | None = Field(
        default=None, description="Value used when the result is missing."
    )
    volatile: StrictBool = Field(
        default=False, description="Leave this field out of the change hash (still sent)."
    )

    @model_validator(mode="after")
    def _exactly_one_source(self) -> Expression:
        given = [key for key in SOURCE_KEYS if key in self.model_fields_set]
        if len(given) != 1:
            found = ", ".join(given) if given else "none"
            raise ValueError(
                f"an expression needs exactly one of {', '.join(SOURCE_KEYS)}; found {found}"
            )
        if self.map_default is not None and self.map is None and self.lookup is None:
            raise ValueError("map_default needs map or lookup")
        if self.format is not None and self.as_ not in (None, "date", "datetime"):
            raise ValueError("format applies to as: date or as: datetime")
        if self.thousands is not None and self.thousands == self.decimal:
            raise ValueError(
                f"thousands and decimal are both {self.thousands!r}: a number written so is "
                "ambiguous; set the decimal separator with decimal: and the other with thousands:"
            )
        if self.add_days is not None and self.subtract_days is not None:
            raise ValueError("use one of add_days and subtract_days (arithmetic adds both)")
        if self.template is not None:
            template_placeholders(self.template)
        return self

    @field_validator("regex")
    @classmethod
    def _regex_compiles(cls, pattern: str | None) -> str | None:
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as error:
                raise ValueError(f"invalid regular expression {pattern!r}: {error}") from None
        return pattern

    @property
    def source(self) -> str:
        return next(key for key in SOURCE_KEYS if key in self.model_fields_set)


ExprLike = Annotated[
    Annotated[str, Tag("column")]
    | Annotated[bool | int | float, Tag("constant")]
    | Annotated[Expression, Tag("expression")],
    Discriminator(_expression_kind),
    Field(
        description="A column name (text), a constant (number or boolean), or an expression "
        "object with one of column, constant, template, coalesce, sql, date_parts, row_number, "
        "sum, difference, product (or fill_in, a placeholder to replace)."
    ),
]
"""What a field of a mapping file accepts."""


def as_expression(value: Any) -> Expression:
    """The full expression behind a shorthand (a column name or a constant)."""
    if isinstance(value, Expression):
        return value
    if isinstance(value, str):
        return Expression(column=value)
    return Expression(constant=value)


class Condition(StrictModel):
    """One row filter; a row is kept when every condition of the list holds."""

    column: str | None = None
    sql: str | None = Field(
        default=None, description="A DuckDB SQL condition over the row's columns."
    )
    equals: Scalar | None = None
    not_equals: Scalar | None = None
    in_: list[Scalar] | None = Field(default=None, alias="in")
    not_in: list[Scalar] | None = None
    is_null: StrictBool | None = None
    matches: str | None = Field(default=None, description="A regular expression to search.")

    @model_validator(mode="after")
    def _one_subject_one_test(self) -> Condition:
        if (self.column is None) == (self.sql is None):
            raise ValueError("a condition needs exactly one of column or sql")
        tests = [
            key
            for key in ("equals", "not_equals", "in_", "not_in", "is_null", "matches")
            if getattr(self, key) is not None
        ]
        if self.column is not None and len(tests) != 1:
            raise ValueError(
                "a column condition needs exactly one of equals, not_equals, in, not_in, "
                "is_null, matches"
            )
        if self.sql is not None and tests:
            raise ValueError("an sql condition takes no other test")
        return self


DateParts.model_rebuild()
Expression.model_rebuild()

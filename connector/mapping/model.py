"""The mapping file as pydantic models: inputs, entities, fields, lookups and Dagster settings.

The field models of each entity are generated from the contract models, so a mapping names
exactly the members of the service's resources (editor completion, unknown members rejected)
and the JSON Schema at ``mappings/schema.json`` follows the contract automatically.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Collection
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import sqlalchemy as sa
from pydantic import (
    BaseModel,
    Discriminator,
    Field,
    GetJsonSchemaHandler,
    PrivateAttr,
    StrictBool,
    Tag,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from connector.contract import Accommodation, Entity, Reservation
from connector.mapping.expressions import (
    Condition,
    Expression,
    ExprLike,
    Scalar,
    StrictModel,
    _expression_kind,
    as_expression,
)
from connector.mapping.loop_sections import EventsSettings, LinksSettings

DEFAULT_NULL_VALUES: tuple[str, ...] = ("", "NULL", "null", "N/A", "n/a")

_NULL_VALUES_HELP = (
    'Cell texts read as a missing value (e.g. "0000-00-00 00:00:00"), in addition to the '
    'defaults ("", NULL, null, N/A, n/a) unless default_null_values is false. A text that is '
    "empty or only blanks is always missing."
)
_DEFAULT_NULLS_HELP = (
    'Whether the default null texts ("", NULL, null, N/A, n/a) count as missing too; false: '
    "only null_values and blank texts do."
)


class NullTexts(StrictModel):
    """Which cell texts of an input are missing values (a database value counts by the text
    a CSV export of it would hold)."""

    null_values: list[str] = Field(default_factory=list, description=_NULL_VALUES_HELP)
    default_null_values: StrictBool = Field(default=True, description=_DEFAULT_NULLS_HELP)

    @property
    def missing_texts(self) -> list[str]:
        """Every cell text read as missing: the defaults (unless switched off), then the rest."""
        texts = list(DEFAULT_NULL_VALUES) if self.default_null_values else []
        return texts + [text for text in self.null_values if text not in texts]


# --------------------------------------------------------------------------------------- inputs


class CsvInput(NullTexts):
    """Delimited text files: one path or a glob (files read in name order)."""

    type: Literal["csv"] = "csv"
    path: str = Field(description="Path or glob, relative to the mapping file.")
    delimiter: str = Field(default=",", min_length=1, max_length=1)
    quote: str = Field(default='"', min_length=1, max_length=1)
    escape: str | None = Field(default=None, min_length=1, max_length=1)
    encoding: str = Field(
        default="utf-8", description="utf-8 (a BOM is skipped), latin-1, cp1252, utf-16, …"
    )
    header_row: int = Field(default=1, ge=1, description="Line number of the header.")
    max_line_mb: int | None = Field(
        default=None,
        ge=1,
        description="Largest row in MiB (a quoted value's line breaks included); a larger one "
        "stops the run naming its line. Default: PMS_SYNC_CSV_MAX_LINE_MB, else 2.",
    )


class XlsxInput(NullTexts):
    """A sheet of an Excel workbook (.xlsx)."""

    type: Literal["xlsx"] = "xlsx"
    path: str = Field(description="Path or glob, relative to the mapping file.")
    sheet: str | None = Field(default=None, description="Sheet name; the first sheet if unset.")
    header_row: int = Field(default=1, ge=1)
    max_uncompressed_mb: int | None = Field(
        default=None,
        ge=1,
        description="Largest size in MiB the workbook may expand to, checked before it is "
        "parsed. Default: PMS_SYNC_XLSX_MAX_UNCOMPRESSED_MB, else 1024.",
    )
    max_compression_ratio: int | None = Field(
        default=None,
        ge=1,
        description="Largest uncompressed:compressed ratio of one member above 1 MiB "
        "(a zip bomb's is in the hundreds). Default: PMS_SYNC_XLSX_MAX_COMPRESSION_RATIO, "
        "else 100.",
    )


class SqlCursor(StrictModel):
    """An incremental cursor with the column whose rows make one record."""

    column: str = Field(description="The cursor column, e.g. updated_at.")
    key: str | None = Field(
        default=None,
        description="The column a record's rows share (e.g. booking_ref): every row of a key "
        "with a changed row is read again, so a record is never rebuilt from some of its "
        "rows. Default: the entity's id when it is a plain column of this input.",
    )


class SqlInput(NullTexts):
    """A table or query of a database reached through SQLAlchemy; its values are read as the
    text a CSV export of them would hold, so null_values apply alike."""

    type: Literal["sql"] = "sql"
    url: str = Field(
        description="SQLAlchemy URL; write it as ${ENV_VAR} so credentials stay out of the file."
    )
    table: str | None = None
    query: str | None = Field(
        default=None,
        description="SELECT with :name bind parameters, their values given in params; "
        "${ENV_VAR} is refused here (write :name and put ${ENV_VAR} in params).",
    )
    params: dict[str, Scalar] = Field(
        default_factory=dict,
        description="Values of the query's :name bind parameters, bound by the database "
        "driver, never pasted into the SQL; a value may be ${ENV_VAR}.",
    )
    cursor: str | SqlCursor | None = Field(
        default=None,
        description="Incremental cursor column (e.g. updated_at), or {column, key}: a run reads "
        "only the rows of the keys with a row whose cursor is at least the value the last "
        "successful run read (docs/mapping.md, Incremental reads); a periodic full read finds "
        "deletions.",
    )
    chunk_size: int = Field(default=50_000, ge=1)
    reader: Literal["auto", "sqlalchemy"] = Field(
        default="auto",
        description="auto: PostgreSQL, MySQL/MariaDB and SQLite are read as Arrow when the "
        "read binds no parameters, the rest through SQLAlchemy; sqlalchemy: always through "
        "SQLAlchemy. Both give every value the same text.",
    )

    @property
    def cursor_column(self) -> str | None:
        return self.cursor.column if isinstance(self.cursor, SqlCursor) else self.cursor

    @property
    def cursor_key(self) -> str | None:
        """The key the file names (``cursor: {key: …}``); None: derived from the entity."""
        return self.cursor.key if isinstance(self.cursor, SqlCursor) else None

    @model_validator(mode="after")
    def _table_or_query(self) -> SqlInput:
        if (self.table is None) == (self.query is None):
            raise ValueError("an sql input needs exactly one of table or query")
        # Checked when the mapping is loaded, as SQLAlchemy will read the query's :names.
        wanted = set(sa.text(self.query).compile().params) if self.query is not None else set()
        missing = sorted(wanted - set(self.params))
        if missing:
            listed = ", ".join(f"{name}: ..." for name in missing)
            raise ValueError(
                f"the query's bind parameters {', '.join(':' + n for n in missing)} have no "
                f"value; give them in params: {{{listed}}}"
            )
        unused = sorted(set(self.params) - wanted)
        if unused:
            raise ValueError(
                f"params {', '.join(unused)} are not bind parameters of a query "
                f"(written :name in query:)"
            )
        return self


def _input_kind(value: Any) -> str:
    if isinstance(value, dict):
        if "type" in value:
            return str(value["type"])
        if "url" in value:
            return "sql"
        if str(value.get("path", "")).lower().endswith((".xlsx", ".xlsm")):
            return "xlsx"
    return "csv"


class _InputKindSchema:
    """_input_kind in JSON Schema: ``type`` decides, else a ``url`` means sql and a path ending
    in .xlsx or .xlsm means xlsx, else csv. A plain oneOf would refuse a csv input without
    ``type`` (it also fits the xlsx input), which the loader accepts."""

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        csv, xlsx, sql = handler(core_schema)["oneOf"]
        workbook = {"properties": {"path": {"pattern": "\\.[xX][lL][sS][xXmM]$"}}}
        return {
            "if": {"required": ["type"]},
            "then": {"oneOf": [csv, xlsx, sql]},
            "else": {
                "if": {"required": ["url"]},
                "then": sql,
                "else": {"if": {**workbook, "required": ["path"]}, "then": xlsx, "else": csv},
            },
        }


InputSpec = Annotated[
    Annotated[CsvInput, Tag("csv")]
    | Annotated[XlsxInput, Tag("xlsx")]
    | Annotated[SqlInput, Tag("sql")],
    Discriminator(_input_kind),
    _InputKindSchema(),
]


# ---------------------------------------------------------------------------- joins and rows


class Join(StrictModel):
    """Columns of another input joined to each row (left join, first match in row order)."""

    input: str
    as_: str | None = Field(
        default=None, alias="as", description="Prefix of its columns: alias.column."
    )
    on: dict[str, str] = Field(
        description=(
            "Joined input's column → this input's column (or alias.column of a join before "
            "this one), all of which must match."
        ),
        min_length=1,
    )
    filter: list[Condition] = Field(
        default_factory=list, description="Rows of the joined input considered (all hold)."
    )

    @property
    def alias(self) -> str:
        return self.as_ or self.input


class RowsBlock(StrictModel):
    """A list built from rows: the record's own rows (:class:`OwnRows`) or rows of another
    input joined by key (:class:`JoinedRows`)."""

    filter: list[Condition] = Field(default_factory=list)
    fields: Any = None  # replaced by the item's field model in generated subclasses


class OwnRows(RowsBlock):
    """unitReservations: one item per row of the reservation input that passes ``filter``."""

    @model_validator(mode="before")
    @classmethod
    def _no_other_input(cls, data: Any) -> Any:
        # The schema has no such members either; this says what to do instead.
        if isinstance(data, dict) and ("input" in data or "on" in data):
            raise ValueError(
                "unitReservations is one item per row of the reservation input: write it as "
                "{fields: ...} without input or on; when units live in another table, make that "
                "table the reservation input and join the booking table to it"
            )
        return data


class JoinedRows(RowsBlock):
    """A list from the rows of another input whose key columns match the parent row's."""

    input: str = Field(description="Input the items come from.")
    on: dict[str, str] = Field(
        min_length=1, description="Item input's column → parent row's column, all of which match."
    )


# ------------------------------------------------------------------ generated field models

_SCALAR = "scalar"
_OBJECT = "object"
_OBJECT_LIST = "object_list"


def _strip_optional(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        members = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def field_shape(annotation: Any) -> tuple[str, type[BaseModel] | None]:
    """Whether a contract member is a scalar (or list of scalars), an object or a list of objects."""
    inner = _strip_optional(annotation)
    if typing.get_origin(inner) is Annotated:
        inner = typing.get_args(inner)[0]
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        return _OBJECT, inner
    if typing.get_origin(inner) is list:
        (item,) = typing.get_args(inner)
        if isinstance(item, type) and issubclass(item, BaseModel):
            return _OBJECT_LIST, item
    return _SCALAR, None


_OPTIONAL_IN_MAPPING: frozenset[tuple[str, str]] = frozenset({("Accommodation", "status")})
"""Required contract members a mapping may leave out because the engine fills them."""


_OWN_ROWS = ("Reservation", "unitReservations")
"""The list member whose items are the record's own rows, not a list or another input's rows."""


def _list_kind(value: Any) -> str:
    return "list" if isinstance(value, list) else "rows"


@cache
def fields_model(contract: type[BaseModel]) -> type[BaseModel]:
    """The mapping-side model of a contract model: same members, each an expression."""
    definitions: dict[str, Any] = {}
    for name, info in contract.model_fields.items():
        shape, sub = field_shape(info.annotation)
        if shape == _OBJECT:
            annotation: Any = fields_model(sub)
        elif shape == _OBJECT_LIST and (contract.__name__, name) == _OWN_ROWS:
            annotation = create_model(
                f"{sub.__name__}Rows",  # type: ignore[union-attr]
                __base__=OwnRows,
                fields=(fields_model(sub), Field(description="Fields of each item.")),
            )
        elif shape == _OBJECT_LIST:
            item_model = fields_model(sub)
            rows_model = create_model(
                f"{sub.__name__}Rows",  # type: ignore[union-attr]
                __base__=JoinedRows,
                fields=(item_model, Field(description="Fields of each item.")),
            )
            annotation = Annotated[
                Annotated[list[item_model], Tag("list")]  # type: ignore[valid-type]
                | Annotated[rows_model, Tag("rows")],
                Discriminator(_list_kind),
            ]
        else:
            annotation = _MEMBER_ANNOTATIONS.get((contract.__name__, name), ExprLike)
        required = info.is_required() and (contract.__name__, name) not in _OPTIONAL_IN_MAPPING
        description = info.description or f"{contract.__name__}.{name}"
        definitions[name] = (
            annotation if required else annotation | None,
            Field(default=... if required else None, description=description),
        )
    return create_model(f"{contract.__name__}Fields", __base__=StrictModel, **definitions)


# ------------------------------------------------------------------------------- accounts


class AccountExpression(Expression):
    """The account of each record: any expression, and what its value names."""

    external_id: bool = Field(
        default=False,
        description="The value is the account's external id on the service (its externalId in "
        "the Open API's accounts), not its account id: pms-sync looks the account id and token "
        "up through the Open API client (PMS_SYNC_CLIENT_ID). Rows whose external id matches no "
        "account of the client are quarantined; every other account goes on.",
    )


AccountLike = Annotated[
    Annotated[str, Tag("column")]
    | Annotated[bool | int | float, Tag("constant")]
    | Annotated[AccountExpression, Tag("expression")],
    Discriminator(_expression_kind),
    Field(
        description="The account (service accountId) of each record: a column name, a constant, "
        "or an expression; with `external_id: true` its value is the account's external id, "
        "e.g. {column: hotel_code, external_id: true}."
    ),
]
"""What an ``account:`` member accepts."""


# ------------------------------------------------------------------------ reservation status


class StatusExpression(Expression):
    """The reservation's status: any expression, and the values it declares live."""

    not_cancelled: list[str | int] | None = Field(
        default=None,
        description="Status values that look like a cancellation (or are numeric codes) but "
        "are not one, sent as they are, e.g. ['Cancellation requested']. Any other value that "
        "looks like a cancellation (Cancelled, storniert, annulé, CXL, …) or is a bare number "
        "quarantines its record unless it is mapped to CANCELLED (docs/mapping.md).",
    )


StatusLike = Annotated[
    Annotated[str, Tag("column")]
    | Annotated[bool | int | float, Tag("constant")]
    | Annotated[StatusExpression, Tag("expression")],
    Discriminator(_expression_kind),
    Field(
        description="Status of the reservation; CANCELLED for a cancelled one (the only value "
        "the service reads as a cancellation): a column with a map, e.g. {column: Status, map: "
        "{Storniert: CANCELLED}}, or a constant. Values that look like a cancellation and are "
        "not CANCELLED quarantine their record; declare those that are none with not_cancelled."
    ),
]
"""What the reservation's ``status`` member accepts."""

_MEMBER_ANNOTATIONS: dict[tuple[str, str], Any] = {("Reservation", "status"): StatusLike}
"""Members whose expression takes options of its own."""


# ------------------------------------------------------------------------------- entities


class EntityMappingBase(StrictModel):
    input: str = Field(description="The input whose rows make the records.")
    account: AccountLike | None = Field(
        default=None,
        description="Account of each record (overrides the top-level account), e.g. "
        "{column: hotel, lookup: hotel_accounts} or {column: hotel_code, external_id: true}.",
    )
    joins: list[Join] = Field(default_factory=list)
    filter: list[Condition] = Field(default_factory=list, description="Rows kept (all hold).")
    full_export: StrictBool = Field(
        default=True,
        description="Whether every export holds all records, so a missing one is gone.",
    )

    @property
    def volatile_paths(self) -> list[str]:
        """Dotted contract paths marked volatile: true (left out of the content hash)."""
        return sorted(_volatile_paths(getattr(self, "fields", None), ""))


def _volatile_paths(fields: BaseModel | None, prefix: str) -> set[str]:
    found: set[str] = set()
    if fields is None:
        return found
    for name in type(fields).model_fields:
        value = getattr(fields, name)
        path = f"{prefix}{name}"
        if isinstance(value, Expression) and value.volatile:
            found.add(path)
        elif isinstance(value, RowsBlock):
            found |= _volatile_paths(value.fields, f"{path}.")
        elif isinstance(value, list):
            for item in value:
                found |= _volatile_paths(item, f"{path}.")
        elif isinstance(value, BaseModel) and not isinstance(value, Expression):
            found |= _volatile_paths(value, f"{path}.")
    return found


class AccommodationMapping(EntityMappingBase):
    on_missing: Literal["deactivate", "ignore"] = Field(
        default="deactivate",
        description="A unit missing from a full export: sent as INACTIVE, or left alone.",
    )
    fields: fields_model(Accommodation)  # type: ignore[valid-type]


class ReservationMapping(EntityMappingBase):
    on_missing: Literal["ignore", "cancel_future"] = Field(
        default="ignore",
        description="A reservation missing from a full export: left alone, or CANCELLED when "
        "its check-in is in the future.",
    )
    fields: fields_model(Reservation)  # type: ignore[valid-type]


EntityMapping = AccommodationMapping | ReservationMapping


class Entities(StrictModel):
    """The entities a mapping produces; index it with :class:`Entity`."""

    accommodation: AccommodationMapping | None = None
    reservation: ReservationMapping | None = None

    def __getitem__(self, entity: Entity | str) -> EntityMapping:
        value = getattr(self, Entity(entity).value)
        if value is None:
            raise KeyError(entity)
        return value

    def __contains__(self, entity: object) -> bool:
        try:
            return getattr(self, Entity(entity).value) is not None  # type: ignore[arg-type]
        except ValueError:
            return False

    def keys(self) -> list[Entity]:
        return [entity for entity in Entity if entity in self]

    def items(self) -> list[tuple[Entity, EntityMapping]]:
        return [(entity, self[entity]) for entity in self.keys()]


# ------------------------------------------------------------------------------ the file


class DagsterSettings(StrictModel):
    """Passed through to the Dagster layer (pms_sync/)."""

    schedule: str = Field(default="0 2 * * *", description="Cron schedule of the sync.")
    timezone: str = Field(default="UTC", description="Time zone of the schedule (IANA name).")
    drop_folder: str | None = Field(
        default=None,
        description="Folder watched for new exports, relative to the mapping file.",
    )
    partitions_start: str | None = Field(
        default=None,
        pattern=r"^\d{4}-(0[1-9]|1[0-2])$",
        description="First month (YYYY-MM) of monthly check-in partitions of reservations.",
    )
    reconcile_schedule: str | None = Field(
        default=None,
        description="Cron schedule of the full reconciliation, e.g. '0 3 * * 0' (every record "
        "re-sent, resumable across runs; docs/drift.md). Off when absent.",
    )
    partition_by_account: StrictBool = Field(
        default=False,
        description="Partition reservations by account as well as by month of check-in: a "
        "nightly run or a backfill fans out into one run per account, each failing and "
        "retrying on its own (docs/dagster.md). Accounts are the `account` lookup's values or "
        "constant, or those the export names (external ids) once `<name>/accounts` ran.",
    )
    freshness_hours: float = Field(
        default=26,
        gt=0,
        description="Hours after the last sync at which the synced assets turn stale (fail "
        "their freshness policy in the UI); they warn after 90 % of it. The default is a "
        "nightly run plus two hours.",
    )


class SafetySettings(StrictModel):
    """Safety rails of an unattended sync (docs/safety-rails.md): how much change a run may
    push without approval, and how long an export must stay unchanged before it is read."""

    max_missing_share: float = Field(
        default=0.05,
        ge=0,
        le=1,
        description="Per account and entity: deactivations or cancellations above this share of "
        "the account's known (active) records are held back, unless approved "
        "(--allow-mass-change); the account's other changes are sent. Either limit trips the "
        "guard, from min_records on.",
    )
    max_missing_records: int = Field(
        default=50,
        ge=0,
        description="Per account and entity: more deactivations or cancellations than this are "
        "held back, whatever the share. Either limit trips the guard.",
    )
    max_row_drop: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="Per account and entity: an export with more than this share fewer records "
        "than at the last successful run holds back that entity's deactivations or "
        "cancellations, unless approved. Not applied to runs limited to a check-in window.",
    )
    min_records: int = Field(
        default=3,
        ge=1,
        description="Per account and entity: fewer deactivations or cancellations (or fewer "
        "records gone from the export) than this never trip the guard, whatever the share, so "
        "one villa of five or one room of 19 leaves without approval. An account whose rows "
        "all vanished trips it at any size.",
    )
    export_settle_seconds: float = Field(
        default=2.0,
        ge=0,
        description="A file export modified within this many seconds is watched that long; a "
        "size or modification time that changes means it is still being written: nothing is "
        "read or sent. PMS_SYNC_EXPORT_SETTLE_SECONDS overrides it.",
    )
    require_final_newline: StrictBool = Field(
        default=True,
        description="A CSV export whose last line does not end in a newline is taken as still "
        "being written (a partial last row): nothing is read or sent.",
    )


class Mapping(StrictModel):
    """A mapping file: how one PMS export becomes the service's accommodations and reservations."""

    name: str | None = Field(
        default=None, description="Name of the connection; defaults to the file name."
    )
    account: AccountLike | None = Field(
        default=None,
        description="Account (service accountId) of every record unless an entity says "
        "otherwise: a constant such as {constant: demo}, a column through a lookup, or a "
        "column of external ids resolved through the Open API "
        "({column: hotel_code, external_id: true}).",
    )
    inputs: dict[str, InputSpec] = Field(min_length=1)
    lookups: dict[str, dict[str, Scalar | None]] = Field(
        default_factory=dict, description="Named value tables used by `lookup:`."
    )
    entities: Entities
    control_characters: Literal["refuse", "strip"] = Field(
        default="refuse",
        description="Control characters (C0 but tab, LF and CR; DEL; C1) in mapped text: "
        "`refuse` quarantines the record naming file, row, field and code point; `strip` "
        "removes them and sends the rest.",
    )
    dagster: DagsterSettings = Field(default_factory=DagsterSettings)
    safety: SafetySettings = Field(default_factory=SafetySettings)
    links: LinksSettings | None = Field(
        default=None,
        description="Guest links of upcoming arrivals fetched after the sync and written back "
        "to the PMS (docs/loop.md); absent: `pms-sync links` uses the defaults, Dagster has no "
        "guest_links asset.",
    )
    events: EventsSettings | None = Field(
        default=None,
        description="Events received from the service for this connection (`pms-sync "
        "receive`), written back where declared (docs/loop.md).",
    )
    webhooks: str | None = Field(
        default=None,
        description="The connection's outgoing-webhook configurations as code: a webhooks file "
        "relative to the mapping file (`pms-sync webhooks plan|apply`, docs/loop.md).",
    )

    _source_file: Path | None = PrivateAttr(default=None)
    _lines: dict[tuple[str | int, ...], int] = PrivateAttr(default_factory=dict)

    @field_validator("inputs")
    @classmethod
    def _input_names_are_identifiers(cls, inputs: dict[str, Any]) -> dict[str, Any]:
        for name in inputs:
            if not name.isidentifier():
                raise ValueError(f"input name {name!r} must be letters, digits and _")
        return inputs

    @model_validator(mode="after")
    def _references_exist(self) -> Mapping:
        for entity, spec in self.entities.items():
            if spec.input not in self.inputs:
                raise ValueError(
                    f"entities.{entity.value}.input names {spec.input!r}, which is not among "
                    f"the inputs ({', '.join(sorted(self.inputs))})"
                )
            for join in spec.joins:
                if join.input not in self.inputs:
                    raise ValueError(f"join input {join.input!r} of {entity.value} is not an input")
            if spec.account is None and self.account is None:
                raise ValueError(
                    f"{entity.value} has no account: set `account:` at the top or in the entity"
                )
        if not self.entities.keys():
            raise ValueError("entities must map at least one of accommodation, reservation")
        return self

    @property
    def source_file(self) -> Path | None:
        return self._source_file

    @property
    def base_dir(self) -> Path:
        """Relative paths in the mapping are relative to the mapping file's folder."""
        return self._source_file.parent if self._source_file else Path.cwd()

    def account_for(self, entity: Entity) -> Expression:
        spec = self.entities[entity]
        return as_expression(spec.account if spec.account is not None else self.account)

    def account_is_external_id(self, entity: Entity) -> bool:
        """Whether the entity's account member gives external ids (``external_id: true``)."""
        return bool(getattr(self.account_for(entity), "external_id", False))

    def cursor_key(self, input_name: str) -> str | None:
        """The column whose rows make one record of ``input_name``'s entity: the cursor's
        ``key``, else the entity's id when every entity reading the input takes it from one
        plain column; None when neither says (the input is then read in full)."""
        spec = self.inputs.get(input_name)
        if not isinstance(spec, SqlInput) or spec.cursor_column is None:
            return None
        if spec.cursor_key is not None:
            return spec.cursor_key
        found = {
            _plain_column(entity_spec.fields.id)
            for _, entity_spec in self.entities.items()
            if entity_spec.input == input_name
        }
        return found.pop() if len(found) == 1 else None

    def incremental_inputs(self, entities: Collection[Entity]) -> dict[str, str]:
        """The inputs ``entities`` may read incrementally, each with its ``cursor_key``: SQL
        inputs with a cursor and a key that are the own input of one of them and joined by
        none (a joined input shapes every record it joins: it is always read in full)."""
        chosen = [(entity, spec) for entity, spec in self.entities.items() if entity in entities]
        joined = {name for _, spec in chosen for name in _inputs_named(spec, top=True)}
        found: dict[str, str] = {}
        for _, spec in chosen:
            key = self.cursor_key(spec.input)
            if key is not None and spec.input not in joined:
                found[spec.input] = key
        return found

    def relative_path(self, value: str) -> Path:
        """A path the file gives relative to itself (``webhooks:``, destination files)."""
        path = Path(value).expanduser()
        return path if path.is_absolute() else (self.base_dir / path).resolve()

    def line_of(self, path: tuple[str | int, ...]) -> int | None:
        """The line of the deepest member of ``path`` that the file has."""
        for end in range(len(path), -1, -1):
            line = self._lines.get(tuple(path[:end]))
            if line is not None:
                return line
        return None


def _plain_column(value: Any) -> str | None:
    """The column an expression is, when it is only a column (no transform)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Expression) and value.model_fields_set == {"column"}:
        return value.column
    return None


def _inputs_named(value: Any, *, top: bool = False) -> set[str]:
    """Every ``input:`` a part of the mapping names (joins, rows of another input), but the
    entity's own at the top."""
    if isinstance(value, BaseModel):
        value = value.model_dump(exclude_none=True)
    found: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "input" and isinstance(item, str):
                if not top:
                    found.add(item)
            else:
                found |= _inputs_named(item)
    elif isinstance(value, list):
        for item in value:
            found |= _inputs_named(item)
    return found

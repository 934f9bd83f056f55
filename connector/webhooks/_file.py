"""The webhooks file: a connection's outgoing-webhook configurations as code (docs/loop.md).

YAML with a JSON Schema (``mappings/webhooks.schema.json``), read like a mapping file: line
numbers in every error, ``${ENV_VAR}`` references resolved, every header value registered as
a secret (headers carry what lets a receiver trust a call). Validation refuses what the
service would refuse or misread: an event the spec does not name (with a hint for the renamed
``guestLinkOpened``), an unknown operator, a range without ``secondValue``.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, StrictBool, ValidationError, field_validator, model_validator

from connector.contract import (
    ConditionFilterType,
    ConditionOperator,
    OutgoingEventName,
    WebhookCondition,
    WebhookConfig,
    WebhookHeader,
)
from connector.contract.formats import HTTP_URL_PATTERN
from connector.errors import MappingError
from connector.mapping.expressions import StrictModel
from connector.mapping.model import Mapping
from connector.secrets import redact_url, register_secret

RENAMED_EVENTS = {"guestLinkOpened": ("guestLinkOpenedGuestApp", "2025-09-11")}
"""Events the spec renamed (§9): the old name, its successor and the date."""

FILTER_NAMES = {member.name.lower(): int(member) for member in ConditionFilterType}
"""``filterType`` by name (``reservation_status``) for the publicly documented codes."""

OPERATORS = tuple(operator.value for operator in ConditionOperator)
_COMPARISONS = (">", "<", ">=", "<=")
_OPERATOR_ALIASES = {"==": "=", "<>": "!=", "not_exists": "not exists", "not in": "!in"}
_OPERATOR_ALIASES |= {"notin": "!in", "not_in": "!in", "between": "range", "eq": "="}

Scalar = str | int | float | bool
Path_ = tuple[str | int, ...]
EVENT_NAMES = ", ".join(event.value for event in OutgoingEventName)


class WebhooksFileError(MappingError):
    """A webhooks file is invalid: file, line and member of each problem."""


class ConditionSpec(StrictModel):
    """One condition of a configuration: the event is sent only when every condition holds."""

    filterType: int | str = Field(
        description="Numeric code (1 booking source, 2 reservation status, 6 nights, 10 adults, "
        "11 children, 15 country, 16 agent, 30 membership, or any other code the service "
        "documents) or the name of a documented one (reservation_status).",
    )
    op: str = Field(description=f"Operator: {', '.join(OPERATORS)}.")
    value: Scalar | list[Scalar] | None = Field(
        default=None, description="Compared value; a list for in and !in; none for exists."
    )
    secondValue: Scalar | None = Field(default=None, description="Upper bound of a range.")

    @field_validator("filterType")
    @classmethod
    def _filter_type(cls, value: int | str) -> int:
        if isinstance(value, bool):
            raise ValueError("filterType: expected a number or a documented name")
        if isinstance(value, int):
            if value < 1:
                raise ValueError(f"filterType must be a positive number, got {value}")
            return value
        code = FILTER_NAMES.get(value.strip().lower().replace(" ", "_"))
        if code is None:
            names = ", ".join(f"{name} ({code})" for name, code in FILTER_NAMES.items())
            raise ValueError(f"unknown filterType {value!r}; give a number, or one of {names}")
        return code

    @field_validator("op")
    @classmethod
    def _operator(cls, value: str) -> str:
        if value in OPERATORS:
            return value
        suggestion = _OPERATOR_ALIASES.get(value.strip().lower())
        hint = f"; did you mean {suggestion!r}?" if suggestion else ""
        raise ValueError(f"unknown operator {value!r}{hint} (operators: {', '.join(OPERATORS)})")

    @model_validator(mode="after")
    def _values_fit_the_operator(self) -> ConditionSpec:
        op, value, second = self.op, self.value, self.secondValue
        if op == "range":
            if second is None:
                raise ValueError("a range needs `secondValue` (its upper bound) as well as `value`")
            if not _number(value) or not _number(second):
                raise ValueError("a range takes numbers in `value` and `secondValue`")
            if value > second:  # type: ignore[operator]
                raise ValueError(f"range from {value} to {second}: `value` must not exceed it")
        elif second is not None:
            raise ValueError(f"`secondValue` belongs to a range, not to {op!r}")
        if op in ("exists", "not exists") and value is not None:
            raise ValueError(f"{op!r} takes no `value`")
        if op in ("in", "!in") and not (isinstance(value, list) and value):
            raise ValueError(f"{op!r} takes a non-empty list in `value`, e.g. [DE, AT]")
        if op in ("=", "!=", *_COMPARISONS) and (value is None or isinstance(value, list)):
            raise ValueError(f"{op!r} compares with one `value`")
        if op in _COMPARISONS and not _number(value):
            raise ValueError(f"{op!r} compares numbers, got {value!r}")
        return self

    def to_contract(self) -> WebhookCondition:
        assert isinstance(self.filterType, int)
        return WebhookCondition.model_validate(
            {
                "filterType": self.filterType,
                "op": self.op,
                "value": self.value,
                "secondValue": self.secondValue,
            }
        )


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class WebhookSpec(StrictModel):
    """One outgoing-webhook configuration, matched with the service's by ``name``."""

    name: str = Field(min_length=1, description="Unique within the file: what plans match by.")
    event: str = Field(description=f"One of the events of spec §6.2: {EVENT_NAMES}.")
    url: str = Field(
        description="Where the service POSTs the event: the receiver (`pms-sync receive`).",
        # Editors check the pattern; the validator below says what is wrong in words.
        json_schema_extra={"pattern": HTTP_URL_PATTERN},
    )
    conditions: list[ConditionSpec] = Field(default_factory=list)
    dataPoints: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list,
        description="Data points the payload carries (spec §6.2 names timestamp, "
        "platformReferral, appReferral, membershipIndication, membershipType).",
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="Headers sent with each event; write values as ${ENV_VAR}: they are "
        "secrets (masked in plans and every output).",
    )
    isEnabled: StrictBool = True
    notifyOnWebhookFailures: StrictBool | None = None
    failureNotificationEmails: list[str] | None = None

    @field_validator("event")
    @classmethod
    def _known_event(cls, value: str) -> str:
        if value in {event.value for event in OutgoingEventName}:
            return value
        renamed = RENAMED_EVENTS.get(value)
        if renamed is not None:
            raise ValueError(
                f"event {value!r} was renamed {renamed[0]!r} on {renamed[1]}: write {renamed[0]!r}"
            )
        close = difflib.get_close_matches(value, [e.value for e in OutgoingEventName], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown event {value!r}{hint} (events: {EVENT_NAMES})")

    @field_validator("url")
    @classmethod
    def _http_address(cls, value: str) -> str:
        if re.fullmatch(HTTP_URL_PATTERN, value) is None:
            raise ValueError(
                "url must be an https:// or http:// address without spaces, "
                f"got {redact_url(value)!r}"
            )
        return value

    @field_validator("headers")
    @classmethod
    def _header_names(cls, headers: dict[str, str]) -> dict[str, str]:
        for key in headers:
            if not key or any(ch.isspace() or ch == ":" for ch in key):
                raise ValueError(f"header name {key!r}: no spaces or colons")
        return headers

    def to_config(self) -> WebhookConfig:
        """The configuration as the service's API takes it (empty lists left out)."""
        return WebhookConfig(
            name=self.name,
            event=OutgoingEventName(self.event),
            url=self.url,
            conditions=[c.to_contract() for c in self.conditions] or None,
            dataPoints=list(self.dataPoints) or None,
            isEnabled=self.isEnabled,
            headers=[WebhookHeader(key=k, value=v) for k, v in self.headers.items()] or None,
            notifyOnWebhookFailures=self.notifyOnWebhookFailures,
            failureNotificationEmails=self.failureNotificationEmails,
        )


class WebhooksFile(StrictModel):
    """A connection's outgoing-webhook configurations. The file owns the configurations of
    the Open API client (of those named with ``prefix``, when set): any other is deleted by
    `pms-sync webhooks apply`."""

    # Read through load_webhooks: the rules across entries (unique names, the prefix, the
    # empty file's confirmation) are checked there, reported with every member's problems.

    connection: str | None = Field(
        default=None, description="The connection (mapping name) the file belongs to."
    )
    prefix: str | None = Field(
        default=None,
        min_length=1,
        description="Manage only configurations whose name starts with this (several files "
        "sharing one Open API client); every name of the file must start with it.",
    )
    delete_all: StrictBool = Field(
        default=False,
        description="Confirms a file with no webhooks and no prefix: apply deletes every "
        "configuration of the Open API client, those other tools made included. Refused "
        "otherwise.",
    )
    webhooks: list[WebhookSpec] = Field(default_factory=list)

    def manages(self, name: str) -> bool:
        """Whether a configuration of the service with this name is this file's to manage."""
        return self.prefix is None or name.startswith(self.prefix)


EMPTY_WITHOUT_PREFIX = (
    "no webhooks and no prefix: apply would delete every webhook configuration of the Open "
    "API client, those other tools made included; list the webhooks, set `prefix` to manage "
    "only names starting with it, or write `delete_all: true` to confirm"
)


def _rules_across_entries(data: dict[str, Any]) -> list[tuple[Path_, str]]:
    """Problems no single member shows (location, message), read from the file's data so they
    are reported with the members' problems, not after them are fixed."""
    problems: list[tuple[Path_, str]] = []
    entries = data.get("webhooks", [])
    prefix = data.get("prefix")
    prefix = prefix if isinstance(prefix, str) and prefix else None
    if not isinstance(entries, list):
        return problems
    first: dict[str, int] = {}
    for index, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            continue
        where: Path_ = ("webhooks", index, "name")
        if name in first:
            problems.append(
                (
                    where,
                    f"name {name!r} is also the name of entry {first[name]}: names must be unique "
                    "(plans match by name)",
                )
            )
        first.setdefault(name, index)
        if prefix is not None and not name.startswith(prefix):
            problems.append((where, f"name {name!r} must start with the prefix {prefix!r}"))
    confirmed = data.get("delete_all") is True
    if not entries and prefix is None and not confirmed:
        problems.append((("webhooks",), EMPTY_WITHOUT_PREFIX))
    if confirmed and (entries or prefix is not None):
        problems.append(
            (
                ("delete_all",),
                "`delete_all: true` confirms a file with no webhooks and no prefix; this one "
                "has " + ("webhooks" if entries else "a prefix") + ": remove `delete_all`",
            )
        )
    return problems


def load_webhooks(path: str | os.PathLike[str]) -> WebhooksFile:
    """Read and validate a webhooks file; raises :class:`WebhooksFileError` naming file, line
    and member of every problem, all at once. Header values are registered as secrets."""
    from connector.mapping.loader import _first_line, _read_yaml, _schema_error

    file = str(path)
    try:
        data, lines = _read_yaml(Path(path).resolve(), "webhooks file")
    except MappingError as error:
        raise _as_webhooks_error(error) from None
    # Secrets first: no message below (nor any later one) may show a header value.
    for item in data.get("webhooks") or []:
        headers = item.get("headers") if isinstance(item, dict) else None
        if isinstance(headers, dict):
            for value in headers.values():
                if isinstance(value, str) and value:
                    register_secret(value)
    problems = [
        MappingError(
            message,
            file=file,
            line=_first_line(lines, where),
            member=".".join(str(part) for part in where),
        )
        for where, message in _rules_across_entries(data)
    ]
    try:
        loaded = WebhooksFile.model_validate(data)
    except ValidationError as error:
        found = _schema_error(file, error, data, lines).problems
        problems = [*(_with_entry_name(problem, data) for problem in found), *problems]
    if problems:
        raise _as_webhooks_error(MappingError.listing(problems))
    return loaded


def load_mapping_webhooks(mapping: Mapping) -> WebhooksFile | None:
    """The webhooks file the mapping's ``webhooks:`` names, checked like :func:`load_webhooks`;
    None when the mapping names none."""
    if mapping.webhooks is None:
        return None
    path = mapping.relative_path(mapping.webhooks)
    if not path.is_file():
        raise WebhooksFileError(
            f"the webhooks file {mapping.webhooks!r} is not there ({path})",
            file=str(mapping.source_file or ""),
            line=mapping.line_of(("webhooks",)),
            member="webhooks",
        )
    return load_webhooks(path)


def _with_entry_name(problem: MappingError, data: dict[str, Any]) -> MappingError:
    """The problem of an entry names the entry too: ``webhook 'arrivals': …``."""
    parts = (problem.member or "").split(".")
    entries = data.get("webhooks")
    if len(parts) < 2 or parts[0] != "webhooks" or not parts[1].isdigit():
        return problem
    index = int(parts[1])
    entry = entries[index] if isinstance(entries, list) and index < len(entries) else None
    name = entry.get("name") if isinstance(entry, dict) else None
    if not isinstance(name, str) or not name:
        return problem
    return MappingError(
        f"webhook {name!r}: {problem.message}",
        file=problem.file,
        line=problem.line,
        member=problem.member,
    )


def _as_webhooks_error(error: MappingError) -> WebhooksFileError:
    problems = [
        WebhooksFileError(p.message, file=p.file, line=p.line, member=p.member)
        for p in error.problems
    ]
    return WebhooksFileError.listing(problems)


def webhooks_schema() -> dict[str, Any]:
    schema = WebhooksFile.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://pms-sync.invalid/mappings/webhooks.schema.json",
        **schema,
    }

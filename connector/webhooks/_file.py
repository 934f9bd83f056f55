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
from connector.secrets import register_secret

RENAMED_EVENTS = {"guestLinkOpened": ("guestLinkOpenedGuestApp", "2025-09-11")}
"""Events the spec renamed (§9): the old name, its successor and the date."""

FILTER_NAMES = {member.name.lower(): int(member) for member in ConditionFilterType}
"""``filterType`` by name (``reservation_status``) for the publicly documented codes."""

OPERATORS = tuple(operator.value for operator in ConditionOperator)
_COMPARISONS = (">", "<", ">=", "<=")
_OPERATOR_ALIASES = {"==": "=", "<>": "!=", "not_exists": "not exists", "not in": "!in"}
_OPERATOR_ALIASES |= {"notin": "!in", "not_in": "!in", "between": "range", "eq": "="}

Scalar = str | int | float | bool
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
    url: Annotated[str, Field(pattern=HTTP_URL_PATTERN)] = Field(
        description="Where the service POSTs the event: the receiver (`pms-sync receive`)."
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

    connection: str | None = Field(
        default=None, description="The connection (mapping name) the file belongs to."
    )
    prefix: str | None = Field(
        default=None,
        min_length=1,
        description="Manage only configurations whose name starts with this (several files "
        "sharing one Open API client); every name of the file must start with it.",
    )
    webhooks: list[WebhookSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _names(self) -> WebhooksFile:
        names = [spec.name for spec in self.webhooks]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"webhook names must be unique (plans match by name): {repeated}")
        if self.prefix is not None:
            outside = [name for name in names if not name.startswith(self.prefix)]
            if outside:
                raise ValueError(f"names must start with the prefix {self.prefix!r}: {outside}")
        return self

    def manages(self, name: str) -> bool:
        """Whether a configuration of the service with this name is this file's to manage."""
        return self.prefix is None or name.startswith(self.prefix)


def load_webhooks(path: str | os.PathLike[str]) -> WebhooksFile:
    """Read and validate a webhooks file; raises :class:`WebhooksFileError` naming file, line
    and member of every problem. Header values are registered as secrets."""
    from connector.mapping.loader import _read_yaml, _schema_error

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
    try:
        return WebhooksFile.model_validate(data)
    except ValidationError as error:
        raise _as_webhooks_error(_schema_error(file, error, data, lines)) from None


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

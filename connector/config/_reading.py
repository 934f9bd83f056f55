"""How a section of settings is read: from an environment (the process's, or a mapping a caller
passes) and from values given explicitly (a flag, a resource member), with one parsing of
on/off values and blanks, and errors that name the variable or the flag a value came from.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Self

from pydantic import BeforeValidator, SecretStr, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)
from pydantic_settings.sources.utils import parse_env_vars

from connector.errors import ConfigError
from connector.secrets import checked_secret

PREFIX = "PMS_SYNC_"

TRUE_WORDS = ("1", "true", "yes", "on", "enabled")
FALSE_WORDS = ("0", "false", "no", "off", "disabled")


def parse_flag(value: object) -> bool:
    """An on/off value, alike for every setting and every surface (whitespace and case
    ignored); anything else a ValueError the reader turns into a message naming the setting."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise ValueError(f"must be true or false (on/off, yes/no, 1/0, enabled/disabled), got {text!r}")


def _comma_list(value: object) -> object:
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


Flag = Annotated[bool, BeforeValidator(parse_flag)]
"""An on/off setting: true/false, on/off, yes/no, 1/0, enabled/disabled."""

CommaList = Annotated[tuple[str, ...], NoDecode, BeforeValidator(_comma_list)]
"""A comma-separated list (not JSON, as pydantic-settings would read a tuple otherwise)."""


@dataclass(frozen=True)
class _Reading:
    env: Mapping[str, str] | None  # None: the process's environment
    labels: tuple[tuple[str, str], ...]  # field -> where its explicit value came from (a flag)


_READING: ContextVar[_Reading | None] = ContextVar("pms_sync_settings_reading", default=None)
_PROCESS = _Reading(None, ())  # outside a read: the process's environment, nothing given


def _current() -> _Reading:
    return _READING.get() or _PROCESS


class _EnvironmentSource(EnvSettingsSource):
    """pydantic-settings' environment source over the environment of the current reading."""

    def _load_env_vars(self) -> Mapping[str, str | None]:
        env = _current().env
        return parse_env_vars(
            os.environ if env is None else env,
            self.case_sensitive,
            self.env_ignore_empty,
            self.env_parse_none_str,
        )


class Section(BaseSettings):
    """A section of the settings: each field a ``PMS_SYNC_<FIELD>`` variable unless its
    ``validation_alias`` names another. A blank value is unset (the default applies) unless
    the field is in ``BLANK_IS_A_VALUE``; surrounding whitespace is ignored."""

    model_config = SettingsConfigDict(
        env_prefix=PREFIX,
        case_sensitive=False,
        extra="ignore",
        frozen=True,
        validate_by_name=True,
        validate_by_alias=True,
        validate_default=False,
    )
    BLANK_IS_A_VALUE: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Explicit values win over the environment; no .env or secrets directory is read.
        return (init_settings, _EnvironmentSource(settings_cls))

    @model_validator(mode="before")
    @classmethod
    def _prepared(cls, data: Any) -> Any:
        # Credentials are checked (and registered as secrets) before anything could print
        # them; every other text is stripped, and a blank one is unset.
        if not isinstance(data, dict):
            return data
        kept: dict[str, Any] = {}
        for key, value in data.items():
            field = cls.field_of(key)
            if field is not None and (cls.is_secret(field) or cls.is_credential(field)):
                if isinstance(value, SecretStr):
                    value = value.get_secret_value()
                value = checked_secret(value, label(cls, field), secret=cls.is_secret(field))
            elif isinstance(value, str):
                value = value.strip()
                if field in cls.BLANK_IS_A_VALUE:
                    kept[key] = value
                    continue
            if value is None or value == "":
                continue
            kept[key] = value
        return kept

    @classmethod
    def read(
        cls,
        env: Mapping[str, str] | None = None,
        given: Mapping[str, object] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> Self:
        """The section from ``given`` (field -> explicit value; None: not given), then
        ``env`` (None: the process's environment), then the defaults. ``labels`` name where
        given values came from (``--concurrency``), for messages; by default the flag."""
        values = {name: value for name, value in (given or {}).items() if value is not None}
        names = {name: (labels or {}).get(name) or cls.flag(name) or name for name in values}
        with _reading(_Reading(env, tuple(names.items()))):
            try:
                return cls(**values)
            except ValidationError as error:
                raise ConfigError(cls._message(error)) from None

    @classmethod
    def _message(cls, error: ValidationError) -> str:
        lines = []
        for problem in error.errors(include_url=False):
            key = str(problem["loc"][0]) if problem["loc"] else ""
            field = cls.field_of(key)
            where = label(cls, field) if field else key
            if problem["type"] == "value_error":
                text = str(problem["ctx"]["error"])
            else:
                text = problem["msg"]
                if field is not None and not cls.is_secret(field):
                    text += f", got {problem['input']!r}"
            joined = text.startswith(("must ", "is "))
            lines.append(f"{where} {text}" if joined else f"{where}: {text}")
        return "; ".join(lines)

    @classmethod
    def field_of(cls, key: str) -> str | None:
        """The field a key of the input names (its name or its variable, any case)."""
        if key in cls.model_fields:
            return key
        for name in cls.model_fields:
            if cls.variable(name).lower() == key.lower():
                return name
        return None

    @classmethod
    def variable(cls, field: str) -> str:
        """The environment variable of ``field``."""
        alias = cls.model_fields[field].validation_alias
        prefix = cls.model_config.get("env_prefix") or PREFIX
        return alias if isinstance(alias, str) else prefix + field.upper()

    @classmethod
    def flag(cls, field: str) -> str | None:
        """The command-line flag of ``field``, if the CLI has one."""
        return _extra(cls.model_fields[field]).get("flag")

    @classmethod
    def dagster(cls, field: str) -> str | None:
        """The Dagster resource member of ``field`` (``service.concurrency``), if any."""
        return _extra(cls.model_fields[field]).get("dagster")

    @classmethod
    def shown(cls, field: str) -> str | None:
        """How the default is described where it is not a plain value (None: the value)."""
        return _extra(cls.model_fields[field]).get("shown")

    @classmethod
    def default(cls, field: str) -> Any:
        """The default of ``field`` (None: unset, the library decides as documented)."""
        return cls.model_fields[field].get_default(call_default_factory=True)

    @classmethod
    def description(cls, field: str) -> str:
        return cls.model_fields[field].description or ""

    @classmethod
    def is_secret(cls, field: str) -> bool:
        return "SecretStr" in str(cls.model_fields[field].annotation)

    @classmethod
    def is_credential(cls, field: str) -> bool:
        """A credential that is not secret (a client id): checked, never registered."""
        return bool(_extra(cls.model_fields[field]).get("credential"))


def label(section: type[Section], field: str) -> str:
    """Where the value of ``field`` being read comes from: its flag when given, else its
    variable."""
    return dict(_current().labels).get(field) or section.variable(field)


@contextmanager
def _reading(reading: _Reading) -> Iterator[None]:
    token = _READING.set(reading)
    try:
        yield
    finally:
        _READING.reset(token)


def _extra(info: FieldInfo) -> dict[str, Any]:
    extra = info.json_schema_extra
    return dict(extra) if isinstance(extra, dict) else {}

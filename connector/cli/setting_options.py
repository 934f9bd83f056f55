"""Options that project a setting of connector.config onto the command line.

The option shows the setting's variable and default (``--help``); a value given on the
command line is checked by the setting's own validation and reaches the command as given,
while the variable is read by the settings model itself, so a value means the same from
either, and a message names the flag or the variable it came from.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from connector.config import Section
from connector.errors import ConfigError

F = TypeVar("F", bound=Callable[..., Any])


class SettingOption(click.Option):
    """An option whose variable is shown, but read by the settings model, not by click."""

    def resolve_envvar_value(self, ctx: click.Context) -> str | None:
        return None

    def value_from_envvar(self, ctx: click.Context) -> Any:
        return None


class SettingType(click.ParamType):
    """A command-line value checked by its setting's validation, passed on as given."""

    name = "text"

    def __init__(self, section: type[Section], field: str, metavar: str | None) -> None:
        self.section = section
        self.field = field
        self.metavar = metavar

    def get_metavar(self, param: click.Parameter, ctx: click.Context) -> str | None:
        return self.metavar

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        where = param.opts[0] if param is not None and param.opts else self.field
        try:
            self.section.read({}, {self.field: value}, {self.field: where})
        except ConfigError as error:
            text = str(error).removeprefix(f"{where}: ").removeprefix(f"{where} ")
            self.fail(text, param, ctx)
        return value


def setting_option(
    section: type[Section], field: str, *decls: str, **attrs: Any
) -> Callable[[F], F]:
    """A click option for ``section``'s ``field``: its flag (``decls``, default the setting's
    own), its variable shown, its default the model's. The command receives None unless the
    flag is given (the model then reads the variable and the default)."""
    flag = section.flag(field)
    decls = decls or ((flag,) if flag else ())
    default = section.default(field)
    shown = section.shown(field)
    attrs.setdefault("show_envvar", True)
    if not attrs.get("is_flag") and "/" not in decls[0]:
        attrs.setdefault("type", SettingType(section, field, attrs.pop("metavar", None)))
    if default is not None and default != ():
        attrs.setdefault("default", default)
        attrs.setdefault("show_default", True)
    else:
        attrs.setdefault("default", None)
        if shown:
            attrs.setdefault("show_default", shown)
    return click.option(
        *decls,
        cls=SettingOption,
        envvar=section.variable(field),
        callback=_given_on_the_command_line,
        **attrs,
    )


def _given_on_the_command_line(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    # A default shown in --help is the model's: the model applies it, after the variable.
    if ctx.get_parameter_source(param.name or "") == ParameterSource.COMMANDLINE:
        return value
    return () if param.multiple else None

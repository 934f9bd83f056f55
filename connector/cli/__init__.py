"""The ``pms-sync`` command line: the library's functions wired for work outside Dagster."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from connector.cli import (
    account_commands,
    events_commands,
    init_commands,
    links_commands,
    mapping_commands,
    receive_commands,
    sandbox_commands,
    sync_commands,
    webhook_commands,
)
from connector.cli.masked_output import mask_standard_streams
from connector.config import CliSection
from connector.errors import ConfigError
from connector.secrets import mask_text

DEBUG_VARIABLE = CliSection.variable("debug")
"""Set to 1 to see the (masked) traceback of an unexpected error on stderr."""


class _Commands(click.Group):
    """The command group; with ``--json``, even a usage error prints one JSON document, and so
    does an error no command expected (a short masked line on stderr without ``--json``)."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        # The process's own command line: the command's end is the process's end.
        sync_commands.command_owns_process = args is None
        if not standalone_mode:
            return super().main(argv, prog_name, complete_var, standalone_mode, **extra)
        as_json = "--json" in argv
        try:
            if not as_json:
                return super().main(argv, prog_name, complete_var, standalone_mode, **extra)
            try:
                return super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
            except click.ClickException as error:
                click.echo(sync_commands.json_error(error.format_message(), error.exit_code))
                error.show()
                sys.exit(error.exit_code)
            except click.exceptions.Exit as done:
                sys.exit(done.exit_code)
            except click.Abort:
                click.echo(sync_commands.json_error("aborted", 1))
                sys.exit(1)
        except Exception as error:  # SystemExit and KeyboardInterrupt are no Exception
            _unexpected(error, as_json)


def _unexpected(error: Exception, as_json: bool) -> NoReturn:
    """An error no command expected: its type and masked message, exit 1; the traceback
    (masked too) only with PMS_SYNC_DEBUG=1, on stderr."""
    message = mask_text(f"{type(error).__name__}: {error}")
    # A command that printed its document before failing keeps that one document.
    if as_json and not getattr(sys.stdout, "written", False):
        click.echo(sync_commands.json_error(message, sync_commands.EXIT_ERROR))
    try:
        debug = CliSection.read().debug
    except ConfigError:
        debug = False  # the unexpected error is the one to report
    if debug:
        text = "".join(traceback.format_exception(error))
        click.echo(mask_text(text), err=True, nl=False)
    hint = "" if debug else f" (set {DEBUG_VARIABLE}=1 to see the traceback)"
    click.secho(f"error: unexpected {message}{hint}", fg="red", err=True)
    sys.exit(sync_commands.EXIT_ERROR)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="pms-sync")
def main() -> None:
    """Sync property management system exports to the guest-experience service."""
    # Before any command runs: whatever it prints, a secret it learns is masked.
    mask_standard_streams()


for _module in (
    sandbox_commands,
    init_commands,
    mapping_commands,
    sync_commands,
    account_commands,
    links_commands,
    webhook_commands,
    receive_commands,
    events_commands,
):
    _module.register(main)

"""The ``pms-sync`` command line: the library's functions wired for work outside Dagster."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click

from connector.cli import (
    account_commands,
    init_commands,
    links_commands,
    mapping_commands,
    receive_commands,
    sandbox_commands,
    sync_commands,
    webhook_commands,
)
from connector.cli.masked_output import mask_standard_streams


class _Commands(click.Group):
    """The command group; with ``--json``, even a usage error prints one JSON document."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        if not standalone_mode or "--json" not in argv:
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
):
    _module.register(main)

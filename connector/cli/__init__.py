"""The ``pms-sync`` command line: the library's functions wired for work outside Dagster."""

from __future__ import annotations

import click

from connector.cli import mapping_commands, sandbox_commands, sync_commands
from connector.cli.masked_output import mask_standard_streams


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="pms-sync")
def main() -> None:
    """Sync property management system exports to the guest-experience service."""
    # Before any command runs: whatever it prints, a secret it learns is masked.
    mask_standard_streams()


for _module in (sandbox_commands, mapping_commands, sync_commands):
    _module.register(main)

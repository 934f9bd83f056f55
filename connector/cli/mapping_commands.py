"""CLI commands of the mapping stage: ``validate`` and ``preview`` a mapping file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from connector.contract import Entity
from connector.errors import PmsSyncError
from connector.secrets import mask_payload, mask_text

if TYPE_CHECKING:
    from connector.mapping.model import Mapping

_ENTITY = click.Choice([entity.value for entity in Entity])


def _entities(entity: str | None) -> list[Entity] | None:
    return [Entity(entity)] if entity else None


@click.command("validate")
@click.argument("mapping_file", type=click.Path(path_type=Path))
@click.option("--entity", type=_ENTITY, help="Only this entity.")
@click.option("--errors", "shown", default=10, show_default=True, help="Problems listed.")
def validate(mapping_file: Path, entity: str | None, shown: int) -> None:
    """Check a mapping: the file, the webhooks file it names, its inputs, and every record
    against the contract.

    Exits non-zero when the file, the webhooks file or an input is invalid or any record is
    quarantined.
    """
    from connector.mapping import load_mapping, map_records
    from connector.records import status_findings, status_message

    try:
        mapping = load_mapping(mapping_file)
        click.echo(f"mapping {mapping.name}: file and schema ok")
    except PmsSyncError as error:
        raise click.ClickException(mask_text(str(error))) from None
    # Before the records: a webhooks file's problems are listed even when an input is not.
    problems = _webhooks_problems(mapping)
    try:
        batches = map_records(mapping, entities=_entities(entity))
    except PmsSyncError as error:
        raise click.ClickException(mask_text(str(error))) from None
    for mapped_entity, batch in batches.items():
        quarantine = batch.quarantine
        bad_records = quarantine[["account_id", "record_id", "input", "rows"]].drop_duplicates()
        accounts = ", ".join(batch.accounts) or "-"
        click.echo(
            f"{mapped_entity.value}: {len(batch.records)} valid, {len(bad_records)} quarantined "
            f"({len(quarantine)} problems); accounts: {accounts}"
        )
        problems += len(quarantine)
        for row in quarantine.head(shown).itertuples(index=False):
            value = f" [value: {row.value}]" if row.value else ""
            click.echo(f"  {row.input}:{row.rows} {row.field}: {row.reason}{value}")
        findings = status_findings(quarantine)
        if findings:
            click.secho(status_message(findings, batch.status_fix), fg="red", err=True)
    if problems:
        raise click.ClickException(f"{problems} problem(s) found")
    click.echo("ok: every record is valid")


def _webhooks_problems(mapping: Mapping) -> int:
    """Check the webhooks file the mapping names, print every problem; how many."""
    from connector.webhooks import WebhooksFileError, load_mapping_webhooks

    try:
        hooks = load_mapping_webhooks(mapping)
    except WebhooksFileError as error:
        click.secho(f"Error: {mask_text(str(error))}", fg="red", err=True)
        return len(error.problems)
    if hooks is not None:
        click.echo(f"webhooks file {mapping.webhooks}: {len(hooks.webhooks)} configuration(s) ok")
    return 0


@click.command("preview")
@click.argument("mapping_file", type=click.Path(path_type=Path))
@click.option("--entity", type=_ENTITY, help="Only this entity (default: all).")
@click.option("-n", "count", default=5, show_default=True, help="Records per entity.")
def preview(mapping_file: Path, entity: str | None, count: int) -> None:
    """Show the first mapped records as JSON, with codes and guest contact data masked."""
    from connector.mapping import load_mapping, map_records
    from connector.records import in_export_order

    try:
        mapping = load_mapping(mapping_file)
        batches = map_records(mapping, entities=_entities(entity))
    except PmsSyncError as error:
        raise click.ClickException(mask_text(str(error))) from None
    shown = {
        mapped_entity.value: [
            {
                "accountId": row.account_id,
                "source": row.source_rows,
                "resource": mask_payload(json.loads(row.payload)),
            }
            for row in in_export_order(batch.records).head(count).itertuples(index=False)
        ]
        for mapped_entity, batch in batches.items()
    }
    click.echo(json.dumps(shown, indent=2, ensure_ascii=False))


def register(group: click.Group) -> None:
    """Add this module's commands to the top-level group."""
    group.add_command(validate)
    group.add_command(preview)

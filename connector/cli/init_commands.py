"""CLI command ``pms-sync init``: a first mapping file drafted from one's own exports."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from connector.errors import PmsSyncError
from connector.secrets import mask_text

EXIT_OK = 0
EXIT_ERROR = 1


@click.command("init")
@click.argument("exports", nargs=-1, required=True, metavar="EXPORT...")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("mapping.yaml"),
    show_default=True,
    help="The mapping file to write; input paths in it are relative to its folder.",
)
@click.option("--account", help="The service account (accountId) of every record.")
@click.option("--force", is_flag=True, help="Overwrite OUT if it exists.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def init_command(
    exports: tuple[str, ...], out: Path, account: str | None, force: bool, as_json: bool
) -> None:
    """Draft a first mapping file from EXPORT files (CSV, XLSX) or a database URL.

    Detects each export's delimiter, encoding and header line, matches its columns to the
    service's members by name, and writes every required member it cannot match as a
    `fill_in` placeholder that `pms-sync validate` lists "to fill in".
    """
    from connector.mapping.draft import write_draft

    try:
        draft = write_draft(list(exports), out, account=account, force=force)
    except PmsSyncError as error:
        message = mask_text(str(error))
        if as_json:
            click.echo(json.dumps({"status": "error", "error": message, "exit_code": EXIT_ERROR}))
        click.secho(f"error: {message}", fg="red", err=True)
        sys.exit(EXIT_ERROR)
    if as_json:
        document = {
            "status": "ok",
            "mapping": str(out),
            "inputs": draft.inputs,
            "matched": draft.matched,
            "to_fill_in": draft.to_fill_in,
            "unused_inputs": draft.unused_inputs,
            "notes": draft.notes,
            "exit_code": EXIT_OK,
        }
        click.echo(json.dumps(document, sort_keys=True, ensure_ascii=False))
    else:
        click.echo(f"wrote {out}")
        for name, described in draft.inputs.items():
            click.echo(f"  input {name}: {described}")
        for entity, matched in draft.matched.items():
            click.echo(f"  {entity}: {len(matched)} member(s) matched")
            for path, how in matched.items():
                click.echo(f"    {path} ← {how}")
        for name in draft.unused_inputs:
            click.echo(f"  input {name} is not used yet: join it by hand (docs/mapping.md)")
        for text in draft.notes:
            click.echo(f"  {text}")
    if draft.to_fill_in:
        click.echo(
            f"{len(draft.to_fill_in)} member(s) to fill in: {', '.join(draft.to_fill_in)}; "
            f"replace each fill_in placeholder, then run `pms-sync validate {out}`",
            err=as_json,
        )
    else:
        click.echo(f"next: `pms-sync validate {out}`", err=as_json)
    sys.exit(EXIT_OK)


def register(group: click.Group) -> None:
    """Add this module's commands to the top-level group."""
    group.add_command(init_command)

"""CLI commands of the sandbox stage: ``pms-sync sandbox``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from connector.cli.setting_options import setting_option
from connector.config import SandboxSection
from connector.errors import PmsSyncError
from connector.sandbox.config import (
    DEFAULT_DATA_PATH,
    DEFAULT_PORT,
    GeneratedAccounts,
    SandboxConfig,
    load_config,
)
from connector.sandbox.faults import FaultSettings, Misbehaviour
from connector.sandbox.server import serve_forever
from connector.sandbox.store import DATABASE_FILE
from connector.secrets import mask_text

_FAULT_OPTIONS = {
    "error_rate": "error_rate",
    "rate_limit_rate": "rate_limit_rate",
    "retry_after": "retry_after_s",
    "latency_ms": "latency_ms",
    "timeout_rate": "timeout_rate",
    "timeout_s": "timeout_s",
    "drop_rate": "drop_rate",
    "fail_next": "fail_next",
    "misbehave_next": "misbehave_next",
    "misbehaviour": "misbehaviour",
    "seed": "seed",
}
_MISBEHAVIOURS = ", ".join(Misbehaviour)


def _misbehaviour_rates(
    _context: click.Context, _parameter: click.Parameter, values: tuple[str, ...]
) -> dict[str, float] | None:
    """``("html_200=0.1", "redirect_302=0.05")`` → ``{"html_200": 0.1, ...}``."""
    rates: dict[str, float] = {}
    for value in values:
        kind, separator, rate = value.partition("=")
        if not separator or kind.strip() not in set(Misbehaviour):
            raise click.BadParameter(
                f"expected KIND=RATE with KIND one of {_MISBEHAVIOURS}, got {value!r}"
            )
        try:
            rates[kind.strip()] = float(rate)
        except ValueError:
            raise click.BadParameter(f"{kind}: the rate must be a number, got {rate!r}") from None
    return rates or None


DATABASE_SUFFIXES = (".duckdb", ".sqlite", ".sqlite3", ".db")
"""Suffixes of database files: a --data path ending in one names a file, not a folder."""


def _data_folder(_context: click.Context, _parameter: click.Parameter, value: Path) -> Path:
    """--data is the folder the sandbox keeps ``sandbox.sqlite3`` in (docs/sandbox.md).

    A path named like a database file (``x.duckdb``, ``sandbox.sqlite3``) that is no folder yet
    was meant as a file: refused, rather than a folder of that name created around the file.
    """
    if value.suffix.lower() in DATABASE_SUFFIXES and not value.is_dir():
        raise click.BadParameter(
            f"{str(value)!r} names a database file, but --data is the folder the sandbox keeps "
            f"its data file ({DATABASE_FILE}) in; pass a folder such as {DEFAULT_DATA_PATH} "
            "(a .duckdb file is the connector's snapshot, given to plan and sync with --snapshot)"
        )
    return value


@click.command("sandbox")
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True, help="0: any free port.")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Interface to listen on. Any other than loopback needs --admin-token.",
)
@setting_option(
    SandboxSection,
    "admin_token",
    metavar="TOKEN",
    help="Token every /_sandbox/ request must carry (Authorization: Bearer or "
    "X-Sandbox-Admin-Token); overrides admin_token of --config.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME[:PORT]",
    help="A Host name the sandbox answers besides its own address and loopback (a reverse "
    "proxy's or a DNS name; any port unless given); repeatable. Others are answered 421.",
)
@click.option(
    "--data",
    "data_path",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_DATA_PATH,
    show_default=True,
    callback=_data_folder,
    help="Folder the sandbox keeps its SQLite file (sandbox.sqlite3) in; created if missing.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="YAML file of accounts, tokens, clients, faults and rate limits (default: demo account).",
)
@click.option(
    "--many-accounts",
    type=click.IntRange(min=1, max=100_000),
    metavar="N",
    help="Add N generated accounts (acc-001…, external ids HOTEL-001…) under the "
    "multi-account Open API client many-client / many-secret.",
)
@click.option(
    "--token-lifetime",
    type=click.IntRange(min=1),
    metavar="SECONDS",
    help="Lifetime of every Open API token, client and account-level (expires_in); they are "
    "refused (401) once expired.",
)
@click.option("--error-rate", type=float, help="Fraction of requests answered 500.")
@click.option("--rate-limit-rate", type=float, help="Fraction answered 429 with Retry-After.")
@click.option("--retry-after", type=int, help="Retry-After of injected 429s, in seconds.")
@click.option("--latency-ms", type=float, help="Delay added to every request.")
@click.option("--timeout-rate", type=float, help="Fraction of requests that hang.")
@click.option("--timeout-s", type=float, help="How long a hanging request hangs before a 504.")
@click.option(
    "--drop-rate", type=float, help="Fraction processed whose answer is lost (connection drops)."
)
@click.option("--fail-next", type=int, help="Answer the next N requests with 500.")
@click.option(
    "--misbehaviour-rate",
    "misbehaviour_rates",
    multiple=True,
    callback=_misbehaviour_rates,
    metavar="KIND=RATE",
    help=f"Fraction of sync requests answered with a misbehaviour ({_MISBEHAVIOURS}); repeatable.",
)
@click.option(
    "--misbehave-next", type=int, help="Answer the next N sync requests with --misbehaviour."
)
@click.option(
    "--misbehaviour",
    type=click.Choice([kind.value for kind in Misbehaviour]),
    help="The misbehaviour of --misbehave-next.",
)
@click.option("--seed", type=int, help="Seed of the fault draws.")
@click.option(
    "--access-log/--no-access-log",
    default=False,
    show_default=True,
    help="Log every request line (costs throughput; GET /_sandbox/stats counts requests too).",
)
def sandbox_command(
    port: int,
    host: str,
    admin_token: str | None,
    data_path: Path,
    config_path: Path | None,
    access_log: bool,
    misbehaviour_rates: dict[str, float] | None,
    many_accounts: int | None,
    token_lifetime: int | None,
    allowed_hosts: tuple[str, ...],
    **fault_options: Any,
) -> None:
    """Run the local stand-in of the service (sync webhooks, Open API, admin API)."""
    try:
        config = load_config(config_path) if config_path else SandboxConfig.demo()
        if many_accounts:
            config = config.with_generated_accounts(GeneratedAccounts(count=many_accounts))
        if token_lifetime:
            config = config.with_token_lifetime(token_lifetime)
        given = SandboxSection.read(given={"admin_token": admin_token}).admin_token
        if given is not None:
            config = config.with_admin_token(given.get_secret_value())
        if allowed_hosts:
            config = config.with_allowed_hosts(allowed_hosts)
        overrides = {
            _FAULT_OPTIONS[option]: value
            for option, value in fault_options.items()
            if value is not None
        }
        if misbehaviour_rates:
            overrides["misbehaviour_rates"] = misbehaviour_rates
        if overrides:
            faults = FaultSettings.model_validate(
                {**config.faults.model_dump(exclude_defaults=True), **overrides}
            )
            config = config.model_copy(update={"faults": faults})
        serve_forever(config, data_path, host=host, port=port, access_log=access_log)
    except ValidationError as error:
        raise click.BadParameter(str(error)) from None
    except PmsSyncError as error:
        raise click.ClickException(mask_text(str(error))) from None


def register(group: click.Group) -> None:
    """Add this module's commands to the top-level group."""
    group.add_command(sandbox_command)

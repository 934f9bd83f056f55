"""CLI commands of the sandbox stage: ``pms-sync sandbox``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError

from connector.errors import PmsSyncError
from connector.sandbox.config import DEFAULT_DATA_PATH, DEFAULT_PORT, SandboxConfig, load_config
from connector.sandbox.faults import FaultSettings
from connector.sandbox.server import serve_forever
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
    "seed": "seed",
}


@click.command("sandbox")
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True, help="0: any free port.")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option(
    "--data",
    "data_path",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_DATA_PATH,
    show_default=True,
    help="Directory of the sandbox's SQLite file.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="YAML file of accounts, tokens, clients, faults and rate limits (default: demo account).",
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
    data_path: Path,
    config_path: Path | None,
    access_log: bool,
    **fault_options: Any,
) -> None:
    """Run the local stand-in of the service (sync webhooks, Open API, admin API)."""
    try:
        config = load_config(config_path) if config_path else SandboxConfig.demo()
        overrides = {
            _FAULT_OPTIONS[option]: value
            for option, value in fault_options.items()
            if value is not None
        }
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

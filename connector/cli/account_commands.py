"""CLI commands of the Open API: ``pms-sync accounts`` lists the accounts of the connection's
Open API client, or shows one by external id (its account id and token lifetime, the token
itself masked). The options naming the Open API client are shared with ``plan``, ``sync`` and
``apply``.

Exit codes: 0 listed or found; 1 no Open API client configured, an external id no account
has, or the service could not be reached; 4 the client's credentials were refused (401).
With ``--json``, stdout carries exactly one JSON document whatever the outcome.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import click

from connector.accounts import OpenApiSettings
from connector.cli.setting_options import setting_option
from connector.client import OpenApiClient
from connector.config import OpenApiSection, RunSection, ServiceSection
from connector.contract import Account
from connector.errors import AuthenticationError, ConfigError, PmsSyncError
from connector.secrets import MASK, mask_text, register_secret
from connector.settings import SyncSettings, load_settings

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_AUTHENTICATION = 4

F = TypeVar("F", bound=Callable[..., Any])

NO_CLIENT = (
    f"no Open API client is configured: set {OpenApiSection.variable('client_id')} and "
    f"{OpenApiSection.variable('client_secret')} (or pass --client-id and --client-secret)"
)


def open_api_options(command: F) -> F:
    """``--client-id``, ``--client-secret`` and ``--openapi-url`` (values reach
    ``load_settings`` as ``client_id``, ``client_secret``, ``openapi_url``)."""
    options = [
        setting_option(
            OpenApiSection,
            "client_id",
            metavar="ID",
            help="Open API client id: accounts found by external id, their tokens, property "
            "status.",
        ),
        setting_option(
            OpenApiSection,
            "client_secret",
            metavar="SECRET",
            help="Open API client secret, never printed; prefer the variable, a command line is "
            "visible to other users of the machine.",
        ),
        setting_option(OpenApiSection, "base_url", metavar="URL", help="Open API base URL."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def service_options(command: F) -> F:
    """``--base-url``, ``--snapshot`` and the Open API options: what a command that talks to
    the service and keeps state in the snapshot takes. Their values are ``load_settings``'s
    keyword arguments of the same names, so a command passes them on as ``**service``."""
    options = [
        setting_option(ServiceSection, "base_url", metavar="URL", help="The service."),
        setting_option(
            RunSection,
            "snapshot",
            metavar="FILE|URL",
            help="Snapshot: a DuckDB file or a postgresql:// URL; the Open API token cache lies "
            "beside a file.",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return open_api_options(command)


@click.command("accounts")
@click.option(
    "--external-id",
    metavar="ID",
    help="Show the one account with this external id: its account id and token lifetime.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@service_options
def accounts_command(external_id: str | None, as_json: bool, **service: Any) -> None:
    """List the accounts of the Open API client (every page), or show one by external id."""
    try:
        settings = load_settings(**service)
        if settings.open_api is None:
            raise ConfigError(NO_CLIENT)
        if external_id is not None:
            document = _one_account(settings, settings.open_api, external_id)
        else:
            document = _all_accounts(settings, settings.open_api)
    except PmsSyncError as error:
        code = EXIT_AUTHENTICATION if isinstance(error, AuthenticationError) else EXIT_ERROR
        _fail(mask_text(str(error)), code, as_json)
    code = EXIT_OK if document["status"] == "ok" else EXIT_ERROR
    document["exit_code"] = code
    if as_json:
        click.echo(json.dumps(document, sort_keys=True))
    else:
        _print(document)
    sys.exit(code)


def register(group: click.Group) -> None:
    """Add this module's commands to the top-level group."""
    group.add_command(accounts_command)


def _client(settings: SyncSettings, open_api: OpenApiSettings) -> OpenApiClient:
    return OpenApiClient(
        replace(settings.client, base_url=open_api.base_url),
        open_api.credentials,
        cache_path=open_api.token_cache,
        renew_margin=open_api.renew_margin_s,
    )


def _all_accounts(settings: SyncSettings, open_api: OpenApiSettings) -> dict[str, Any]:
    async def listing() -> tuple[list[Account], int, int, int]:
        async with _client(settings, open_api) as api:
            accounts: list[Account] = []
            pages = total = 0
            async for page in api.account_pages():
                pages += 1
                total = page.pagination.total
                accounts.extend(page.data)
            return accounts, pages, total, api.requests

    accounts, pages, total, requests = asyncio.run(listing())
    return {
        "status": "ok",
        "open_api_url": open_api.base_url,
        "client_id": open_api.client_id,
        "accounts": [{"externalId": a.externalId, "name": a.name} for a in accounts],
        "total": total,
        "pages": pages,
        "requests": requests,
        # Spec §4.3 rule 1: a client whose scope holds one account lists none.
        "single_account_scope": not accounts,
    }


def _one_account(
    settings: SyncSettings, open_api: OpenApiSettings, external_id: str
) -> dict[str, Any]:
    async def lookup() -> tuple[Account | None, int]:
        async with _client(settings, open_api) as api:
            return await api.account(external_id), api.requests

    account, requests = asyncio.run(lookup())
    document: dict[str, Any] = {
        "open_api_url": open_api.base_url,
        "client_id": open_api.client_id,
        "external_id": external_id,
        "requests": requests,
    }
    if account is None or not account.id:
        return document | {
            "status": "not_found",
            "account": None,
            "error": f"no account of the Open API client {open_api.client_id!r} has the "
            f"external id {external_id!r}",
        }
    if account.token:
        register_secret(account.token)  # shown masked, here and in any sink
    lifetime = account.expires_in
    expires_at = (
        (datetime.now(UTC) + timedelta(seconds=lifetime)).isoformat(timespec="seconds")
        if lifetime is not None
        else None
    )
    return document | {
        "status": "ok",
        "account": {
            "externalId": account.externalId,
            "name": account.name,
            "id": account.id,
            "token": MASK if account.token else None,
            "expires_in": lifetime,
            "expires_at": expires_at,
        },
    }


def _print(document: dict[str, Any]) -> None:
    if "accounts" in document:
        width = max((len(a["externalId"]) for a in document["accounts"]), default=10)
        for account in document["accounts"]:
            click.echo(f"{account['externalId']:<{width}}  {account['name']}")
        scope = " (a single-account scope lists none)" if document["single_account_scope"] else ""
        click.echo(
            f"{document['total']} account(s) of client {document['client_id']} in "
            f"{document['pages']} page(s){scope}",
            err=True,
        )
        return
    account = document["account"]
    if account is None:
        click.secho(f"error: {document['error']}", fg="red", err=True)
        return
    click.echo(f"external id  {account['externalId']}")
    click.echo(f"name         {account['name']}")
    click.echo(f"account id   {account['id']}")
    click.echo(f"token        {account['token']} (masked)")
    click.echo(f"expires in   {account['expires_in']} s (at {account['expires_at']})")


def _fail(message: str, code: int, as_json: bool) -> None:
    if as_json:
        click.echo(
            json.dumps({"status": "error", "error": message, "exit_code": code}, sort_keys=True)
        )
    click.secho(f"error: {message}", fg="red", err=True)
    sys.exit(code)

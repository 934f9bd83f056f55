"""The local PostgreSQL and MariaDB the tests read and write: a fresh schema or database per
test, dropped afterwards. No server answering skips the test, except under CI=true, where
it fails."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

POSTGRES_URL = os.environ.get(
    "PMS_SYNC_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
MARIADB_URL = os.environ.get(
    "PMS_SYNC_TEST_MARIADB_URL", "mysql+pymysql://root@127.0.0.1:3306/test"
)


def unavailable(what: str, error: Exception) -> None:
    message = f"{what} does not answer ({str(error).splitlines()[0]})"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message}; CI=true requires it")
    pytest.skip(message)


@contextmanager
def postgres_schema(prefix: str = "pms_sync_test") -> Iterator[tuple[str, str]]:
    """A new schema ``prefix_<random>`` on the server: (the server's URL, the schema)."""
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(POSTGRES_URL, connect_args={"connect_timeout": 3})
    try:
        with admin.begin() as connection:
            connection.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    except sa.exc.OperationalError as error:
        admin.dispose()
        unavailable("PostgreSQL", error)
    try:
        yield POSTGRES_URL, schema
    finally:
        with admin.begin() as connection:
            connection.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@contextmanager
def postgres_schema_url(prefix: str = "pms_sync_test", options: str = "") -> Iterator[str]:
    """The URL of a new schema, its ``search_path`` set (``options``: more session settings)."""
    with postgres_schema(prefix) as (server, schema):
        url = sa.engine.make_url(server).update_query_dict(
            {"options": f"-csearch_path={schema} {options}".strip()}
        )
        yield url.render_as_string(hide_password=False)


@contextmanager
def mariadb_database(prefix: str = "pms_sync_test") -> Iterator[str]:
    """The URL of a new database ``prefix_<random>``."""
    database = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(MARIADB_URL, connect_args={"connect_timeout": 3})
    try:
        with admin.begin() as connection:
            connection.execute(sa.text(f"CREATE DATABASE `{database}`"))
    except sa.exc.OperationalError as error:
        admin.dispose()
        unavailable("MariaDB", error)
    url = sa.engine.make_url(MARIADB_URL).set(database=database)
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as connection:
            connection.execute(sa.text(f"DROP DATABASE `{database}`"))
        admin.dispose()

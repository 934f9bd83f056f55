"""The snapshot schema as an ordered list of migration steps.

A snapshot file records which steps it has seen in ``schema_migrations``; opening a file
applies the missing steps in order, so a file written by an older pms-sync opens after an
upgrade. Steps are append-only: never edit a released step, add a new one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

import duckdb


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "acknowledged records and dead letters",
        (
            """
            CREATE TABLE acknowledged (
                account_id      VARCHAR NOT NULL,
                entity          VARCHAR NOT NULL,
                record_id       VARCHAR NOT NULL,
                content_hash    VARCHAR NOT NULL,
                payload         VARCHAR NOT NULL,   -- canonical JSON of the resource last sent
                checkin         DATE,               -- reservations: window and future-cancel policy
                checkout        DATE,
                status          VARCHAR NOT NULL,   -- active | deactivated | cancelled
                acknowledged_at TIMESTAMP NOT NULL,
                request_id      VARCHAR,
                PRIMARY KEY (account_id, entity, record_id)
            )
            """,
            """
            CREATE TABLE dead_letters (
                account_id   VARCHAR NOT NULL,
                entity       VARCHAR NOT NULL,
                record_id    VARCHAR NOT NULL,
                content_hash VARCHAR NOT NULL,     -- the content the service refused
                http_status  INTEGER NOT NULL,
                message      VARCHAR NOT NULL,     -- the service's message, secrets masked
                attempts     INTEGER NOT NULL,     -- runs in which this record was refused
                first_seen   TIMESTAMP NOT NULL,
                last_seen    TIMESTAMP NOT NULL,
                request_id   VARCHAR,
                PRIMARY KEY (account_id, entity, record_id)
            )
            """,
        ),
    ),
    Migration(
        2,
        "run history",
        (
            """
            CREATE TABLE runs (
                run_id      VARCHAR PRIMARY KEY,
                mapping     VARCHAR NOT NULL,
                accounts    VARCHAR NOT NULL,      -- comma-separated account ids of the run
                started_at  TIMESTAMP NOT NULL,
                finished_at TIMESTAMP NOT NULL,
                duration_s  DOUBLE NOT NULL,
                dry_run     BOOLEAN NOT NULL,
                requests    INTEGER NOT NULL,
                status      VARCHAR NOT NULL       -- succeeded | incomplete | failed
            )
            """,
            """
            CREATE TABLE run_counts (
                run_id        VARCHAR NOT NULL,
                account_id    VARCHAR NOT NULL,
                entity        VARCHAR NOT NULL,
                extracted     INTEGER NOT NULL,
                quarantined   INTEGER NOT NULL,
                "create"      INTEGER NOT NULL,
                "update"      INTEGER NOT NULL,
                skip          INTEGER NOT NULL,
                held          INTEGER NOT NULL,
                deactivate    INTEGER NOT NULL,
                cancel        INTEGER NOT NULL,
                acknowledged  INTEGER NOT NULL,
                dead_lettered INTEGER NOT NULL,
                failed        INTEGER NOT NULL,
                pending       INTEGER NOT NULL,
                requests      INTEGER NOT NULL,
                PRIMARY KEY (run_id, account_id, entity)
            )
            """,
        ),
    ),
    Migration(
        3,
        "the connection that owns each acknowledged record",
        (
            # The mapping name (``mapping.name``) that last acknowledged or exported the
            # record: reconciliation of records gone from a full export only considers the
            # records of the connection being synced. Rows written before this step get NULL
            # (unknown owner): no named connection reconciles them until its export contains
            # them again and adopts them (docs/decisions.md, "Reconciliation per
            # connection").
            "ALTER TABLE acknowledged ADD COLUMN connection VARCHAR",
        ),
    ),
    Migration(
        4,
        "rate-limit windows shared by the runs of one service and token",
        (
            """
            CREATE TABLE rate_limit_log (
                limiter_key VARCHAR NOT NULL,   -- base URL + '#' + sha256(token)[:16]
                sent_at     DOUBLE NOT NULL     -- epoch seconds of a request (or a foreign one)
            )
            """,
        ),
    ),
    Migration(
        5,
        "the connection of each run",
        (
            # Baselines (the mass-change guard's last successful run, the count-anomaly
            # history) compare a connection with its own past runs: two mappings feeding one
            # account must not be read as one export shrinking. Runs recorded before this step
            # have no connection and only serve as baselines of unnamed (library) runs.
            "ALTER TABLE runs ADD COLUMN connection VARCHAR",
        ),
    ),
    Migration(
        6,
        "which contract validated each acknowledged payload",
        (
            # A payload the service acknowledged was valid under the contract that checked it:
            # the mapping engine skips validating an identical payload again under the same
            # contract (md5 of the canonical text; the contract's fingerprint alongside).
            "ALTER TABLE acknowledged ADD COLUMN payload_md5 VARCHAR",
            "ALTER TABLE acknowledged ADD COLUMN validated_with VARCHAR",
            "UPDATE acknowledged SET payload_md5 = md5(payload)",
        ),
    ),
    Migration(
        7,
        "changes left pending that the service may have stored",
        (
            # A change whose answer was lost (a connection cut after the request went out, a
            # 5xx, an unconfirmed 2xx) and that stayed pending: the service may hold it. The
            # next run's "skipped" or "already known" for the same content is then explained,
            # not a disagreement. Cleared when the record is acknowledged.
            """
            CREATE TABLE possibly_stored (
                account_id   VARCHAR NOT NULL,
                entity       VARCHAR NOT NULL,
                record_id    VARCHAR NOT NULL,
                content_hash VARCHAR NOT NULL,
                request_id   VARCHAR,
                seen_at      TIMESTAMP NOT NULL,
                PRIMARY KEY (account_id, entity, record_id)
            )
            """,
        ),
    ),
    Migration(
        8,
        "accounts discovered through the Open API, and property status",
        (
            # One row per account an Open API client's externalId lookup returned: the account
            # id sync requests carry, and the account-level token with its expiry (epoch
            # seconds). The token is a secret: the file is owner-only (0600). ``client_key`` is
            # the Open API base URL and client id, so two clients never share an entry.
            """
            CREATE TABLE IF NOT EXISTS discovered_accounts (
                client_key  VARCHAR NOT NULL,
                external_id VARCHAR NOT NULL,
                account_id  VARCHAR NOT NULL,
                name        VARCHAR NOT NULL,
                token       VARCHAR NOT NULL,
                expires_at  DOUBLE NOT NULL,
                fetched_at  DOUBLE NOT NULL,
                PRIMARY KEY (client_key, external_id)
            )
            """,
            # What pms-sync last told the service about a property (PUT /properties/{id}):
            # ``inactive`` after an account left its connection's full export, ``active``
            # once it came back. No row: never changed by pms-sync (active).
            """
            CREATE TABLE IF NOT EXISTS property_status (
                account_id       VARCHAR PRIMARY KEY,
                status           VARCHAR NOT NULL,   -- active | inactive
                update_sub_units BOOLEAN NOT NULL,
                changed_at       TIMESTAMP NOT NULL,
                request_id       VARCHAR,
                connection       VARCHAR
            )
            """,
        ),
    ),
    Migration(
        9,
        "drift found in the service's answers, and full reconciliation passes",
        (
            # A record whose acknowledged state the service's answers put in doubt
            # (docs/drift.md): open (healed_at NULL) until an acknowledgement of the record by
            # a later run; a drift the revealing answer healed at once is recorded healed.
            # One row per record: its latest drift.
            """
            CREATE TABLE drift (
                account_id VARCHAR NOT NULL,
                entity     VARCHAR NOT NULL,
                record_id  VARCHAR NOT NULL,
                kind       VARCHAR NOT NULL,   -- connector.plan._drift.DriftKind
                detail     VARCHAR NOT NULL,
                found_at   TIMESTAMP NOT NULL,
                request_id VARCHAR,            -- x-request-id of the answer that revealed it
                healed_at  TIMESTAMP,          -- NULL: the next run re-sends the record
                PRIMARY KEY (account_id, entity, record_id)
            )
            """,
            # A full reconciliation re-sends every record of a connection once, over as many
            # runs as its budget needs: the records acknowledged since ``started_at`` are done,
            # so the pass resumes where the last run stopped. The rolling refresh needs no
            # table: a re-send's acknowledgement moves the record's ``acknowledged_at``.
            """
            CREATE TABLE reconciliation_passes (
                connection  VARCHAR NOT NULL,  -- mapping name; '' for runs without one
                entity      VARCHAR NOT NULL,
                started_at  TIMESTAMP NOT NULL,
                finished_at TIMESTAMP,         -- NULL: the next reconciling run resumes it
                PRIMARY KEY (connection, entity, started_at)
            )
            """,
        ),
    ),
    Migration(
        10,
        "guest links of upcoming arrivals, and events received from the service",
        (
            # The links the Open API gave for a reservation (GET /openapi/v1/reservations/links),
            # fetched again when missing or older than the links policy's maximum age. The last
            # chat message is kept as metadata; its body only when a mapping asks for it.
            # Plain SQL types only: the PostgreSQL backend creates the same table.
            """
            CREATE TABLE IF NOT EXISTS guest_links (
                account_id           VARCHAR NOT NULL,
                reservation_id       VARCHAR NOT NULL,
                connection           VARCHAR,           -- mapping whose run fetched the links
                checkin              DATE,
                guest_app            VARCHAR NOT NULL,
                chat_link            VARCHAR NOT NULL,
                online_check_in_link VARCHAR NOT NULL,
                message_author       VARCHAR,
                message_author_type  VARCHAR,           -- admin (host) | user (guest)
                message_time         VARCHAR,
                message_sent_via     VARCHAR,
                message_has_attachment BOOLEAN,
                message_seen         BOOLEAN,
                message_body         VARCHAR,           -- NULL unless the mapping keeps bodies
                fetched_at           TIMESTAMP NOT NULL,
                request_id           VARCHAR,
                PRIMARY KEY (account_id, reservation_id)
            )
            """,
            # Outgoing events of the service as the receiver (`pms-sync receive`) got them: one
            # row per event whatever the number of deliveries. ``event_key`` is the SHA-256 of
            # the body's canonical JSON (the service documents no event id); ``seq`` orders
            # arrivals for the Dagster sensor's cursor.
            """
            CREATE TABLE IF NOT EXISTS received_events (
                connection       VARCHAR NOT NULL,    -- from the receiver's path; '' for /events
                event_key        VARCHAR NOT NULL,
                seq              BIGINT NOT NULL,
                account_id       VARCHAR,
                event            VARCHAR NOT NULL,
                resource         VARCHAR NOT NULL,    -- JSON text of the event's resource
                received_at      TIMESTAMP NOT NULL,
                last_received_at TIMESTAMP NOT NULL,
                deliveries       BIGINT NOT NULL,     -- 1 + redeliveries of the same body
                PRIMARY KEY (connection, event_key)
            )
            """,
        ),
    ),
    Migration(
        11,
        "source fingerprints: records whose source rows are unchanged are not mapped again",
        (
            # One row per record a connection mapped and the service holds as mapped
            # (connector.mapping.fingerprints). connection '' is the unnamed connection.
            """
            CREATE TABLE IF NOT EXISTS source_fingerprints (
                connection          VARCHAR NOT NULL,
                entity              VARCHAR NOT NULL,
                source_account      VARCHAR NOT NULL,  -- the account member's value as mapped
                record_id           VARCHAR NOT NULL,
                account_id          VARCHAR NOT NULL,  -- the account it was acknowledged under
                fingerprint         BIGINT NOT NULL,   -- of the record's source rows
                mapping_fingerprint VARCHAR NOT NULL,  -- of everything else shaping it
                content_hash        VARCHAR NOT NULL,  -- what those rows mapped to
                PRIMARY KEY (connection, entity, source_account, record_id)
            )
            """,
        ),
    ),
    Migration(
        12,
        "possibly stored changes keep what reconciliation needs",
        (
            # The service may hold a change whose answer was lost: if its record leaves the
            # export, it is retired like an acknowledged one (its payload with the status
            # changed), its dates feed the windows and a stay's protection of its unit.
            "ALTER TABLE possibly_stored ADD COLUMN payload VARCHAR",
            "ALTER TABLE possibly_stored ADD COLUMN checkin DATE",
            "ALTER TABLE possibly_stored ADD COLUMN checkout DATE",
            "ALTER TABLE possibly_stored ADD COLUMN status VARCHAR",
            "ALTER TABLE possibly_stored ADD COLUMN connection VARCHAR",
            # Set on a push's write-ahead mark (the push's id): a change about to be sent is
            # possibly stored until its answer says otherwise, so a SIGKILL leaves it marked.
            "ALTER TABLE possibly_stored ADD COLUMN in_flight VARCHAR",
        ),
    ),
    Migration(
        13,
        "how far each destination has the received events",
        (
            # Per connection and write-back destination, the last event (``seq``) written
            # there: ``pms-sync events write`` and Dagster's ``service_events`` share it, so
            # neither writes again what the other wrote. Moved only after the destination
            # took the rows; a crash in between re-writes them (upserted: harmless).
            """
            CREATE TABLE IF NOT EXISTS event_write_cursors (
                connection  VARCHAR NOT NULL,
                destination VARCHAR NOT NULL,  -- the table (URL without password) or the file
                upto_seq    BIGINT NOT NULL,
                written_at  TIMESTAMP NOT NULL,
                PRIMARY KEY (connection, destination)
            )
            """,
        ),
    ),
    Migration(
        14,
        "incremental cursors of SQL inputs, and which run counts read incrementally",
        (
            # Per connection, input and scope (the entities, window and accounts a run read
            # it for), the largest cursor value a run read and the service acknowledged, and
            # when the last such run read the input in full (connector.pipeline._incremental).
            """
            CREATE TABLE IF NOT EXISTS source_cursors (
                connection   VARCHAR NOT NULL,  -- '' for the unnamed connection
                input_name   VARCHAR NOT NULL,
                scope        VARCHAR NOT NULL,
                cursor_value VARCHAR,           -- the value's text, exactly as read
                cursor_kind  VARCHAR,           -- integer | decimal | date | timestamp | ...
                full_read_at TIMESTAMP,
                committed_at TIMESTAMP NOT NULL,
                PRIMARY KEY (connection, input_name, scope)
            )
            """,
            # An incremental read's counts are no baseline of the guard or the anomaly bands:
            # its rows are the changed ones, not the export's.
            "ALTER TABLE run_counts ADD COLUMN IF NOT EXISTS incremental INTEGER DEFAULT 0",
        ),
    ),
)

LATEST_VERSION = MIGRATIONS[-1].version

# The steps are written in the SQL both backends share; the few type names PostgreSQL spells
# otherwise are rewritten, so that one list of steps is the schema of both.
_POSTGRES_TYPES = ((re.compile(r"\bDOUBLE\b(?! PRECISION)"), "DOUBLE PRECISION"),)


def statements_for(step: Migration, dialect: str = "duckdb") -> tuple[str, ...]:
    """The statements of ``step`` in ``dialect`` (``duckdb`` or ``postgresql``)."""
    if dialect == "duckdb":
        return step.statements
    statements = []
    for statement in step.statements:
        for pattern, replacement in _POSTGRES_TYPES:
            statement = pattern.sub(replacement, statement)
        statements.append(statement)
    return tuple(statements)


def current_version(connection: duckdb.DuckDBPyConnection) -> int:
    connection.execute(
        """
        CREATE TABLE IF NOT EXISTS schema_migrations (
            version     INTEGER PRIMARY KEY,
            description VARCHAR NOT NULL,
            applied_at  TIMESTAMP NOT NULL
        )
        """
    )
    row = connection.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
    return int(row[0]) if row else 0


def applied_versions(connection: duckdb.DuckDBPyConnection) -> set[int]:
    """The steps the file has seen (creating the bookkeeping table when it is new)."""
    current_version(connection)
    rows = connection.execute("SELECT version FROM schema_migrations").fetchall()
    return {int(row[0]) for row in rows}


def migrate(
    connection: duckdb.DuckDBPyConnection,
    migrations: tuple[Migration, ...] = MIGRATIONS,
) -> list[int]:
    """Apply the steps the file has not seen, each in its own transaction; return their versions.

    A step is missing when the file has no record of it, not when its number is below the
    file's highest: steps numbered on parallel branches (a file written before a lower-numbered
    step was merged) are still applied.
    """
    seen = applied_versions(connection)
    applied: list[int] = []
    for step in migrations:
        if step.version in seen:
            continue
        connection.execute("BEGIN TRANSACTION")
        try:
            for statement in step.statements:
                connection.execute(statement)
            connection.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                [step.version, step.description, datetime.now(UTC).replace(tzinfo=None)],
            )
            connection.execute("COMMIT")
        except Exception:
            connection.execute("ROLLBACK")
            raise
        applied.append(step.version)
    return applied

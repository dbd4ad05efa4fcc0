"""``rushmem migrate`` (and the deploy's MigrateFunction): the schema, then the roles the
request-serving functions use. Run as the table's owner."""

from __future__ import annotations

import dataclasses
import logging

from psycopg import sql

from rushmem.config import Settings
from rushmem.providers.aws import app_db_credentials
from rushmem.store.engine.connection import Connection, Database
from rushmem.store.schema.migrate import apply_migrations, prepare_connection
from rushmem.store.schema.roles import AppLogin, ensure_app_login, ensure_can_set_role
from rushmem_contract.errors import ConfigurationError

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class MigrateResult:
    """The migrations applied now (none when the schema was current; ``functions`` when
    functions.sql ran), and what happened to the application's login role (None when none is
    configured)."""

    applied: list[str]
    app_login: AppLogin | None
    # The erasures the ledger held and the database lacked (a restore), done again after migrating.
    erasures_reapplied: list[str] = dataclasses.field(default_factory=list)


def migrate(settings: Settings, *, dimension: int, fingerprint: str) -> MigrateResult:
    """Apply pending migrations (idempotent); then, as the owner, set up the login role
    ``app_db_user`` and the right to SET ROLE ``db_role``, and check the result connects."""
    applied: list[str] = []
    login: list[AppLogin | None] = [None]
    role = settings.effective_db_role()

    def setup(conn: Connection) -> None:
        applied.extend(apply_migrations(conn, dimension=dimension, fingerprint=fingerprint))
        login[0] = _ensure_app_login(conn, settings)
        if role:
            ensure_can_set_role(conn, role)
        prepare_connection(conn, dimension=dimension, fingerprint=fingerprint, migrate=False, role=role)

    database = Database(settings, setup=setup)
    try:
        database.connection()
    finally:
        database.close()
    return MigrateResult(applied=applied, app_login=login[0])


def _ensure_app_login(conn: Connection, settings: Settings) -> AppLogin | None:
    name, password = settings.app_db_user, None
    secret = app_db_credentials(settings)
    if secret is not None:
        username, password = secret
        if name is not None and username != name:
            raise ConfigurationError(
                f"RUSHMEM_APP_DB_SECRET_ARN holds the password of {username}, not of RUSHMEM_APP_DB_USER={name}"
            )
        name = username
    if name is None:
        return None
    result = ensure_app_login(conn, name, password=password, iam=settings.app_db_iam_auth)
    if settings.db_cluster_arn:
        # Over the RDS Data API a read is one statement (agent_memory_read_as), which cannot set its
        # own statement_timeout once running: the login carries one. As long as RecallFunction's
        # timeout, so a runaway statement stops with its caller instead of holding the cluster awake.
        conn.execute(
            sql.SQL("ALTER ROLE {} SET statement_timeout = {}").format(
                sql.Identifier(name), sql.Literal(f"{DATA_API_STATEMENT_TIMEOUT_MS}ms")
            )
        )
    logger.info("application login role %s", result.summary())
    return result


DATA_API_STATEMENT_TIMEOUT_MS = 10_000

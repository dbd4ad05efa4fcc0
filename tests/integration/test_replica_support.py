"""A real streaming replica built from the embedded server's own binaries (tests/support/replica.py):
what a reader endpoint gives the service, and what it does not (writes, fresh reads)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

from rushmem.config import Settings
from rushmem.service import Memory
from rushmem_contract.models import NewMemory
from tests.support.replica import ReplicaPair, current_lsn, lag_summary, measure_replay_lag, replay_lsn, wait_for_replay


def _service(url: str, *, metering: bool = True) -> Memory:
    settings = Settings(
        database_url=url, embedding_provider="hash", db_role="agent_memory_app", usage_metering=metering
    )
    return Memory(settings)


@pytest.fixture
def writer(replica_pair: ReplicaPair, replica_database: str) -> Iterator[Memory]:
    svc = _service(replica_pair.primary_for(replica_database))
    yield svc
    svc.close()


@pytest.fixture
def reader(replica_pair: ReplicaPair, replica_database: str) -> Iterator[Memory]:
    """The service on the standby: its connection setup (schema check, SET ROLE) only reads. It
    counts no usage: a recall's count is a write (a service with a reader endpoint sends it to
    the writer; this one has none)."""
    svc = _service(replica_pair.standby_for(replica_database), metering=False)
    yield svc
    svc.close()


def test_the_standby_streams_from_the_primary_through_its_slot(replica_pair: ReplicaPair) -> None:
    with psycopg.connect(replica_pair.primary_url, autocommit=True) as primary:
        rows = primary.execute(
            "SELECT r.state, s.active FROM pg_stat_replication r "
            "JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE r.application_name = 'standby'"
        ).fetchall()
    assert rows == [("streaming", True)]
    with psycopg.connect(replica_pair.standby_url, autocommit=True) as standby:
        row = standby.execute("SELECT pg_is_in_recovery(), current_setting('transaction_read_only')").fetchone()
    assert row == (True, "on")


def test_memories_remembered_on_the_primary_are_recalled_from_the_standby(
    replica_pair: ReplicaPair, writer: Memory, reader: Memory
) -> None:
    stored = writer.add([NewMemory(content="prefers window seats on long flights")], user_id="u1")
    with psycopg.connect(replica_pair.primary_for("postgres"), autocommit=True) as primary:
        token = current_lsn(primary)  # after the commit returned: the write is at or before it
    assert replica_pair.wait_for_replay(token, timeout_s=10)

    recalled = reader.recall("which seat on a flight?", user_id="u1")
    assert [m.id for m in recalled.memories] == stored.ids
    assert [m.content for m in reader.list(user_id="u1").memories] == ["prefers window seats on long flights"]
    assert reader.recall("which seat on a flight?", user_id="u2").memories == []  # row-level security holds


def test_the_standby_refuses_writes(replica_pair: ReplicaPair, replica_database: str, reader: Memory) -> None:
    with (
        psycopg.connect(replica_pair.standby_for(replica_database), autocommit=True) as standby,
        pytest.raises(psycopg.errors.ReadOnlySqlTransaction),
    ):
        standby.execute("INSERT INTO user_memories (user_id, content) VALUES ('u1', 'x')")
    # The service's own write path too: a reader connection must never be handed a write.
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        reader.add([NewMemory(content="written to a replica")], user_id="u1")
    assert reader.list(user_id="u1").memories == []


def test_a_paused_standby_serves_an_older_snapshot_until_it_replays_the_token(replica_pair: ReplicaPair) -> None:
    """What consistency 'strong' guards against: a reader that has not replayed a write yet answers
    from before it."""
    table = f"paused_{uuid.uuid4().hex[:8]}"
    with (
        psycopg.connect(replica_pair.primary_url, autocommit=True) as primary,
        psycopg.connect(replica_pair.standby_url, autocommit=True) as standby,
    ):
        primary.execute(f"CREATE TABLE {table} (note text)")
        replica_pair.sync()
        standby.execute("SELECT pg_wal_replay_pause()")
        try:
            primary.execute(f"INSERT INTO {table} VALUES ('fresh')")
            token = current_lsn(primary)
            assert not wait_for_replay(standby, token, timeout_s=0.3)
            assert standby.execute(f"SELECT note FROM {table}").fetchall() == []
            paused_at = replay_lsn(standby)
        finally:
            standby.execute("SELECT pg_wal_replay_resume()")
        assert wait_for_replay(standby, token, timeout_s=10)
        assert standby.execute(f"SELECT note FROM {table}").fetchall() == [("fresh",)]
        assert paused_at is not None
        assert replay_lsn(standby) != paused_at
        primary.execute(f"DROP TABLE {table}")


def test_every_commit_is_replayed_on_the_standby(replica_pair: ReplicaPair) -> None:
    """Every one of 50 single-row commits is readable on the standby within the 10 s bound of
    measure_replay_lag (the figures are printed; ``python -m rushmem_tools.bench.replica --writes 200``
    measures)."""
    lags = measure_replay_lag(replica_pair, writes=50, timeout_s=10)
    print(lag_summary(lags))
    assert len(lags) == 50
    with (
        psycopg.connect(replica_pair.primary_url) as primary,
        psycopg.connect(replica_pair.standby_url) as standby,
    ):
        count = "SELECT count(*) FROM replica_lag_probe"
        assert standby.execute(count).fetchone() == primary.execute(count).fetchone()


def test_a_stopped_standby_refuses_connections_and_catches_up_when_back(replica_pair: ReplicaPair) -> None:
    """A reader outage as the service would see it: connecting fails at once; writes made meanwhile
    are streamed to the standby after it restarts (the slot kept the WAL)."""
    table = f"outage_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(replica_pair.primary_url, autocommit=True) as primary:
        primary.execute(f"CREATE TABLE {table} (note text)")
        with replica_pair.standby_stopped():
            with pytest.raises(psycopg.OperationalError):
                psycopg.connect(replica_pair.standby_url, connect_timeout=2).close()
            primary.execute(f"INSERT INTO {table} VALUES ('written while the reader was down')")
            token = current_lsn(primary)
        assert replica_pair.wait_for_replay(token, timeout_s=10)
        with psycopg.connect(replica_pair.standby_url) as standby:
            assert standby.execute(f"SELECT note FROM {table}").fetchall() == [("written while the reader was down",)]
        primary.execute(f"DROP TABLE {table}")

"""IngestFunction commits each message without waiting for the disk and flushes the WAL once per
batch, before its answer acknowledges the messages; a database restart in between fails the
whole batch, and the redelivery restores what the restart lost (the receipts make the rest no-ops).

On a server of the test's own whose WAL writer waits 10 s between background flushes and that
runs no autovacuum: an unflushed commit stays unflushed for the duration of the test unless the
code flushes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from rushmem.config import Settings
from rushmem.service import BatchNotDurable, Memory
from rushmem.store.memories.messages import UnflushedWrites
from rushmem_contract.models import ConversationEnded, NewMemory
from tests.support.environment import use_lambda_environment
from tests.support.faults import RestartablePostgres
from tests.support.ingest import conversation, failures, sqs_event, sqs_record
from tests.support.ingest import invoke_ingest as invoke


@pytest.fixture
def slow_wal_pg(embedded_dir: Path) -> Iterator[RestartablePostgres]:
    pg = RestartablePostgres(embedded_dir)
    with psycopg.connect(pg.url, autocommit=True) as admin:
        admin.execute("ALTER SYSTEM SET wal_writer_delay = '10s'")
        admin.execute("ALTER SYSTEM SET autovacuum = off")
        admin.execute("SELECT pg_reload_conf()")
    yield pg
    if not pg.is_up():
        pg.start()


def wal_positions(url: str) -> tuple[int, int]:
    """(written so far, flushed to disk so far), as byte positions."""
    with psycopg.connect(url, autocommit=True) as admin:
        row = admin.execute(
            "SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn, pg_current_wal_flush_lsn() - '0/0'::pg_lsn"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def batch(*bodies: dict[str, Any]) -> dict[str, Any]:
    return sqs_event(*(sqs_record(body) for body in bodies))


def before_the_flush(monkeypatch: pytest.MonkeyPatch, action: Callable[[], None]) -> list[int]:
    """Run ``action`` each time the handler is about to flush its batch; how many flushes ran."""
    from rushmem.service.writing import flush_writes as original

    calls: list[int] = []

    def flush_writes(parts: Any, unflushed: UnflushedWrites) -> None:
        calls.append(1)
        action()
        original(parts, unflushed)

    monkeypatch.setattr("rushmem.service.batch.flush_writes", flush_writes)
    return calls


def test_a_batch_is_on_disk_before_the_handler_acknowledges_it(
    monkeypatch: pytest.MonkeyPatch, slow_wal_pg: RestartablePostgres
) -> None:
    use_lambda_environment(monkeypatch, slow_wal_pg.url)
    seen: list[tuple[int, int]] = []
    flushes = before_the_flush(monkeypatch, lambda: seen.append(wal_positions(slow_wal_pg.url)))
    event = batch(
        conversation("u-1", conversation_id="c-1", messages=[], memories=[{"content": "Uses vim"}]),
        conversation("u-2", conversation_id="c-2", messages=[], memories=[{"content": "Uses tmux"}]),
        {"not": "a conversation"},
    )
    response = invoke(event)
    assert len(failures(response)) == 1  # the invalid record only
    assert len(flushes) == 1  # one flush for the batch
    ((written, flushed_before),) = seen
    # The messages were committed without waiting for the disk ...
    assert flushed_before < written
    # ... and were on it by the time the handler answered.
    assert wal_positions(slow_wal_pg.url)[1] >= written


def test_a_restart_between_the_writes_and_the_flush_fails_the_whole_batch(
    monkeypatch: pytest.MonkeyPatch, slow_wal_pg: RestartablePostgres
) -> None:
    use_lambda_environment(monkeypatch, slow_wal_pg.url)
    crashed: list[int] = []

    def crash_once() -> None:
        if not crashed:
            crashed.append(1)
            slow_wal_pg.crash()

    before_the_flush(monkeypatch, crash_once)
    event = batch(
        conversation("u-1", conversation_id="c-1", messages=[], memories=[{"content": "Uses vim"}]),
        conversation("u-1", conversation_id="c-2", messages=[], memories=[{"content": "Uses tmux"}]),
    )
    ids = [r["messageId"] for r in event["Records"]]
    # Both messages were written, but the server that took them crashed before the flush:
    # neither may be acknowledged.
    assert sorted(failures(invoke(event))) == sorted(ids)
    # SQS delivers the batch again: what the crash lost is written, nothing twice.
    assert failures(invoke(event)) == []
    with psycopg.connect(slow_wal_pg.url) as conn:
        stored = conn.execute("SELECT content FROM user_memories WHERE user_id = 'u-1' ORDER BY content").fetchall()
        receipts = conn.execute("SELECT count(*) FROM ingested_messages WHERE user_id = 'u-1'").fetchone()
    assert stored == [("Uses tmux",), ("Uses vim",)]
    assert receipts == (2,)


def test_a_message_found_already_written_is_flushed_too(service: Memory) -> None:
    """Its receipt may come from an earlier delivery that committed without a flush and died."""
    message = ConversationEnded(user_id="u-1", conversation_id="c-1", memories=[NewMemory(content="Uses vim")])
    with service.ingest_batch() as batch:
        assert batch.ingest_conversation(message).status == "stored"
        assert batch.pending
    assert not batch.pending  # flushed on leaving the block
    with service.ingest_batch() as batch:
        assert batch.ingest_conversation(message).status == "duplicate"
        assert batch.pending  # the redelivery's batch flushes before acknowledging it
    assert not batch.pending


def test_a_flush_that_fails_raises_a_typed_error_on_leaving_the_batch(
    monkeypatch: pytest.MonkeyPatch, service: Memory
) -> None:
    """Whatever keeps the flush from finishing, the batch says it is not durable."""
    message = ConversationEnded(user_id="u-1", conversation_id="c-1", memories=[NewMemory(content="Uses vim")])

    def refuse(conn: Any) -> Any:
        raise OSError("the disk is gone")

    monkeypatch.setattr("rushmem.store.memories.messages.flush_writes", refuse)
    with pytest.raises(BatchNotDurable), service.ingest_batch() as batch:
        batch.ingest_conversation(message)


def test_without_a_batch_a_message_is_on_disk_when_ingest_returns(slow_wal_pg: RestartablePostgres) -> None:
    """POST /conversations and the command line wait for the disk on every message."""
    service = Memory(Settings(database_url=slow_wal_pg.url, embedding_provider="hash", db_role="agent_memory_app"))
    try:
        message = ConversationEnded(user_id="u-1", conversation_id="c-1", memories=[NewMemory(content="Uses vim")])
        assert service.ingest_conversation(message).status == "stored"
    finally:
        service.close()
    # A crash the moment it returned loses nothing. (Comparing the WAL's written and flushed
    # positions was not this: a later read may prune a page and log it without a flush.)
    slow_wal_pg.crash()  # and starts again
    with psycopg.connect(slow_wal_pg.url) as conn:
        stored = conn.execute("SELECT content FROM user_memories WHERE user_id = 'u-1'").fetchall()
    assert stored == [("Uses vim",)]

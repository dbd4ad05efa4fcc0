"""Reads on a reader endpoint, against a real streaming replica (tests/support/replica.py: the embedded
server's binaries, pg_basebackup + hot standby). The standby's replay is paused to make "the
reader has not seen this write yet" deterministic: what an eventual read misses, a strong one
sees; writes and the write path's own reads never touch the reader; a reader that is down hands
its reads to the writer."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from rushmem.config import Settings
from rushmem.service import Memory
from rushmem_client import MemoryClient
from rushmem_contract.errors import NotFound
from rushmem_contract.models import ConversationEnded, MemoryChanges, NewMemory
from tests.support.recall import body_of, invoke, serving, with_body, with_request
from tests.support.replica import ReplicaPair

USER = "user-123"


def settings_for(pair: ReplicaPair, database: str, **extra: Any) -> Settings:
    return Settings(
        database_url=pair.primary_for(database),
        database_reader_url=pair.standby_for(database),
        embedding_provider="hash",
        db_role="agent_memory_app",
        **extra,
    )


# What an eventual read may miss, with the staleness bounds off (test_reader_resilience.py has them on).
UNBOUNDED = {"db_read_your_writes_s": 0, "db_reader_max_lag_s": 3600}


def unbounded_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MEMORY_DB_READ_YOUR_WRITES_S", "0")
    monkeypatch.setenv("AGENT_MEMORY_DB_READER_MAX_LAG_S", "3600")


@pytest.fixture
def routed(replica_pair: ReplicaPair, replica_database: str) -> Iterator[Memory]:
    service = Memory(settings_for(replica_pair, replica_database, db_reader_retry_after_s=0, **UNBOUNDED))
    yield service
    service.close()


@contextlib.contextmanager
def replay_paused(pair: ReplicaPair) -> Iterator[None]:
    """The standby stops applying the writer's changes for the block (a lagging reader)."""
    with psycopg.connect(pair.standby_url, autocommit=True) as standby:
        standby.execute("SELECT pg_wal_replay_pause()")
        try:
            yield
        finally:
            standby.execute("SELECT pg_wal_replay_resume()")
    pair.sync()


def sessions(server_url: str, database: str, application: str) -> int:
    """The sessions on that server of ``database`` with that application_name."""
    with psycopg.connect(server_url, autocommit=True) as server:
        row = server.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = %s",
            [database, application],
        ).fetchone()
    assert row is not None
    return int(row[0])


def reader_sessions(pair: ReplicaPair, database: str) -> int:
    return sessions(pair.standby_url, database, "agent-memory-reader")


def test_eventual_reads_come_from_the_reader_and_strong_ones_from_the_writer(
    replica_pair: ReplicaPair, replica_database: str, routed: Memory
) -> None:
    old = routed.add([NewMemory(content="Prefers pnpm over npm")], user_id=USER).ids[0]
    replica_pair.sync()
    with replay_paused(replica_pair):
        new = routed.add([NewMemory(content="Deploys the editor with Vite")], user_id=USER).ids[0]
        # The reader has not replayed the second write: every eventual read misses it ...
        assert [m.id for m in routed.recall("package manager and deploy tool", user_id=USER).memories] == [old]
        assert [m.id for m in routed.list(user_id=USER).memories] == [old]
        assert [line.id for line in routed.export(user_id=USER).lines] == [old]
        with pytest.raises(Exception, match="no history"):
            routed.history(new, user_id=USER)
        with pytest.raises(Exception, match="no memory"):
            routed.get(new, user_id=USER)
        # ... and every strong one sees it.
        recalled = routed.recall("package manager and deploy tool", user_id=USER, consistency="strong").memories
        assert {m.id for m in recalled} == {old, new}
        assert {m.id for m in routed.list(user_id=USER, consistency="strong").memories} == {old, new}
        assert routed.get(new, user_id=USER, consistency="strong").content == "Deploys the editor with Vite"
        assert [e.event for e in routed.history(new, user_id=USER, consistency="strong").events] == ["created"]
        assert reader_sessions(replica_pair, replica_database) == 1
    # Replayed: the reader has caught up.
    assert {m.id for m in routed.list(user_id=USER).memories} == {old, new}
    assert routed.admin.reader_fallbacks() == 0
    # The recalls the reader served were counted on the writer (a replica cannot write).
    assert routed.usage(USER).totals.get("recall") == 2


def test_writes_and_the_reads_they_depend_on_use_the_writer(
    replica_pair: ReplicaPair, replica_database: str, routed: Memory
) -> None:
    with replay_paused(replica_pair):
        first = routed.add([NewMemory(content="Prefers pnpm over npm")], user_id=USER).ids[0]
        # The write path reads what it folds into on the writer: the reader has not seen `first`.
        restated = ConversationEnded(
            user_id=USER, conversation_id="c-1", memories=[NewMemory(content="Prefers pnpm over npm!")]
        )
        outcome = routed.ingest_conversation(restated)
        assert outcome.ids == [first]
        assert outcome.refreshed == 1
        # Same for a redelivery's receipt, an update and a delete.
        assert routed.ingest_conversation(restated).status == "duplicate"
        changed = routed.update(first, MemoryChanges(category="preference"), user_id=USER)
        assert changed.category == "preference"
        assert routed.update(first, MemoryChanges(), user_id=USER).id == first
        routed.delete(first, user_id=USER)
    assert routed.list(user_id=USER).memories == []
    assert routed.admin.reader_fallbacks() == 0


def test_a_reader_that_is_down_hands_its_reads_to_the_writer(
    replica_pair: ReplicaPair, replica_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    service = Memory(settings_for(replica_pair, replica_database, db_reader_retry_after_s=3600, **UNBOUNDED))
    try:
        stored = service.add([NewMemory(content="Prefers pnpm over npm")], user_id=USER).ids
        with caplog.at_level(logging.WARNING), replica_pair.standby_stopped():
            assert [m.id for m in service.recall("package manager", user_id=USER).memories] == stored
            assert [m.id for m in service.list(user_id=USER).memories] == stored  # not tried again
        assert service.admin.reader_fallbacks() == 1
        assert [getattr(r, "reason", None) for r in caplog.records if r.getMessage().startswith("reader_fallback")] == [
            "unavailable"
        ]
        # The reader is back, but this container waits out db_reader_retry_after_s first.
        service.list(user_id=USER)
        assert reader_sessions(replica_pair, replica_database) == 0
        service.admin.reads.retry_after_s = 0
        service.admin.reads._reader_down_until = 0.0
        service.list(user_id=USER)
        assert reader_sessions(replica_pair, replica_database) == 1
    finally:
        service.close()


def test_the_http_api_reads_strongly_when_asked(
    replica_pair: ReplicaPair, replica_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", replica_pair.primary_for(replica_database))
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_READER_URL", replica_pair.standby_for(replica_database))
    monkeypatch.setenv("AGENT_MEMORY_EMBEDDING_PROVIDER", "hash")
    monkeypatch.setenv("AGENT_MEMORY_DB_ROLE", "agent_memory_app")
    unbounded_env(monkeypatch)
    with replay_paused(replica_pair):
        added = invoke(with_body("http-memories-add.json", {"user_id": USER, "memories": [{"content": "Uses pnpm"}]}))
        assert added["statusCode"] == 201
        recall = {"user_id": USER, "query": "package manager"}
        eventual = invoke(with_body("http-recall-iam.json", recall))
        strong = invoke(with_body("http-recall-iam.json", {**recall, "consistency": "strong"}))
        assert body_of(eventual)["memories"] == []
        assert [m["content"] for m in body_of(strong)["memories"]] == ["Uses pnpm"]
        listed = invoke(
            with_request("http-memories-list.json", "GET", "/memories", {"user_id": USER, "consistency": "strong"})
        )
        assert [m["content"] for m in body_of(listed)["memories"]] == ["Uses pnpm"]
        bad = invoke(with_body("http-recall-iam.json", {**recall, "consistency": "linearizable"}))
        assert bad["statusCode"] == 400
        assert "consistency" in json.dumps(body_of(bad))


def test_the_client_asks_for_the_writer_when_it_must(
    replica_pair: ReplicaPair, replica_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", replica_pair.primary_for(replica_database))
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_READER_URL", replica_pair.standby_for(replica_database))
    monkeypatch.setenv("AGENT_MEMORY_EMBEDDING_PROVIDER", "hash")
    monkeypatch.setenv("AGENT_MEMORY_DB_ROLE", "agent_memory_app")
    unbounded_env(monkeypatch)
    with serving(unverified_jwt=False) as url:
        client = MemoryClient(url)
        with replay_paused(replica_pair):
            memory_id = client.add(["Uses pnpm"], user_id=USER).ids[0]
            assert client.recall("package manager", user_id=USER).memories == []
            strong = client.recall("package manager", user_id=USER, consistency="strong")
            assert [m.content for m in strong.memories] == ["Uses pnpm"]
            with pytest.raises(NotFound):
                client.get(memory_id, user_id=USER)
            assert client.get(memory_id, user_id=USER, consistency="strong").content == "Uses pnpm"
            assert client.list(user_id=USER).memories == []
            assert [m.content for m in client.list(user_id=USER, consistency="strong").memories] == ["Uses pnpm"]
            exported = client.pages(client.export, user_id=USER, consistency="strong")
            assert [line.content for line in exported] == ["Uses pnpm"]


def test_the_handler_counts_reads_the_writer_served_for_a_failed_reader(
    replica_pair: ReplicaPair,
    replica_database: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", replica_pair.primary_for(replica_database))
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_READER_URL", replica_pair.standby_for(replica_database))
    monkeypatch.setenv("AGENT_MEMORY_EMBEDDING_PROVIDER", "hash")
    monkeypatch.setenv("AGENT_MEMORY_DB_ROLE", "agent_memory_app")
    with replica_pair.standby_stopped():
        result = invoke(with_body("http-recall-iam.json", {"user_id": USER, "query": "package manager"}))
    assert result["statusCode"] == 200
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith('{"_aws"')]
    assert [m["ReaderFallback"] for m in lines if "ReaderFallback" in m] == [[1.0]]

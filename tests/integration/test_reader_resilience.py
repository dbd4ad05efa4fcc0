"""Reads that scale out and fail well, on a real primary + streaming standby (tests/replica.py):
a reader's recall puts nothing on the writer (its usage count waits in the container and is
written in batches), so recall answers with the writer down."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import psycopg
import pytest

from rushmem.service import Memory
from rushmem_contract.models import NewMemory
from tests.integration.test_readers import replay_paused, sessions, settings_for
from tests.support.recall import body_of, invoke, with_body
from tests.support.replica import ReplicaPair

USER = "user-123"


def writer_sessions(pair: ReplicaPair, database: str) -> int:
    """The service's sessions on the primary (the writer's application_name)."""
    return sessions(pair.primary_url, database, "agent-memory")


def recall_counts(pair: ReplicaPair, database: str) -> int:
    """The recalls usage_daily holds, read as the superuser (nothing of the service runs)."""
    with psycopg.connect(pair.primary_for(database), autocommit=True) as conn:
        row = conn.execute("SELECT COALESCE(sum(calls), 0) FROM usage_daily WHERE kind = 'recall'").fetchone()
    assert row is not None
    return int(row[0])


def wait_for(check: Any, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return bool(check())


def test_a_reader_recall_opens_nothing_on_the_writer(replica_pair: ReplicaPair, replica_database: str) -> None:
    settings = settings_for(replica_pair, replica_database, usage_flush_max_pending=1000, usage_flush_interval_s=3600)
    with Memory(settings) as writer:
        writer.add([NewMemory(content="Prefers pnpm over npm")], user_id=USER)
    replica_pair.sync()
    service = Memory(settings)
    try:
        for _ in range(5):
            assert [m.content for m in service.recall("package manager", user_id=USER).memories] == [
                "Prefers pnpm over npm"
            ]
        # Five recalls served: not one writer session opened, nothing counted yet ...
        assert writer_sessions(replica_pair, replica_database) == 0
        assert recall_counts(replica_pair, replica_database) == 0
        # ... the next write carries them to the writer, once.
        service.add([NewMemory(content="Deploys with Vite")], user_id="someone-else")
        assert recall_counts(replica_pair, replica_database) == 5
        service.add([NewMemory(content="Deploys with Rollup")], user_id="someone-else")
        assert recall_counts(replica_pair, replica_database) == 5
    finally:
        service.close()


def test_usage_is_written_in_batches_when_enough_is_waiting(replica_pair: ReplicaPair, replica_database: str) -> None:
    settings = settings_for(replica_pair, replica_database, usage_flush_max_pending=3, usage_flush_interval_s=3600)
    with Memory(settings) as service:
        for user in ("u1", "u2", "u1"):
            service.recall("package manager", user_id=user)
        # The third count made a batch due: written from a thread of its own, per user and day.
        assert wait_for(lambda: recall_counts(replica_pair, replica_database) == 3)
        service.recall("package manager", user_id="u2")
        assert recall_counts(replica_pair, replica_database) == 3  # one waiting: not due
        assert service.usage("u2").totals.get("recall") == 2  # a usage report writes what waits first
        assert service.usage("u1").totals.get("recall") == 2
    # Closing the service wrote nothing twice.
    assert recall_counts(replica_pair, replica_database) == 4


def test_recall_answers_with_the_writer_stopped(
    replica_pair: ReplicaPair, replica_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", replica_pair.primary_for(replica_database))
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_READER_URL", replica_pair.standby_for(replica_database))
    monkeypatch.setenv("AGENT_MEMORY_EMBEDDING_PROVIDER", "hash")
    monkeypatch.setenv("AGENT_MEMORY_DB_ROLE", "agent_memory_app")
    monkeypatch.setenv("AGENT_MEMORY_USAGE_FLUSH_MAX_PENDING", "2")
    added = invoke(with_body("http-memories-add.json", {"user_id": USER, "memories": [{"content": "Uses pnpm"}]}))
    assert added["statusCode"] == 201
    replica_pair.sync()
    recall = with_body("http-recall-iam.json", {"user_id": USER, "query": "package manager"})
    with replica_pair.writer_stopped():
        for _ in range(4):  # two batches come due, and cannot be written
            started = time.perf_counter()
            answer = invoke(recall)
            assert answer["statusCode"] == 200
            assert [m["content"] for m in body_of(answer)["memories"]] == ["Uses pnpm"]
            assert time.perf_counter() - started < 2.0  # never waits for the writer's connect timeout
    # The writer is back: the counts kept meanwhile are written, each once.
    from rushmem.service import built_service

    service = built_service()
    assert service is not None
    assert wait_for(lambda: service.admin.flush_usage() >= 0 and recall_counts(replica_pair, replica_database) == 4)


def recall_in_time(service: Memory, timeout_s: float) -> tuple[list[str], float]:
    """A recall from a thread of its own: its memories and how long it took; fails when it had no
    answer within ``timeout_s`` (the thread is left to finish once the server resumes)."""
    answer: dict[str, Any] = {}

    def run() -> None:
        answer["memories"] = [m.content for m in service.recall("package manager", user_id=USER).memories]

    started = time.perf_counter()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout_s)
    assert not thread.is_alive(), f"recall had no answer after {timeout_s} s"
    return answer["memories"], time.perf_counter() - started


def test_a_frozen_reader_counts_as_failed_within_the_deadline(
    replica_pair: ReplicaPair, replica_database: str, caplog: pytest.LogCaptureFixture
) -> None:
    # No own-write window, and the lag measured once: every recall here tries the reader first.
    settings = settings_for(
        replica_pair, replica_database, db_read_deadline_s=1.0, db_read_your_writes_s=0, db_reader_lag_check_s=3600
    )
    service = Memory(settings)
    try:
        service.add([NewMemory(content="Prefers pnpm over npm")], user_id=USER)
        replica_pair.sync()
        assert recall_in_time(service, 10)[0] == ["Prefers pnpm over npm"]  # the reader's connection is open
        with caplog.at_level(logging.WARNING), replica_pair.standby_frozen():
            # An open connection to a reader that never answers: given up at the deadline, then the writer.
            memories, took = recall_in_time(service, 8)
            assert memories == ["Prefers pnpm over npm"]
            assert took < 1.0 + 1.5
            # A new connection to it: libpq's connect timeout (2 s at least) bounds it.
            service.admin.reads._reader_down_until = 0.0
            memories, took = recall_in_time(service, 8)
            assert memories == ["Prefers pnpm over npm"]
            assert took < 2.0 + 1.5
        reasons = [getattr(r, "reason", None) for r in caplog.records if r.getMessage().startswith("reader_fallback")]
        assert reasons == ["deadline", "unavailable"]
        assert service.admin.reader_fallbacks() == 2
    finally:
        service.close()


# ---- bounded staleness ---------------------------------------------------------------------------


def contents(service: Memory, user_id: str = USER) -> list[str]:
    return sorted(m.content for m in service.recall("package manager deploy tool", user_id=user_id).memories)


def test_a_users_reads_after_their_own_write_see_it(replica_pair: ReplicaPair, replica_database: str) -> None:
    with Memory(settings_for(replica_pair, replica_database, db_reader_max_lag_s=3600)) as service:
        service.add([NewMemory(content="Prefers pnpm as the package manager")], user_id=USER)
        replica_pair.sync()
        with replay_paused(replica_pair):
            service.add([NewMemory(content="Deploys with Vite as the deploy tool")], user_id=USER)
            # The reader has not replayed it; the writer answers this user for the window.
            assert contents(service) == ["Deploys with Vite as the deploy tool", "Prefers pnpm as the package manager"]
            assert len(service.list(user_id=USER).memories) == 2
            # Another user's reads still go to the reader.
            assert contents(service, "someone-else") == []
            assert service.admin.reads.kept_fresh == {"own_write": 2}


def test_reads_go_to_the_writer_while_the_reader_lags_past_the_threshold(
    replica_pair: ReplicaPair, replica_database: str
) -> None:
    bounded = settings_for(
        replica_pair, replica_database, db_reader_max_lag_s=0.3, db_reader_lag_check_s=0.05, db_read_your_writes_s=0
    )
    with Memory(bounded) as service, Memory(settings_for(replica_pair, replica_database)) as elsewhere:
        elsewhere.add([NewMemory(content="Prefers pnpm as the package manager")], user_id=USER)
        replica_pair.sync()
        assert contents(service) == ["Prefers pnpm as the package manager"]
        with replay_paused(replica_pair):
            # Written by another container: this one has no pin, only the reader's lag to go by.
            elsewhere.add([NewMemory(content="Deploys with Vite as the deploy tool")], user_id=USER)
            time.sleep(0.5)
            assert contents(service) == ["Deploys with Vite as the deploy tool", "Prefers pnpm as the package manager"]
            assert service.admin.reads.kept_fresh.get("lag", 0) >= 1
        # Caught up: the reader serves again.
        before = dict(service.admin.reads.kept_fresh)
        time.sleep(0.1)
        assert len(contents(service)) == 2
        assert service.admin.reads.kept_fresh == before


def test_an_erased_user_is_never_served_by_a_lagging_reader(replica_pair: ReplicaPair, replica_database: str) -> None:
    # No own-write window and no lag bound: only the erasure's fence keeps the reader away.
    unbounded = settings_for(replica_pair, replica_database, db_reader_max_lag_s=3600, db_read_your_writes_s=0)
    with Memory(unbounded) as service:
        service.add([NewMemory(content="Prefers pnpm as the package manager")], user_id=USER)
        replica_pair.sync()
        assert contents(service) == ["Prefers pnpm as the package manager"]
        with replay_paused(replica_pair):
            service.forget_user(USER)
            for _ in range(3):
                assert contents(service) == []
                assert service.list(user_id=USER).memories == []
                assert service.export(user_id=USER).lines == []
                time.sleep(0.3)
            assert service.admin.reads.kept_fresh.get("erasure", 0) >= 9
        # Replayed past the erasure: the reader serves the user again, and has nothing of theirs.
        fenced = service.admin.reads.kept_fresh.get("erasure", 0)
        assert contents(service) == []
        assert service.admin.reads.kept_fresh.get("erasure", 0) == fenced

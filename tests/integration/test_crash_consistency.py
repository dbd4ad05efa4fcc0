"""Crashes in the middle of a write: an ingest process killed (SIGKILL) inside a batch, a database
restart inside a re-embedding and inside a purge. After the redelivery or the next run: nothing
lost, nothing doubled, the history consistent.

"In the middle" is made exact, not timed: a row lock held by the test stops the ingest (or the
purge) inside its transaction, after it has written part of it, and the crash comes while it waits.
"""

from __future__ import annotations

import collections
import json
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from rushmem.config import Settings
from rushmem.embeddings.hashing import HashEmbedder
from rushmem.service import Memory
from rushmem_contract.errors import DatabaseUnavailable
from rushmem_contract.models import NewMemory
from tests.support.faults import RestartablePostgres
from tests.support.ingest import failures, sqs_event, sqs_record, start_ingest_process

BLOCKED_USER = "u-blocked"
BLOCKED_FACT = "The user keeps a locked fact."
# Stored before the batch too; message 15 gives it another value, so its write reads the new
# memory's id before it sends COMMIT (to supersede this one): the crash comes inside the transaction.
# (A message with nothing to supersede sends its upsert and COMMIT together: killed while it waits
# there, it still commits whole, receipt included, and its redelivery is a no-op.)
BLOCKED_AGE = "The user is 41 years old."


def conversation_message(i: int) -> dict[str, Any]:
    """Conversation i: two facts of its own, one its user states every time; number 15 belongs to
    the user whose existing memories the test locks, updates one and restates the other last."""
    if i == 15:
        memories = [{"content": "Fact 15 alpha."}, {"content": "Fact 15 beta."},
                    {"content": "The user is 42 years old."}, {"content": BLOCKED_FACT}]  # fmt: skip
        return {"user_id": BLOCKED_USER, "conversation_id": "c-15", "ended_at": "2026-11-29T10:15:00Z",
                "memories": memories}  # fmt: skip
    return {
        "user_id": f"k{i % 6}",
        "conversation_id": f"c-{i}",
        "ended_at": "2026-11-29T10:15:00Z",
        "memories": [
            {"content": f"Fact {i} alpha."},
            {"content": f"Fact {i} beta."},
            {"content": f"The user k{i % 6} prefers TypeScript."},
        ],
    }


def facts_of(indexes: Sequence[int]) -> set[tuple[str, str]]:
    out = {(BLOCKED_USER, BLOCKED_FACT), (BLOCKED_USER, BLOCKED_AGE)}  # stored before the batch
    for i in indexes:
        message = conversation_message(i)
        out.update((message["user_id"], m["content"]) for m in message["memories"])
    return out


def rows_of(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url) as conn:
        return [(r[0], r[1]) for r in conn.execute("SELECT user_id, content FROM user_memories").fetchall()]


def count(url: str, query: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return int(row[0])


def wait_for(condition: Any, timeout: float = 60, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def waiting_on_a_lock(url: str, application: str = "agent-memory") -> bool:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = %s AND wait_event_type = 'Lock'",
            [application],
        ).fetchone()
    return bool(row and row[0])


def service_backends(url: str) -> int:
    return count(
        url,
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND application_name = 'agent-memory'",
    )


def assert_history_consistent(url: str) -> None:
    """One 'created' event per memory, none for a memory that does not exist (a rolled-back
    write leaves no trace), no event twice."""
    with psycopg.connect(url) as conn:
        ids = {r[0] for r in conn.execute("SELECT id FROM user_memories").fetchall()}
        events = conn.execute("SELECT memory_id, event FROM memory_events").fetchall()
    created = collections.Counter(memory_id for memory_id, event in events if event == "created")
    assert set(created) == ids and set(created.values()) == {1}
    assert {memory_id for memory_id, _ in events} == ids


def test_an_ingest_process_killed_inside_a_batch_then_the_batch_again(database_url: str, tmp_path: Path) -> None:
    service = Memory(Settings(database_url=database_url, embedding_provider="hash", db_role="agent_memory_app"))
    service.add([NewMemory(content=BLOCKED_FACT), NewMemory(content=BLOCKED_AGE)], user_id=BLOCKED_USER)
    service.close()
    records = [sqs_record(conversation_message(i)) for i in range(30)]
    event = tmp_path / "batch.json"
    event.write_text(json.dumps(sqs_event(*records)))

    with psycopg.connect(database_url) as blocker:  # the owner (a superuser here): past row-level security
        blocker.execute("SELECT id FROM user_memories WHERE user_id = %s FOR UPDATE", [BLOCKED_USER])
        process = start_ingest_process(database_url, event)
        try:
            # Message 15 has written its first two facts and waits for the locked row.
            wait_for(lambda: waiting_on_a_lock(database_url), what="the ingest to reach the locked row")
            receipts = count(database_url, "SELECT count(*) FROM ingested_messages")
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
        blocker.rollback()
    # The killed container's backend notices at its next read and rolls back.
    wait_for(lambda: service_backends(database_url) == 0, what="the killed process's backend to end")

    assert receipts == 15
    rows = rows_of(database_url)
    assert sorted(rows) == sorted(facts_of(range(15)))  # messages 0-14; nothing of message 15
    assert count(database_url, "SELECT count(*) FROM ingested_messages") == 15
    assert_history_consistent(database_url)

    # SQS delivers the whole batch again (the visibility timeout ran out): once each, all of it.
    again = start_ingest_process(database_url, event)
    answer = json.loads(again.communicate(timeout=300)[0])
    assert failures(answer) == []
    rows = rows_of(database_url)
    assert len(rows) == len(set(rows)) and set(rows) == facts_of(range(30))
    assert count(database_url, "SELECT count(*) FROM ingested_messages") == 30
    assert_history_consistent(database_url)
    print(
        f"\nSIGKILL inside a batch: {receipts} of 30 messages committed before, 30 after the redelivery, 0 duplicates"
    )


# ---- a database restart inside a re-embedding -------------------------------------------------


def seeded(pg: RestartablePostgres, memories: int) -> Memory:
    app = Memory(Settings(database_url=pg.url, embedding_provider="hash", db_role="agent_memory_app"))
    app.admin.migrate()
    for start in range(0, memories, 100):
        for user in ("r1", "r2", "r3"):
            app.add(
                [NewMemory(content=f"fact {i} of {user} about topic {i % 9}") for i in range(start, start + 100)],
                user_id=user,
            )
    return app


class InterruptingEmbedder(HashEmbedder):
    """The new model: on its ``at``-th call (a batch embedded, not yet stored) the database goes away."""

    def __init__(self, at: int, interrupt: Any) -> None:
        super().__init__(dimension=256)
        self.calls = 0
        self.at = at
        self.interrupt = interrupt

    def embed(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        vectors = super().embed(texts)
        if self.calls == self.at:
            self.interrupt()
        return vectors


def history(url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT memory_id, event, at FROM memory_events ORDER BY id").fetchall()


def assert_switched(pg: RestartablePostgres, memories: int) -> None:
    with psycopg.connect(pg.url) as conn:
        assert conn.execute(
            "SELECT count(*), count(DISTINCT vector_dims(embedding)) FROM user_memories"
        ).fetchone() == (
            memories,
            1,
        )
        assert conn.execute("SELECT DISTINCT vector_dims(embedding) FROM user_memories").fetchone() == (256,)
        meta: dict[str, str] = dict(conn.execute("SELECT key, value FROM agent_memory_meta").fetchall())
    assert meta["embedding_model"].endswith(":256") and "next_model" not in meta
    fresh = Memory(
        Settings(database_url=pg.url, embedding_provider="hash", embedding_dimensions=256, db_role="agent_memory_app")
    )
    assert (
        fresh.recall("fact 7 of r2 about topic 7", user_id="r2", limit=1).memories[0].content
        == "fact 7 of r2 about topic 7"
    )
    fresh.close()


@pytest.mark.parametrize("at", [1, 3])
def test_a_restart_inside_a_reembedding_is_waited_out(own_pg: RestartablePostgres, at: int) -> None:
    app = seeded(own_pg, 300)
    before = history(own_pg.url)
    embedder = InterruptingEmbedder(at, own_pg.restart)
    owner = Memory(Settings(database_url=own_pg.url, embedding_provider="hash"), embedder=embedder)
    result = owner.admin.reembed(batch_size=100, reconnect_s=30)
    assert result.switched and result.filled == 900
    assert_switched(own_pg, 900)
    assert history(own_pg.url) == before  # re-embedding changes no memory
    app.close()


def test_a_reembedding_the_database_leaves_stops_and_the_next_run_resumes(own_pg: RestartablePostgres) -> None:
    app = seeded(own_pg, 300)
    before = history(own_pg.url)
    embedder = InterruptingEmbedder(3, own_pg.stop)
    owner = Memory(Settings(database_url=own_pg.url, embedding_provider="hash"), embedder=embedder)
    with pytest.raises(DatabaseUnavailable) as err:
        owner.admin.reembed(batch_size=100, reconnect_s=1)
    assert "resume" in str(err.value)
    own_pg.start()
    with psycopg.connect(own_pg.url) as conn:
        filled = conn.execute("SELECT count(*) FROM user_memories WHERE embedding_next IS NOT NULL").fetchone()
    assert filled == (200,)  # two batches stored; the third was embedded when the database went
    again = Memory(Settings(database_url=own_pg.url, embedding_provider="hash"), embedder=HashEmbedder(256))
    result = again.admin.reembed(batch_size=100)
    assert result.state == "resuming" and result.switched and result.filled == 700
    assert_switched(own_pg, 900)
    assert history(own_pg.url) == before
    app.close()


# ---- a database restart inside a purge --------------------------------------------------------


def test_a_restart_inside_a_purge_then_the_purge_again(own_pg: RestartablePostgres) -> None:
    Memory(Settings(database_url=own_pg.url, embedding_provider="hash")).admin.migrate()
    vector = "[" + ",".join(["0.05"] * 384) + "]"
    with psycopg.connect(own_pg.url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO user_memories (user_id, content, content_hash, embedding, expires_at, superseded_at) "
            "SELECT 'p' || (g %% 5), kind || ' ' || g, sha256(convert_to(kind || g, 'UTF8')), %s::vector, "
            "CASE kind WHEN 'expired' THEN now() - interval '1 day' END, "
            "CASE kind WHEN 'superseded' THEN now() - interval '400 days' END "
            "FROM generate_series(1, 1500) g, unnest(ARRAY['expired', 'superseded', 'live']) kind",
            [vector],
        )
        ids = {kind: {r[0] for r in conn.execute(
            "SELECT id FROM user_memories WHERE content LIKE %s", [f"{kind} %"]).fetchall()}
            for kind in ("expired", "superseded", "live")}  # fmt: skip
    owner = Memory(Settings(database_url=own_pg.url, embedding_provider="hash"))
    outcome: list[Any] = []

    def purge() -> None:
        try:
            outcome.append(owner.admin.purge())
        except DatabaseUnavailable as exc:
            outcome.append(exc)

    blocker = psycopg.connect(own_pg.url)
    # The purge deletes expired rows in physical order and waits at this one, half way.
    blocker.execute("SELECT id FROM user_memories WHERE content = 'expired 750' FOR UPDATE")
    thread = threading.Thread(target=purge)
    thread.start()
    wait_for(lambda: waiting_on_a_lock(own_pg.url), what="the purge to reach the locked row")
    own_pg.restart()  # ends every session: the purge's transaction (half done) and the lock's
    blocker.close()
    thread.join(timeout=120)
    first = outcome[0]
    if isinstance(first, DatabaseUnavailable):
        again = Memory(Settings(database_url=own_pg.url, embedding_provider="hash")).admin.purge()
    else:  # the service retried on a new connection once the server was back
        again = owner.admin.purge()
    with psycopg.connect(own_pg.url) as conn:
        left = {r[0] for r in conn.execute("SELECT id FROM user_memories").fetchall()}
        events = conn.execute("SELECT memory_id, event FROM memory_events WHERE event <> 'created'").fetchall()
    assert left == ids["live"]
    by_event = collections.defaultdict(list)
    for memory_id, name in events:
        by_event[name].append(memory_id)
    assert sorted(by_event) == ["expired", "purged"]
    assert len(by_event["expired"]) == len(set(by_event["expired"])) and set(by_event["expired"]) == ids["expired"]
    assert len(by_event["purged"]) == len(set(by_event["purged"])) and set(by_event["purged"]) == ids["superseded"]
    print(f"\nrestart inside a purge: first run {first!r}, then {again}; 1500 + 1500 purged once each")
    owner.close()


def test_the_vectors_are_unit_length_after_a_resumed_reembedding(own_pg: RestartablePostgres) -> None:
    """The resumed run stored the same vectors a clean run would (nothing half-written survives)."""
    app = seeded(own_pg, 100)
    owner = Memory(
        Settings(database_url=own_pg.url, embedding_provider="hash"), embedder=InterruptingEmbedder(2, own_pg.restart)
    )
    owner.admin.reembed(batch_size=50, reconnect_s=30)
    expected = HashEmbedder(256)
    with psycopg.connect(own_pg.url) as conn:
        from pgvector.psycopg import register_vector

        register_vector(conn)
        for content, embedding in conn.execute("SELECT content, embedding FROM user_memories").fetchall():
            assert np.allclose(embedding.to_numpy(), expected.embed([content])[0], atol=1e-6)
    app.close()

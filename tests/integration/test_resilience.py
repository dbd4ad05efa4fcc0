"""Load, faults and retries through the real handlers: what SQS and API Gateway would do to them.
(The service alone against a database that restarts, stalls or disappears: test_database_faults.py.)

Each test prints the figures docs/reliability.md quotes (run with -s to see them).
"""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from rushmem.config import Settings
from rushmem.service import Memory, get_service
from rushmem_contract.models import NewMemory
from rushmem_tools.local import runtime as lambda_local
from tests.support.environment import use_lambda_environment
from tests.support.faults import RestartablePostgres
from tests.support.ingest import (
    TEMPLATE,
    ChatServer,
    Reply,
    failures,
    invoke_ingest_in_processes,
    memories_answer,
    sqs_event,
    sqs_record,
)


def message(i: int) -> dict[str, Any]:
    """Conversation i of user u{i % 20}: two facts of its own and one its user states every time."""
    return {
        "user_id": f"u{i % 20}",
        "conversation_id": f"c-{i}",
        "ended_at": "2026-11-29T10:15:00Z",
        "memories": [
            {"content": f"Fact {i} alpha about the user's project number {i}."},
            {"content": f"Fact {i} beta about the user's habit number {i}."},
            {"content": f"The user {i % 20} prefers TypeScript."},  # the same fact from many conversations
        ],
    }


def expected_rows(n: int) -> set[tuple[str, str]]:
    facts = set()
    for i in range(n):
        for memory in message(i)["memories"]:
            facts.add((message(i)["user_id"], memory["content"]))
    return facts


def stored(database_url: str) -> list[tuple[str, str]]:
    """Every (user, fact) row, read as the owner; waits for a restarting server to come back."""
    deadline = time.monotonic() + 30
    while True:
        try:
            with psycopg.connect(database_url, connect_timeout=2) as conn:
                return [(r[0], r[1]) for r in conn.execute("SELECT user_id, content FROM user_memories").fetchall()]
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_a_burst_of_200_messages_delivered_twice_by_4_concurrent_invocations(database_url: str, tmp_path: Path) -> None:
    """At-least-once delivery at its worst: every message twice, in 4 processes (Lambda containers) at once."""
    records = [sqs_record(message(i)) for i in range(200)] + [sqs_record(message(i)) for i in range(200)]
    random.Random(7).shuffle(records)
    files = []
    for n in range(4):
        path = tmp_path / f"batch-{n}.json"
        path.write_text(json.dumps(sqs_event(*records[n * 100 : (n + 1) * 100])))
        files.append(path)
    started = time.monotonic()
    answers = invoke_ingest_in_processes(database_url, files, timeout=600)
    elapsed = time.monotonic() - started
    assert [failures(a) for a in answers] == [[], [], [], []]
    rows = stored(database_url)
    assert len(rows) == len(set(rows)) == len(expected_rows(200)) == 420
    assert set(rows) == expected_rows(200)
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM ingested_messages").fetchone() == (200,)
    print(f"\nburst: 400 deliveries of 200 messages by 4 processes in {elapsed:.1f} s, 420 rows, 0 duplicates")


def test_database_restarts_during_ingest_lose_nothing_reported_done(
    monkeypatch: pytest.MonkeyPatch, embedded_dir: Path
) -> None:
    pg = RestartablePostgres(embedded_dir)
    Memory(Settings(database_url=pg.url, embedding_provider="hash")).admin.migrate()  # as the deploy does
    use_lambda_environment(monkeypatch, pg.url)
    batches = [[sqs_record(message(b * 10 + i)) for i in range(10)] for b in range(12)]
    reported_done: list[int] = []
    retried: list[dict[str, Any]] = []
    restarts = 0

    def restarter() -> None:
        nonlocal restarts
        for _ in range(3):
            time.sleep(0.4)
            pg.restart()
            restarts += 1

    thread = threading.Thread(target=restarter)
    thread.start()
    for batch in batches:
        failed = set(failures(lambda_local.invoke(TEMPLATE, "IngestFunction", sqs_event(*batch))))
        for record in batch:
            if record["messageId"] in failed:
                retried.append(record)
            else:
                reported_done.append(json.loads(record["body"])["conversation_id"])
        # Whatever was reported done is in the database right now.
        done_facts = {
            (m["user_id"], memory["content"])
            for m in (json.loads(r["body"]) for r in batch if r["messageId"] not in failed)
            for memory in m["memories"]
        }
        assert done_facts <= set(stored(pg.url))
        time.sleep(0.1)
    thread.join()
    # SQS redelivers what failed; with the database back, it all goes in, once.
    rounds = 0
    while retried:
        rounds += 1
        assert rounds <= 5
        batch, retried = retried, []
        failed = set(failures(lambda_local.invoke(TEMPLATE, "IngestFunction", sqs_event(*batch))))
        retried = [r for r in batch if r["messageId"] in failed]
    rows = stored(pg.url)
    assert len(rows) == len(set(rows)) and set(rows) == expected_rows(120)
    redelivered = 120 - len(reported_done)
    print(f"\nrestarts: {restarts} restarts during 12 batches; {redelivered} records failed and were redelivered")


def test_recall_during_a_restart_answers_503_at_worst_then_200(
    monkeypatch: pytest.MonkeyPatch, embedded_dir: Path
) -> None:
    """A restart between calls is invisible (test_database_faults.py); during one, never a 500."""
    pg = RestartablePostgres(embedded_dir)
    use_lambda_environment(monkeypatch, pg.url)
    base = lambda_local.read_event(TEMPLATE.parent / "events" / "http-recall-iam.json")
    get_service().add([NewMemory(content="TypeScript")], user_id="user-123")

    def recall() -> int:
        event = json.loads(json.dumps(base))
        event["body"] = json.dumps({"user_id": "user-123", "query": "TypeScript"})
        return int(lambda_local.invoke(TEMPLATE, "RecallFunction", event)["statusCode"])

    assert recall() == 200
    statuses = []
    restart = pg.restart_after(0.05)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        statuses.append(recall())
    restart.join()
    statuses.append(recall())
    assert set(statuses) <= {200, 503}  # during a restart: a clear 503 at worst, never a 500
    assert statuses[-1] == 200
    print(f"\nrecall during a restart: {statuses.count(200)} x 200, {statuses.count(503)} x 503")


def test_a_429_storm_is_retried_within_bounds_and_nothing_is_lost(
    monkeypatch: pytest.MonkeyPatch, database_url: str
) -> None:
    use_lambda_environment(monkeypatch, database_url)
    monkeypatch.setenv("AGENT_MEMORY_LLM_PROVIDER", "openai")
    monkeypatch.setenv("AGENT_MEMORY_LLM_API_KEY", "test-key")
    monkeypatch.setenv("AGENT_MEMORY_MAX_RETRIES", "2")
    monkeypatch.setenv("AGENT_MEMORY_RETRY_BASE_DELAY_S", "0.01")
    with ChatServer() as llm:
        monkeypatch.setenv("AGENT_MEMORY_LLM_BASE_URL", llm.base_url)
        monkeypatch.setenv("AGENT_MEMORY_RELATED_MEMORIES_SHOWN", "0")
        throttled = Reply(429, {"error": {"message": "rate limited"}}, headers={"Retry-After": "0"})
        answer = memories_answer({"content": "The user deploys with SAM.", "category": "decision"})
        # Four in five calls are refused, for a while; then the provider recovers.
        llm.script(*[throttled if i % 5 else Reply(200, answer) for i in range(60)])
        llm.default = Reply(200, answer)
        pending = [
            sqs_record({"user_id": f"s{i}", "conversation_id": f"c{i}", "messages": [
                {"role": "user", "content": "We deploy everything with SAM."}]})
            for i in range(20)
        ]  # fmt: skip
        rounds = 0
        while pending:
            rounds += 1
            assert rounds <= 10
            failed = set(failures(lambda_local.invoke(TEMPLATE, "IngestFunction", sqs_event(*pending))))
            pending = [r for r in pending if r["messageId"] in failed]
        calls = len(llm.requests)
    rows = stored(database_url)
    assert sorted(rows) == sorted((f"s{i}", "The user deploys with SAM.") for i in range(20))
    assert calls <= 20 * 3 + 60  # bounded: at most max_retries + 1 calls per record per delivery
    print(f"\n429 storm: 20 records stored after {rounds} deliveries and {calls} provider calls")

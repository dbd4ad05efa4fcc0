"""More clients than the database has connections for, and a database that never answers: the API
answers 503 with Retry-After within the connect timeout, never hangs towards the Lambda timeout;
the write path fails the records (SQS retries them) and writes nothing."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from rushmem.config import Settings
from rushmem.service import Memory
from rushmem_tools.local import runtime
from tests.support.faults import RestartablePostgres
from tests.support.ingest import TEMPLATE, conversation, failures, sqs_event, sqs_record
from tests.support.recall import body_of, with_body

MAX_CONNECTIONS = 8
LOGIN = "am_exhaust_login"


@pytest.fixture
def small_pg(embedded_dir: Path) -> Iterator[RestartablePostgres]:
    """A server with 8 connections, 2 of them reserved for superusers, and an application login."""
    pg = RestartablePostgres(embedded_dir)
    Memory(Settings(database_url=pg.url, embedding_provider="hash")).admin.migrate()
    with psycopg.connect(pg.url, autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET max_connections = {MAX_CONNECTIONS}")
        conn.execute("ALTER SYSTEM SET superuser_reserved_connections = 2")
        conn.execute(f"CREATE ROLE {LOGIN} LOGIN IN ROLE agent_memory_app")
    pg.restart()
    yield pg
    if not pg.is_up():
        pg.start()


def login_url(pg: RestartablePostgres) -> str:
    return make_conninfo(pg.url, user=LOGIN, host=conninfo_to_dict(pg.url)["host"])


def hog(url: str) -> list[psycopg.Connection[Any]]:
    """Every connection slot a non-superuser can take."""
    held: list[psycopg.Connection[Any]] = []
    for _ in range(MAX_CONNECTIONS + 1):
        try:
            held.append(psycopg.connect(url, connect_timeout=2))
        except psycopg.OperationalError:
            return held
    raise AssertionError("the server never refused a connection")


def env_for(monkeypatch: pytest.MonkeyPatch, url: str, **extra: str) -> None:
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", url)
    monkeypatch.setenv("AGENT_MEMORY_EMBEDDING_PROVIDER", "hash")
    for key, value in extra.items():
        monkeypatch.setenv(f"AGENT_MEMORY_{key.upper()}", value)


def recall() -> tuple[dict[str, Any], float]:
    event = with_body("http-recall-iam.json", {"user_id": "u1", "query": "tea"})
    started = time.monotonic()
    result = runtime.invoke(TEMPLATE, "RecallFunction", event)
    return result, time.monotonic() - started


def test_more_clients_than_connections_get_503_with_retry_after(
    monkeypatch: pytest.MonkeyPatch, small_pg: RestartablePostgres
) -> None:
    url = login_url(small_pg)
    env_for(monkeypatch, url)
    held = hog(url)
    try:
        assert len(held) == MAX_CONNECTIONS - 2
        result, elapsed = recall()
        assert result["statusCode"] == 503, result
        assert result["headers"]["Retry-After"] == "1"
        body = body_of(result)
        assert body["code"] == "database_unavailable" and "try again" in body["message"]
        assert LOGIN not in result["body"] and "too many" not in result["body"]  # details stay in the log
        assert elapsed < 5  # refused at once, not a hang
        # The write path: every record fails (SQS retries it later), nothing is written.
        answer = runtime.invoke(TEMPLATE, "IngestFunction", sqs_event(sqs_record(conversation("u1"))))
        assert len(failures(answer)) == 1
    finally:
        for conn in held:
            conn.close()
    result, _ = recall()
    assert result["statusCode"] == 200, result  # the next request connects
    with psycopg.connect(small_pg.url) as conn:
        assert conn.execute("SELECT count(*) FROM user_memories").fetchone() == (0,)


def test_a_database_that_never_answers_is_503_within_the_connect_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """A TCP peer that accepts and then says nothing (a stuck proxy, a full backlog): the connect
    timeout bounds the wait, far inside RecallFunction's 10 s."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        silent.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(silent.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        port = silent.getsockname()[1]
        env_for(monkeypatch, f"postgresql://nobody@127.0.0.1:{port}/x?sslmode=disable", connect_timeout_s="2")
        result, elapsed = recall()
        assert result["statusCode"] == 503, result
        assert result["headers"]["Retry-After"] == "1"
        assert elapsed < 6, elapsed  # the connect timeout, not the Lambda timeout
        print(f"\nsilent database: 503 after {elapsed:.1f} s (connect_timeout_s=2)")
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        silent.close()


def test_the_503_carries_retry_after_through_rushmem_serve(
    monkeypatch: pytest.MonkeyPatch, small_pg: RestartablePostgres
) -> None:
    """The same refusal as a real HTTP answer (what a client sees from `rushmem serve`)."""
    import http.client

    from rushmem_tools.local.server import LocalApi, make_server

    url = login_url(small_pg)
    env_for(monkeypatch, url)
    server = make_server(LocalApi(TEMPLATE))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    held = hog(url)
    try:
        client = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=10)
        client.request(
            "POST", "/recall", json.dumps({"user_id": "u1", "query": "tea"}), {"Content-Type": "application/json"}
        )
        answer = client.getresponse()
        assert answer.status == 503 and answer.getheader("Retry-After") == "1"
        assert json.loads(answer.read())["code"] == "database_unavailable"
    finally:
        for conn in held:
            conn.close()
        server.shutdown()
        server.server_close()

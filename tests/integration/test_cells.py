"""Cells on two real embedded servers (the session's and one of this module's): users routed by the
directory through the HTTP API, the queue and MCP; a queue batch spanning both cells flushed on
both; erasure, export and usage across them; a user moved from one cell to the other."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from rushmem.config import Settings
from rushmem.service import Memory
from rushmem.service.cells import CellMemory, placed_cell
from rushmem.store.engine.embedded import start_embedded_server
from rushmem_contract.models import ConversationEnded, MemoryChanges, NewMemory
from tests.support.ingest import conversation, invoke_ingest, sqs_event, sqs_record
from tests.support.recall import body_of, invoke, with_body, with_request

HTTP_USER = "user-http"


@pytest.fixture(scope="module")
def second_server(pg_root: Path) -> str:
    """A second embedded server (a second cell), for this module; stopped at the session's end."""
    return start_embedded_server(pg_root / "cell-b")


@pytest.fixture
def cell_urls(database_url: str, second_server: str) -> Iterator[dict[str, str]]:
    """A migrated database in each server: cell "a" (the home cell, with the directory) and "b"."""
    name = f"cell_b_{abs(hash(database_url)) % 10**10}"
    with psycopg.connect(second_server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url_b = psycopg.conninfo.make_conninfo(second_server, dbname=name)
    with Memory(Settings(database_url=url_b, embedding_provider="hash")) as owner:
        owner.admin.migrate()
    yield {"a": database_url, "b": url_b}
    with psycopg.connect(second_server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def user_in(cell: str, prefix: str = "user") -> str:
    """A user id the hash places in ``cell``."""
    return next(f"{prefix}-{i}" for i in range(1000) if placed_cell(f"{prefix}-{i}", ["a", "b"]) == cell)


def rows_in(url: str, user_id: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM user_memories WHERE user_id = %s", [user_id]).fetchone()
    assert row is not None
    return int(row[0])


def cells_env(monkeypatch: pytest.MonkeyPatch, urls: dict[str, str]) -> None:
    monkeypatch.setenv("AGENT_MEMORY_CELLS", json.dumps(urls))
    monkeypatch.setenv("AGENT_MEMORY_CELL_DIRECTORY_CACHE_S", "0")
    monkeypatch.setenv("AGENT_MEMORY_EMBEDDING_PROVIDER", "hash")
    monkeypatch.setenv("AGENT_MEMORY_DB_ROLE", "agent_memory_app")


def cells_service(urls: dict[str, str]) -> CellMemory:
    return CellMemory(
        Settings(cells=urls, embedding_provider="hash", db_role="agent_memory_app", cell_directory_cache_s=0)
    )


def for_user(evt: dict[str, Any], user_id: str) -> dict[str, Any]:
    out = copy.deepcopy(evt)
    if out.get("queryStringParameters") and "user_id" in out["queryStringParameters"]:
        out["queryStringParameters"]["user_id"] = user_id
        out["rawQueryString"] = "&".join(f"{k}={v}" for k, v in out["queryStringParameters"].items())
    if "x-memory-user" in out.get("headers", {}):
        out["headers"]["x-memory-user"] = user_id
        out["headers"].pop("x-memory-project", None)
    return out


def test_every_door_routes_each_user_to_their_cell(cell_urls: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    cells_env(monkeypatch, cell_urls)
    in_a, in_b = user_in("a"), user_in("b")
    # HTTP: each user's memory lands in their own cell's database, and nowhere else.
    for user, content in ((in_a, "Prefers pnpm"), (in_b, "Prefers yarn")):
        added = invoke(with_body("http-memories-add.json", {"user_id": user, "memories": [{"content": content}]}))
        assert added["statusCode"] == 201
    assert (rows_in(cell_urls["a"], in_a), rows_in(cell_urls["b"], in_a)) == (1, 0)
    assert (rows_in(cell_urls["a"], in_b), rows_in(cell_urls["b"], in_b)) == (0, 1)
    for user, content in ((in_a, "Prefers pnpm"), (in_b, "Prefers yarn")):
        recalled = invoke(with_body("http-recall-iam.json", {"user_id": user, "query": "package manager"}))
        assert [m["content"] for m in body_of(recalled)["memories"]] == [content]
    # The queue: one batch with a message of each cell's user, written and flushed on both.
    queue_a, queue_b = user_in("a", "queue"), user_in("b", "queue")
    answer = invoke_ingest(sqs_event(sqs_record(conversation(queue_a)), sqs_record(conversation(queue_b))))
    assert answer == {"batchItemFailures": []}
    assert rows_in(cell_urls["a"], queue_a) >= 1 and rows_in(cell_urls["b"], queue_b) >= 1
    assert rows_in(cell_urls["b"], queue_a) == 0 and rows_in(cell_urls["a"], queue_b) == 0
    # MCP over HTTP: the tool reads the caller's user in their cell.
    mcp = with_body(
        for_user(json.loads(Path("events/http-mcp-recall.json").read_text()), in_b),
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "recall_memories", "arguments": {"query": "package manager"}},
        },
    )
    result = body_of(invoke(mcp))
    assert "Prefers yarn" in json.dumps(result) and "Prefers pnpm" not in json.dumps(result)


def test_a_batch_spanning_both_cells_is_flushed_on_both(cell_urls: dict[str, str]) -> None:
    service = cells_service(cell_urls)
    try:
        users = [user_in("a", "batch"), user_in("b", "batch")]
        flushed: list[str] = []
        for name, cell in service.cells.items():
            real = cell._flush_writes

            def spy(unflushed: Any, name: str = name, real: Any = real) -> None:
                flushed.append(name) if unflushed else None
                real(unflushed)

            cell._flush_writes = spy  # type: ignore[method-assign]
        with service.ingest_batch() as batch:
            for user in users:
                batch.ingest_conversation(ConversationEnded.model_validate(conversation(user)))
            assert batch.cells == ["a", "b"]  # type: ignore[attr-defined]
            assert batch.pending
            assert flushed == []  # nothing waits on the disk before the batch ends ...
        assert sorted(flushed) == ["a", "b"]  # ... then each cell flushes its own writes, once
        # Each cell has its user's rows, and only those.
        assert rows_in(cell_urls["a"], users[0]) >= 1 and rows_in(cell_urls["b"], users[1]) >= 1
    finally:
        service.close()


def test_erasure_export_and_usage_across_cells(cell_urls: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    cells_env(monkeypatch, cell_urls)
    in_a, in_b = user_in("a", "gdpr"), user_in("b", "gdpr")
    for user in (in_a, in_b):
        invoke(with_body("http-memories-add.json", {"user_id": user, "memories": [{"content": f"Lives in {user}"}]}))
        exported = invoke(with_request("http-memories-export.json", "GET", "/memories/export", {"user_id": user}))
        assert exported["statusCode"] == 200
        assert f"Lives in {user}" in exported["body"]
    erased = invoke(with_request("http-memories-delete-all.json", "DELETE", "/memories", {"user_id": in_b}))
    assert erased["statusCode"] == 200
    assert rows_in(cell_urls["b"], in_b) == 0 and rows_in(cell_urls["a"], in_a) == 1
    receipt = body_of(erased)["id"]
    # The receipt is found through the home cell's door although cell b wrote it.
    service = cells_service(cell_urls)
    try:
        assert str(service.erasure(receipt).id) == receipt
        assert service.export(user_id=in_b).lines == []
        # Usage: a moved user's days go with them (the report reads every cell).
        service.recall("where", user_id=in_a)
        service.move_user(in_a, "b")
        service.recall("where", user_id=in_a)
        assert service.usage(in_a).totals.get("recall") == 2
        assert service.usage(in_a).totals.get("write") == 1
    finally:
        service.close()


def test_a_user_moved_between_cells_keeps_everything(cell_urls: dict[str, str]) -> None:
    service = cells_service(cell_urls)
    try:
        user = user_in("a", "mover")
        ids = service.add([NewMemory(content="Prefers pnpm"), NewMemory(content="Deploys with Vite")], user_id=user).ids
        service.update(ids[0], MemoryChanges(category="preference"), user_id=user)
        before = service.export(user_id=user, history=True).lines
        assert service.move_user(user, "b") == 2
        assert service.cell_of(user) == "b"
        assert (rows_in(cell_urls["a"], user), rows_in(cell_urls["b"], user)) == (0, 2)
        after = service.export(user_id=user, history=True).lines
        # Same ids, contents, categories, sources, timestamps, validity and history.
        assert [line.model_dump() for line in after] == [line.model_dump() for line in before]
        assert [e.event for e in service.history(ids[0], user_id=user)] == ["created", "updated"]
        # Writes after the move go to the new cell; another container (a fresh service) agrees.
        service.add([NewMemory(content="Tests with Vitest")], user_id=user)
        with cells_service(cell_urls) as elsewhere:
            assert elsewhere.cell_of(user) == "b"
            assert len(elsewhere.list(user_id=user).memories) == 3
    finally:
        service.close()


def test_a_user_being_moved_has_their_writes_held(cell_urls: dict[str, str]) -> None:
    from rushmem.service.cells import UserMoving
    from rushmem.store.accounts.cells import set_cell

    service = cells_service(cell_urls)
    try:
        user = user_in("a", "held")
        service.add([NewMemory(content="Prefers pnpm")], user_id=user)
        service.admin.db.run(lambda conn: set_cell(conn, user, "a", moving=True))
        with pytest.raises(UserMoving):
            service.add([NewMemory(content="Deploys with Vite")], user_id=user)
        assert [m.content for m in service.list(user_id=user).memories] == ["Prefers pnpm"]  # reads go on
    finally:
        service.close()


def test_the_cli_moves_a_user(cell_urls: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    from rushmem_tools.cli.main import main

    settings = Settings(
        cells=cell_urls, embedding_provider="hash", db_role="agent_memory_app", cell_directory_cache_s=0
    )
    user = user_in("a", "cli")
    with cells_service(cell_urls) as service:
        service.add([NewMemory(content="Prefers pnpm")], user_id=user)
    assert main(["move-user", "--user", user, "--to", "b"], settings=settings) == 0
    assert json.loads(capsys.readouterr().out) == {"user_id": user, "cell": "b", "moved": 1}
    assert (rows_in(cell_urls["a"], user), rows_in(cell_urls["b"], user)) == (0, 1)

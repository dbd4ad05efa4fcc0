"""The memory API's newer doors, end to end: GET/PATCH by id, filters, export -> import, POST
/conversations and the API's own documentation, through the handler (events/ files, as
`rushmem invoke` runs them), `rushmem serve` with the sync and async clients, and the CLI."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rushmem.config import Settings
from rushmem.service import Memory, get_service
from rushmem_client import AsyncMemoryClient, MemoryClient
from rushmem_contract.errors import Conflict, InvalidInput, NotFound
from rushmem_contract.models import ConversationEnded, MemoryFilters
from rushmem_tools.cli import main
from rushmem_tools.local.server import LocalApi, make_server
from tests.conftest import TEMPLATE_DB, _new_database, url_for
from tests.support.recall import TEMPLATE, body_of, event, invoke, serving, with_body, with_request

USER, OTHER = "user-123", "user-456"
NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)


def add(user: str, *memories: dict[str, Any]) -> list[str]:
    result = invoke(with_body("http-memories-add.json", {"user_id": user, "memories": list(memories)}))
    assert result["statusCode"] == 201, result
    return [str(i) for i in body_of(result)["ids"]]


def request(method: str, path: str, query: dict[str, str], body: Any = None) -> dict[str, Any]:
    evt = with_request("http-memory-update.json" if body is not None else "http-memory-get.json", method, path, query)
    if body is not None:
        evt = with_body(evt, body)
    return invoke(evt)


# ---- the handler, driven by events/ files --------------------------------------------------


def test_get_and_patch_by_id_through_the_handler(lambda_env: str) -> None:
    mine, taken = add(USER, {"content": "Prefers npm", "metadata": {"team": "web"}}, {"content": "Prefers pnpm"})
    got = request("GET", f"/memories/{mine}", {"user_id": USER})
    assert got["statusCode"] == 200 and body_of(got)["content"] == "Prefers npm"
    other = request("GET", f"/memories/{mine}", {"user_id": OTHER})
    none = request("GET", f"/memories/{uuid.uuid4()}", {"user_id": USER})
    assert other["statusCode"] == none["statusCode"] == 404
    assert {k: v for k, v in body_of(other).items() if k != "request_id"} == {
        k: v for k, v in body_of(none).items() if k != "request_id"
    }
    patched = request("PATCH", f"/memories/{mine}", {"user_id": USER}, {"content": "Prefers bun", "expires_at": None})
    assert patched["statusCode"] == 200 and body_of(patched)["content"] == "Prefers bun"
    clash = request("PATCH", f"/memories/{mine}", {"user_id": USER}, {"content": "prefers PNPM"})
    assert clash["statusCode"] == 409
    assert body_of(clash)["code"] == "conflict" and body_of(clash)["field"] == "content" and taken in clash["body"]
    for bad, field in (({"content": None}, "content"), ({"colour": "red"}, "colour"), ({"category": "x"}, "category")):
        refused = request("PATCH", f"/memories/{mine}", {"user_id": USER}, bad)
        assert refused["statusCode"] == 400 and body_of(refused)["field"] == field, refused
    assert request("PATCH", f"/memories/{mine}", {"user_id": OTHER}, {"category": "fact"})["statusCode"] == 404
    events = get_service().history(uuid.UUID(mine), user_id=USER).events
    assert [e.event for e in events] == ["created", "updated"] and events[-1].source == "api"


def test_filters_through_the_handler_and_bad_ones_name_the_field(lambda_env: str) -> None:
    web, _billing = add(
        USER,
        {"content": "Prefers pnpm for the web app", "category": "preference", "metadata": {"team": "web"}},
        {"content": "Prefers yarn for billing", "category": "preference", "metadata": {"team": "billing"}},
    )
    recall = {"user_id": USER, "query": "Which package manager?", "filters": {"metadata": {"team": "web"}}}
    result = invoke(with_body("http-recall-filtered.json", recall))
    assert [m["id"] for m in body_of(result)["memories"]] == [web]
    listed = request("GET", "/memories", {"user_id": USER, "metadata": '{"team":"web"}', "categories": "preference"})
    assert [m["id"] for m in body_of(listed)["memories"]] == [web]
    bad_recall = invoke(with_body("http-recall-filtered.json", {**recall, "filters": {"metadata": "team=web"}}))
    assert bad_recall["statusCode"] == 400 and body_of(bad_recall)["field"] == "filters.metadata"
    # The query string flattens the filters; a refusal names the field where the request model has it.
    for query, field in (
        ({"metadata": "[1]"}, "filters.metadata"),
        ({"metadata": "{not json"}, "filters.metadata"),
        ({"created_after": "yesterday"}, "filters.created_after"),
        ({"categories": "preference,colour"}, "filters.categories[1]"),
        ({"created_after": "2026-02-01T00:00:00Z", "created_before": "2026-01-01T00:00:00Z"}, "filters.created_before"),
    ):
        refused = request("GET", "/memories", {"user_id": USER, **query})
        assert refused["statusCode"] == 400 and body_of(refused)["field"] == field, (query, refused)


def test_post_conversations_runs_the_queues_code_path_once(lambda_env: str) -> None:
    first = invoke("http-conversation.json")
    assert first["statusCode"] == 200, first
    outcome = body_of(first)
    assert outcome["status"] == "stored" and outcome["created"] >= 1 and outcome["user_id"] == USER
    again = body_of(invoke("http-conversation.json"))
    assert again["status"] == "duplicate" and again["created"] == 0
    # The same message from the queue is the same receipt: a duplicate too.
    body = json.loads(event("http-conversation.json")["body"])
    assert get_service().ingest_conversation(ConversationEnded.model_validate(body)).status == "duplicate"
    too_many = {"user_id": USER, "messages": [{"role": "user", "content": "hi"}] * 1001}
    assert invoke(with_body("http-conversation.json", too_many))["statusCode"] == 413


def test_export_pages_with_history_through_the_handler(lambda_env: str) -> None:
    ids = add(USER, {"content": "One"}, {"content": "Two"}, {"content": "Three"})
    add(OTHER, {"content": "Not mine"})
    seen: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = {"user_id": USER, "limit": "2", "history": "true", **({"cursor": cursor} if cursor else {})}
        page = body_of(request("GET", "/memories/export", query))
        seen += page["lines"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(line["id"] for line in seen) == sorted(ids)
    assert all(line["user_id"] == USER and line["history"][0]["event"] == "created" for line in seen)


# ---- serve + the clients ------------------------------------------------------------------


@pytest.fixture
def served(lambda_env: str) -> Iterator[str]:
    with serving(unverified_jwt=False) as url:
        yield url


def test_sync_client_against_serve(served: str) -> None:
    client = MemoryClient(served)  # no auth from the URL: a new user's first line works
    assert client.auth == "none"
    stored = client.add(
        [{"content": "Prefers pnpm", "category": "preference", "metadata": {"team": "web"}}, "Lives in Lisbon"],
        user_id="u1",
    )
    assert {m.content for m in client.list(user_id="u1").memories} == {"Prefers pnpm", "Lives in Lisbon"}
    assert len(client.list(user_id="u1", filters={"categories": ["preference"]}).memories) == 1
    recalled = client.recall("pnpm", user_id="u1", filters=MemoryFilters(metadata={"team": "web"}))
    assert [m.id for m in recalled.memories] == [stored.ids[0]]
    memory = client.get(stored.ids[0], user_id="u1")
    assert memory.metadata == {"team": "web"}
    updated = client.update(stored.ids[0], user_id="u1", content="Prefers bun", metadata=None)
    assert (updated.content, updated.metadata) == ("Prefers bun", {})
    with pytest.raises(Conflict) as clash:
        client.update(stored.ids[0], {"content": "lives in lisbon"}, user_id="u1")
    assert clash.value.field == "content"
    with pytest.raises(NotFound):
        client.get(stored.ids[0], user_id="u2")
    with pytest.raises(InvalidInput) as bad:
        client.recall("x", user_id="u1", filters={"metadata": "nope"})
    assert bad.value.field == "filters.metadata"
    outcome = client.ingest_conversation(
        [{"role": "user", "content": "I always deploy on Fridays."}], user_id="u1", conversation_id="c-1"
    )
    assert outcome.status == "stored"
    assert client.ingest_conversation([{"role": "user", "content": "I always deploy on Fridays."}], user_id="u1",
                               conversation_id="c-1").status == "duplicate"  # fmt: skip
    lines = list(client.pages(client.export, user_id="u1", history=True, limit=1))
    # Everything: the current memories and the version the edit kept ("Prefers pnpm", until the edit).
    assert {line.id for line in lines if line.superseded_by is None} == {
        m.id for m in client.pages(client.list, user_id="u1")
    }
    assert [(line.content, line.superseded_by) for line in lines if line.superseded_by is not None] == [
        ("Prefers pnpm", stored.ids[0])
    ]
    assert all(line.history for line in lines)


def test_async_client_has_the_same_methods_and_answers(served: str) -> None:
    sync_methods = {n for n in dir(MemoryClient) if not n.startswith("_")} - {"close"}
    async_methods = {n for n in dir(AsyncMemoryClient) if not n.startswith("_")} - {"aclose"}
    assert sync_methods == async_methods

    async def scenario() -> None:
        async with AsyncMemoryClient(served) as client:
            stored = await client.add(["Prefers pnpm", "Lives in Lisbon"], user_id="u1")
            everything = {m.content async for m in client.pages(client.list, user_id="u1")}
            assert everything == {"Prefers pnpm", "Lives in Lisbon"}
            page = await client.list(user_id="u1", limit=1)
            assert len(page.memories) == 1 and page.next_cursor
            result = await client.recall("pnpm", user_id="u1", filters={"categories": ["fact"]})
            assert result.memories[0].id == stored.ids[0]
            updated = await client.update(stored.ids[0], user_id="u1", category="preference")
            assert updated.category == "preference"
            assert (await client.get(stored.ids[0], user_id="u1")).category == "preference"
            with pytest.raises(NotFound):
                await client.get(uuid.uuid4(), user_id="u1")
            with pytest.raises(NotFound):
                await client.delete(uuid.uuid4(), user_id="u1")
            outcome = await client.ingest_conversation([{"role": "user", "content": "I use Vim."}], user_id="u1")
            assert outcome.status == "stored"
            lines = [line async for line in client.pages(client.export, user_id="u1")]
            assert len(lines) == len([m async for m in client.pages(client.list, user_id="u1")])

    asyncio.run(scenario())


@pytest.mark.usefixtures("_template_database")
def test_export_then_import_into_an_empty_database_recalls_the_same(
    served: str, pg_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = MemoryClient(served)
    client.add(
        [
            {"content": "Prefers TypeScript for the editor", "category": "preference", "is_evergreen": True},
            {"content": "The editor exports PNG and SVG", "metadata": {"area": "export"}},
            {"content": "Deploys on Fridays", "expires_at": "2999-01-01T00:00:00Z"},
        ],
        user_id="u1",
        project_id="svg",
    )
    (lisbon,) = client.add(["Lives in Lisbon"], user_id="u1").ids
    client.update(lisbon, user_id="u1", content="Lives in Porto")
    before = client.recall("editor export in TypeScript", user_id="u1", project_id="svg", now=NOW)
    export = tmp_path / "u1.jsonl"
    export.write_text(
        "".join(line.model_dump_json(exclude_none=True) + "\n" for line in client.pages(client.export, user_id="u1"))
    )
    empty = Settings(
        database_url=url_for(pg_server, _new_database(pg_server, TEMPLATE_DB)),
        embedding_provider="hash",
        db_role="agent_memory_app",
    )
    assert main(["import", str(export)], settings=empty) == 0
    capsys.readouterr()
    restored = Memory(empty)
    try:
        after = restored.recall("u1", user_id="editor export in TypeScript", project_id="svg", now=NOW)
        assert [(m.id, m.score) for m in after.memories] == [(m.id, m.score) for m in before.memories]
        assert after.prompt_block == before.prompt_block
        originals = {m.id: m for m in client.pages(client.list, user_id="u1")}
        copies = {m.id: m for m in restored.list(user_id="u1").memories}
        assert copies == originals  # ids, timestamps, categories, metadata, expiry, evergreen, project
        # Importing the same export again changes nothing; another user's id is never taken over.
        assert main(["import", str(export)], settings=empty) == 0
        assert len(restored.list(user_id="u1").memories) == len(originals)
        line = json.loads(export.read_text().splitlines()[0])
        stolen = tmp_path / "stolen.jsonl"
        stolen.write_text(json.dumps({**line, "user_id": "intruder", "content": "Something else"}) + "\n")
        assert main(["import", str(stolen)], settings=empty) == 2  # nothing it could take; the line is said
        out, err = capsys.readouterr()
        assert "already used" in out and "skipped 1 line it could not take (line 1:" in err
        assert restored.list(user_id="intruder").memories == []
        assert restored.get(uuid.UUID(line["id"]), user_id="u1").content == line["content"]
    finally:
        restored.close()


def test_serve_answers_openapi_and_docs_only_when_turned_on(lambda_env: str) -> None:
    url_off = None
    server = make_server(LocalApi(TEMPLATE), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url_off = f"http://127.0.0.1:{server.server_port}"
        assert httpx.get(f"{url_off}/openapi.json").status_code == 404
        service = get_service()
        service.settings = service.settings.model_copy(update={"api_docs": True})
        document = httpx.get(f"{url_off}/openapi.json").json()
        assert "/memories/{memory_id}" in document["paths"] and "422" not in json.dumps(document["paths"])
        page = httpx.get(f"{url_off}/docs")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        assert "SwaggerUIBundle" in page.text and "/conversations" in page.text
    finally:
        server.shutdown()
        server.server_close()


# ---- the CLI ------------------------------------------------------------------------------


def run(capsys: pytest.CaptureFixture[str], settings: Settings, *argv: str) -> tuple[int, list[dict[str, Any]]]:
    code = main(list(argv), settings=settings)
    out, _err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines() if line.strip()]


def test_cli_get_update_filters_export_and_ingest(
    capsys: pytest.CaptureFixture[str], settings: Settings, tmp_path: Path
) -> None:
    _, (added,) = run(capsys, settings, "add", "--user", "u1", "--category", "preference", "Prefers pnpm")
    memory_id = added["ids"][0]
    run(capsys, settings, "add", "--user", "u1", "Lives in Lisbon")
    code, (memory,) = run(capsys, settings, "get", "--user", "u1", "--id", memory_id)
    assert code == 0 and memory["content"] == "Prefers pnpm"
    assert main(["get", "--user", "u2", "--id", memory_id], settings=settings) == 1  # NotFound
    capsys.readouterr()
    code, (updated,) = run(
        capsys, settings, "update", "--user", "u1", "--id", memory_id, "--content", "Prefers bun",
        "--metadata", '{"team": "web"}', "--is-evergreen", "--expires-at", "null",
    )  # fmt: skip
    assert code == 0 and (updated["content"], updated["metadata"], updated["is_evergreen"]) == (
        "Prefers bun", {"team": "web"}, True
    )  # fmt: skip
    assert main(["update", "--user", "u1", "--id", memory_id, "--content", "lives in lisbon"], settings=settings) == 2
    capsys.readouterr()
    _, listed = run(capsys, settings, "list", "--user", "u1", "--metadata", '{"team":"web"}')
    assert [m["id"] for m in listed] == [memory_id]
    _, (recalled,) = run(capsys, settings, "recall", "--user", "u1", "--categories", "fact", "bun")
    assert [m["content"] for m in recalled["memories"]] == ["Lives in Lisbon"]
    assert main(["list", "--user", "u1", "--metadata", "[1]"], settings=settings) == 2
    capsys.readouterr()
    out = tmp_path / "export.jsonl"
    assert main(["export", "--user", "u1", "--history", "--out", str(out)], settings=settings) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    # The export holds everything: the current memories and the version the edit kept.
    assert {line["content"] for line in lines} == {"Prefers bun", "Lives in Lisbon", "Prefers pnpm"}
    assert {line["content"] for line in lines if line.get("superseded_by") is None} == {
        "Prefers bun",
        "Lives in Lisbon",
    }
    assert [e["event"] for e in next(x for x in lines if x["id"] == memory_id)["history"]] == ["created", "updated"]
    message = tmp_path / "conversation.json"
    chat = [{"role": "user", "content": "I prefer dark mode."}]
    message.write_text(json.dumps({"user_id": "u1", "conversation_id": "c-9", "messages": chat}, indent=2))
    code, (first,) = run(capsys, settings, "ingest", str(message))
    assert code == 0 and first["status"] == "stored"
    _, (second,) = run(capsys, settings, "ingest", str(message))
    assert second["status"] == "duplicate"

"""Facts stay true, on the real embedded PostgreSQL through every door: a changed number, date,
name order or polarity is never folded into the old memory; a correction supersedes (the
caller's ``supersedes``, or the same statement with another value), with valid time; recall,
list and export ``as_of`` say what was true then; every write's answer says per fact what
happened."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client

from rushmem.config import Settings
from rushmem.mcp.tools import Identity, MemoryTools, build_server, fixed_identity
from rushmem.service import Memory, get_service
from rushmem.store.engine.pg import PgSession
from rushmem.store.schema.migrate import _apply, available_migrations
from rushmem_client import AsyncMemoryClient, MemoryClient
from rushmem_contract.errors import InvalidInput
from rushmem_contract.models import ConversationEnded, NewMemory
from rushmem_tools.cli import main
from rushmem_tools.local import runtime as lambda_local
from tests.support.ingest import sqs_event, sqs_record
from tests.support.recall import TEMPLATE, body_of, invoke, serving, with_body, with_request

USER = "truth-user"
MARCH = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
JUNE = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)


def post(user: str, *memories: dict[str, Any]) -> dict[str, Any]:
    result = invoke(with_body("http-memories-add.json", {"user_id": user, "memories": list(memories)}))
    assert result["statusCode"] == 201, result
    return dict(body_of(result))


def listed(user: str, **query: str) -> list[dict[str, Any]]:
    result = invoke(with_request("http-memories-list.json", "GET", "/memories", {"user_id": user, **query}))
    assert result["statusCode"] == 200, result
    return list(body_of(result)["memories"])


# ---- HTTP: the handler driven by events/ ------------------------------------------------------


def test_a_corrected_age_supersedes_and_the_store_says_32_now(lambda_env: str) -> None:
    """The issue's case: before, the second POST answered refreshed 1 with the old id and the store said 31."""
    first = post(USER, {"content": "The user is 31 years old", "created_at": MARCH.isoformat()})
    second = post(USER, {"content": "The user is 32 years old", "created_at": JUNE.isoformat()})
    old, new = first["ids"][0], second["ids"][0]
    assert new != old
    assert second["created"] == 1 and second["refreshed"] == 0 and second["superseded"] == 1
    assert second["facts"] == [
        {
            "id": new,
            "action": "created",
            "content": "The user is 32 years old",
            "refreshed_as": None,
            "superseded": [old],
            "superseded_by": None,
        }
    ]
    assert [m["content"] for m in listed(USER)] == ["The user is 32 years old"]
    recalled = invoke(with_body("http-recall-iam.json", {"user_id": USER, "query": "How old is the user?"}))
    assert [m["content"] for m in body_of(recalled)["memories"]] == ["The user is 32 years old"]
    # What was true in April: 31, the superseded version, valid until 32 became true.
    april = listed(USER, as_of="2026-04-15T00:00:00Z")
    assert [m["content"] for m in april] == ["The user is 31 years old"]
    assert april[0]["valid_from"].startswith("2026-03-01") and april[0]["valid_until"].startswith("2026-06-01")
    assert april[0]["superseded_by"] == new
    then = invoke(
        with_body("http-recall-iam.json", {"user_id": USER, "query": "How old is the user?", "as_of": "2026-04-15"})
    )
    assert [m["content"] for m in body_of(then)["memories"]] == ["The user is 31 years old"]
    history = invoke(with_request("http-memory-history.json", "GET", f"/memories/{old}/history", {"user_id": USER}))
    events = body_of(history)["events"]
    assert [e["event"] for e in events] == ["created", "superseded"]
    assert events[1]["related_id"] == new and events[0]["content"] == "The user is 31 years old"


def test_a_restatement_refreshes_into_the_old_id_and_says_so(lambda_env: str) -> None:
    first = post(USER, {"content": "The user is 31 years old"})
    again = post(USER, {"content": "the user is 31 years old."})
    assert again["ids"] == first["ids"] and again["refreshed"] == 1
    assert again["facts"][0]["action"] == "refreshed"
    assert again["facts"][0]["refreshed_as"] == "exact_duplicate"


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("Alice employs Bob", "Bob employs Alice"),
        ("Alice owes Bob 50 euros", "Bob owes Alice 50 euros"),
    ],
)
def test_swapped_roles_are_two_memories(lambda_env: str, before: str, after: str) -> None:
    post(USER, {"content": before})
    second = post(USER, {"content": after})
    assert second["facts"][0]["action"] == "created" and second["facts"][0]["superseded"] == []
    assert {m["content"] for m in listed(USER)} == {before, after}


def test_the_opposite_polarity_is_never_folded_and_ends_the_statement(lambda_env: str) -> None:
    """A negation is never the same fact; it ends what it negates (issue 32: "I no longer drink coffee")."""
    first = post(USER, {"content": "The user likes coffee"})
    second = post(USER, {"content": "The user does not like coffee"})
    assert second["facts"][0]["action"] == "created" and second["facts"][0]["superseded"] == first["ids"]
    assert {m["content"] for m in listed(USER)} == {"The user does not like coffee"}


def test_supersedes_names_what_a_fact_replaces(lambda_env: str) -> None:
    paris = post(USER, {"content": "The user lives in Paris", "valid_from": "2020-01-01T00:00:00Z"})["ids"][0]
    moved = post(USER, {"content": "The user moved to Berlin", "supersedes": [paris], "valid_from": "2026-02-01"})
    berlin = moved["ids"][0]
    assert moved["facts"][0]["superseded"] == [paris]
    assert [m["content"] for m in listed(USER)] == ["The user moved to Berlin"]
    assert [m["content"] for m in listed(USER, as_of="2025-06-01T00:00:00Z")] == ["The user lives in Paris"]
    everything = {m["id"]: m for m in listed(USER, include_inactive="true")}
    assert everything[paris]["valid_until"].startswith("2026-02-01")
    assert everything[paris]["superseded_by"] == berlin
    # The same request again (a retry) is fine: the old one is already closed by this fact.
    again = post(USER, {"content": "The user moved to Berlin", "supersedes": [paris], "valid_from": "2026-02-01"})
    assert again["ids"] == [berlin]
    export = invoke(with_request("http-memories-export.json", "GET", "/memories/export", {"user_id": USER}))
    assert {line["content"] for line in body_of(export)["lines"]} == {
        "The user lives in Paris",
        "The user moved to Berlin",
    }
    then = invoke(
        with_request(
            "http-memories-export.json", "GET", "/memories/export", {"user_id": USER, "as_of": "2025-06-01T00:00:00Z"}
        )
    )
    assert [line["content"] for line in body_of(then)["lines"]] == ["The user lives in Paris"]


def test_supersedes_an_unknown_or_another_users_id_is_a_400_naming_the_field(lambda_env: str) -> None:
    theirs = post("someone-else", {"content": "The user lives in Oslo"})["ids"][0]
    mine = post(USER, {"content": "The user lives in Paris"})["ids"][0]
    for target in (str(uuid.uuid4()), theirs):
        result = invoke(
            with_body(
                "http-memories-add.json",
                {
                    "user_id": USER,
                    "memories": [{"content": "x"}, {"content": "The user lives in Rome", "supersedes": [mine, target]}],
                },
            )
        )
        assert result["statusCode"] == 400, result
        assert body_of(result)["field"] == "memories[1].supersedes[1]"
    # Nothing of the refused write stayed.
    assert [m["content"] for m in listed(USER)] == ["The user lives in Paris"]
    bad_time = invoke(with_request("http-memories-list.json", "GET", "/memories", {"user_id": USER, "as_of": "soon"}))
    assert bad_time["statusCode"] == 400 and body_of(bad_time)["field"] == "as_of"


def test_a_superseded_version_cannot_be_superseded_again(lambda_env: str) -> None:
    old = post(USER, {"content": "The user is 31 years old"})["ids"][0]
    post(USER, {"content": "The user is 32 years old"})
    result = invoke(
        with_body(
            "http-memories-add.json",
            {"user_id": USER, "memories": [{"content": "The user is 40", "supersedes": [old]}]},
        )
    )
    assert result["statusCode"] == 400 and body_of(result)["field"] == "memories[0].supersedes[0]"


# ---- the service: values, late statements, revival --------------------------------------------


def test_a_value_stated_again_revives_and_supersedes_the_current_one(service: Memory) -> None:
    paris = service.add([NewMemory(content="The user lives in Paris", created_at=MARCH)], user_id=USER).ids[0]
    berlin = service.add([NewMemory(content="The user lives in Berlin", created_at=JUNE)], user_id=USER)
    back = service.add(
        [NewMemory(content="The user lives in Paris", created_at=JUNE + dt.timedelta(days=30))], user_id=USER
    )
    assert back.ids == [paris] and back.facts[0].superseded == [berlin.ids[0]]
    assert [m.content for m in service.list(user_id=USER).memories] == ["The user lives in Paris"]
    july = service.list(user_id=USER, as_of=JUNE + dt.timedelta(days=10)).memories
    assert [m.content for m in july] == ["The user lives in Berlin"]


def test_an_older_value_arriving_late_is_kept_as_history(service: Memory) -> None:
    now = service.add([NewMemory(content="The user is 32 years old", created_at=JUNE)], user_id=USER).ids[0]
    late = service.add([NewMemory(content="The user is 31 years old", valid_from=MARCH)], user_id=USER)
    assert late.facts[0].action == "created" and late.facts[0].superseded_by == now
    assert [m.content for m in service.list(user_id=USER).memories] == ["The user is 32 years old"]
    assert [m.content for m in service.list(user_id=USER, as_of=MARCH + dt.timedelta(days=1)).memories] == [
        "The user is 31 years old"
    ]


def test_import_lines_keep_their_valid_time(service: Memory) -> None:
    service.add([NewMemory(content="The user is 31 years old", created_at=MARCH)], user_id=USER)
    service.add([NewMemory(content="The user is 32 years old", created_at=JUNE)], user_id=USER)
    lines = service.export(user_id=USER).lines
    service.forget_user(USER)
    service.import_(lines)
    back = {m.content: m for m in service.list(user_id=USER, include_inactive=True).memories}
    assert back["The user is 31 years old"].valid_until == JUNE
    assert back["The user is 32 years old"].valid_from == JUNE
    with pytest.raises(ValueError, match="cannot supersede"):
        type(lines[0]).model_validate({**lines[0].model_dump(), "supersedes": [str(uuid.uuid4())]})


def test_migration_0011_dates_existing_memories_by_when_they_were_stated(blank_database_url: str) -> None:
    settings = Settings(database_url=blank_database_url, embedding_provider="hash", auto_migrate=False)
    service = Memory(settings)
    vector = "[" + ",".join(["0.05"] * 384) + "]"
    with PgSession.connect(blank_database_url, autocommit=True) as conn:
        before = [m for m in available_migrations() if m.version < 11]
        _apply(conn, before, dimension=384, fingerprint=service.admin.embedder.fingerprint)
        old, new = uuid.uuid4(), uuid.uuid4()
        for memory_id, text, at, superseded in ((old, "a", MARCH, JUNE), (new, "b", JUNE, None)):
            conn.execute(
                "INSERT INTO user_memories (id, user_id, content, content_hash, embedding, created_at, superseded_at,"
                " superseded_by) VALUES (%s, %s, %s, %s, %s::vector, %s, %s, %s)",
                [memory_id, USER, text, text.encode(), vector, at, superseded, new if superseded else None],
            )
    try:
        assert service.admin.migrate().applied[0] == "0011_valid_time"
        everything = {m.id: m for m in service.list(user_id=USER, include_inactive=True).memories}
        assert (everything[old].valid_from, everything[old].valid_until) == (MARCH, JUNE)
        assert (everything[new].valid_from, everything[new].valid_until) == (JUNE, None)
        assert [m.id for m in service.list(user_id=USER, as_of=MARCH + dt.timedelta(days=1)).memories] == [old]
    finally:
        service.close()


# ---- the queue ---------------------------------------------------------------------------------


def test_the_queue_supersedes_a_changed_number_and_a_named_memory(lambda_env: str) -> None:
    def send(body: dict[str, Any]) -> None:
        response = lambda_local.invoke(TEMPLATE, "IngestFunction", sqs_event(sqs_record(body)))
        assert response == {"batchItemFailures": []}

    send({"user_id": USER, "ended_at": "2026-03-01T00:00:00Z", "memories": [{"content": "The user has 2 cats"}]})
    send({"user_id": USER, "ended_at": "2026-06-01T00:00:00Z", "memories": [{"content": "The user has 3 cats"}]})
    service = get_service()
    assert [m.content for m in service.list(user_id=USER).memories] == ["The user has 3 cats"]
    cats = service.list(user_id=USER).memories[0].id
    outcome = service.ingest_conversation(
        ConversationEnded(
            user_id=USER,
            ended_at=JUNE + dt.timedelta(days=1),
            memories=[NewMemory(content="The user gave the cats away", supersedes=[cats])],
        )
    )
    assert outcome.superseded == 1 and outcome.facts[0].superseded == [cats]
    assert [m.content for m in service.list(user_id=USER).memories] == ["The user gave the cats away"]
    april = service.list(user_id=USER, as_of=dt.datetime(2026, 4, 1, tzinfo=dt.UTC)).memories
    assert [m.content for m in april] == ["The user has 2 cats"]


# ---- MCP -----------------------------------------------------------------------------------------


def test_mcp_remember_supersedes_and_recall_as_of(service: Memory) -> None:
    # supersedes and list's as_of are in the full surface (`--tools all`), not the small one.
    server = build_server(MemoryTools(lambda: service, fixed_identity(Identity(USER))), "all")

    async def scenario() -> tuple[Any, Any, Any]:
        async with Client(server) as client:
            first = await client.call_tool(
                "remember", {"memories": ["The user works at Acme"], "valid_from": "2026-03-01"}
            )
            old = first.structured_content["ids"][0]
            second = await client.call_tool(
                "remember", {"memories": ["The user joined Globex"], "supersedes": [old], "valid_from": "2026-06-01"}
            )
            now = await client.call_tool("recall_memories", {"query": "employer"})
            then = await client.call_tool("list_memories", {"as_of": "2026-04-01T00:00:00Z"})
            return second.structured_content, now.structured_content, then.structured_content

    second, now, then = anyio.run(scenario)
    assert len(second["facts"][0]["superseded"]) == 1
    assert [m["content"] for m in now["memories"]] == ["The user joined Globex"]
    assert [m["content"] for m in then["memories"]] == ["The user works at Acme"]


# ---- CLI -----------------------------------------------------------------------------------------


def test_cli_add_supersedes_and_list_as_of(settings: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["add", "--user", USER, "--valid-from", "2026-03-01", "The user lives in Paris"], settings=settings) == 0
    )
    old = json.loads(capsys.readouterr().out)["ids"][0]
    moved = ["add", "--user", USER, "--supersedes", old, "--valid-from", "2026-06-01", "The user moved"]
    assert main(moved, settings=settings) == 0
    assert json.loads(capsys.readouterr().out)["facts"][0]["superseded"] == [old]
    assert main(["list", "--user", USER, "--json", "--as-of", "2026-04-01"], settings=settings) == 0
    assert [json.loads(line)["content"] for line in capsys.readouterr().out.splitlines()] == ["The user lives in Paris"]
    unknown = ["add", "--user", USER, "--supersedes", str(uuid.uuid4()), "The user moved again"]
    assert main(unknown, settings=settings) != 0
    assert "supersedes" in capsys.readouterr().err


# ---- the client against serve ----------------------------------------------------------------------


@pytest.fixture
def served(lambda_env: str) -> Iterator[str]:
    with serving() as url:
        yield url


def test_client_sync_and_async_supersede_and_read_as_of(served: str) -> None:
    with MemoryClient(served, auth="none", timeout=30) as client:
        old = client.add(["The user is 31 years old"], user_id=USER, valid_from=MARCH).ids[0]
        # The call's supersedes and valid_from apply to mappings and models as well as to strings.
        item = {"content": "The user turned 32", "category": "identity"}
        stored = client.add([item], user_id=USER, supersedes=[old], valid_from=JUNE)
        assert stored.facts[0].superseded == [old]
        assert client.get(stored.ids[0], user_id=USER).valid_from == JUNE
        assert [m.content for m in client.list(user_id=USER).memories] == ["The user turned 32"]
        april = dt.datetime(2026, 4, 1, tzinfo=dt.UTC)
        assert [m.content for m in client.list(user_id=USER, as_of=april).memories] == ["The user is 31 years old"]
        assert [m.content for m in client.recall("age", user_id=USER, as_of=april).memories] == [
            "The user is 31 years old"
        ]
        assert [line.content for line in client.export(user_id=USER, as_of=april).lines] == ["The user is 31 years old"]
        with pytest.raises(InvalidInput) as unknown:
            client.add(["The user is 33"], user_id=USER, supersedes=[uuid.uuid4()])
        assert unknown.value.field == "memories[0].supersedes[0]"

    async def scenario() -> tuple[list[str], list[str]]:
        async with AsyncMemoryClient(served, auth="none", timeout=30) as client:
            current = [m.id for m in (await client.list(user_id=USER)).memories]
            thirty_three = NewMemory(content="The user is 33 years old")
            stored = await client.add([thirty_three], user_id=USER, supersedes=current)
            assert stored.facts[0].superseded == current
            now = [m.content for m in (await client.recall("age", user_id=USER)).memories]
            april = dt.datetime(2026, 4, 1, tzinfo=dt.UTC)
            then = [m.content for m in (await client.list(user_id=USER, as_of=april)).memories]
            return now, then

    now, then = anyio.run(scenario)
    assert now == ["The user is 33 years old"]
    assert then == ["The user is 31 years old"]

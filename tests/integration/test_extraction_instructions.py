"""Extraction instructions per project (issue 35, item 4): stored with their versions, read by the
queue path (IngestFunction) and by POST /conversations, in the LLM extractor's prompt, applied by
the rules extractor (ignore phrases, categories), refused with a 4xx naming the field."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from rushmem.service import Memory
from rushmem_client import AsyncMemoryClient, MemoryClient
from rushmem_contract.errors import InvalidInput
from rushmem_contract.instructions import ExtractionInstructions
from rushmem_contract.models import ConversationEnded, MemoryFilters
from rushmem_tools.local import runtime as lambda_local
from tests.support.environment import use_lambda_environment
from tests.support.ingest import (
    TEMPLATE,
    ChatServer,
    Reply,
    conversation,
    failures,
    memories_answer,
    sqs_event,
    sqs_record,
)
from tests.support.recall import body_of, invoke, serving, with_body, with_request

CHAT = [
    {"role": "user", "content": "I love football. I prefer TypeScript. I am vegan."},
    {"role": "assistant", "content": "Noted."},
]
DIET = ExtractionInstructions(
    ignore=["football"],
    categories=[{"name": "diet", "description": "What the user eats", "keywords": ["vegan"], "kind": "preference"}],
)


def ingest(body: dict[str, Any]) -> None:
    result = lambda_local.invoke(TEMPLATE, "IngestFunction", sqs_event(sqs_record(body)))
    assert failures(result) == []


def contents(service: Memory, user: str, project: str | None = None) -> dict[str, Any]:
    return {m.content: m for m in service.list(user_id=user, project_id=project).memories}


@pytest.fixture
def queue_env(monkeypatch: pytest.MonkeyPatch, database_url: str) -> str:
    use_lambda_environment(monkeypatch, database_url)  # the rules extractor: the default provider
    return database_url


def test_a_projects_instructions_change_what_the_queue_path_keeps_with_the_rules_extractor(
    queue_env: str, service: Memory
) -> None:
    ingest(conversation("u-1", project_id="web", conversation_id="c-1", messages=CHAT))
    before = contents(service, "u-1", "web")
    assert "The user loves football." in before
    assert before["The user is vegan."].category == "fact"

    stored = service.set_instructions(DIET, user_id="u-2", project_id="web", source="test")
    assert stored.version == 1
    ingest(conversation("u-2", project_id="web", conversation_id="c-1", messages=CHAT))
    after = contents(service, "u-2", "web")
    assert "The user loves football." not in after  # ignored
    assert "The user prefers TypeScript." in after
    vegan = after["The user is vegan."]
    assert vegan.category == "preference"  # the project's category's kind
    assert vegan.metadata["categories"] == ["diet"] and vegan.metadata["instructions_version"] == 1
    # The project's categories are a metadata filter away.
    page = service.list(user_id="u-2", project_id="web", filters=MemoryFilters(metadata={"categories": ["diet"]}))
    assert [m.content for m in page.memories] == ["The user is vegan."]
    # Another project of the same user is untouched by them.
    ingest(conversation("u-2", project_id="other", conversation_id="c-2", messages=CHAT))
    assert "The user loves football." in contents(service, "u-2", "other")


def test_instructions_are_versioned_and_erased_with_the_user(service: Memory) -> None:
    assert service.get_instructions(user_id="u", project_id="p").version == 0
    service.set_instructions(DIET, user_id="u", project_id="p")
    second = service.set_instructions(ExtractionInstructions(keep=["deadlines"]), user_id="u", project_id="p")
    assert second.version == 2 and service.get_instructions(user_id="u", project_id="p").instructions.keep == [
        "deadlines"
    ]
    history = service.instructions_history(user_id="u", project_id="p").versions
    assert [v.version for v in history] == [1, 2] and history[0].instructions == DIET
    assert service.instructions_history(user_id="someone-else", project_id="p").versions == []
    service.forget_user("u")
    assert service.instructions_history(user_id="u", project_id="p").versions == []


def test_the_deployments_instructions_apply_where_a_project_has_none(database_url: str) -> None:
    with Memory(
        database_url=database_url,
        embedding_provider="hash",
        db_role="agent_memory_app",
        extraction_instructions={"ignore": ["football"]},
    ) as service:
        assert service.get_instructions(user_id="u", project_id="p").deployment_default
        service.ingest_conversation(
            ConversationEnded.model_validate({"user_id": "u", "project_id": "p", "messages": CHAT})
        )
        assert "The user loves football." not in contents(service, "u", "p")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"instructions": "call the API with sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"}, "instructions"),
        ({"keep": ["ok", "token ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"]}, "keep[1]"),
    ],
)
def test_a_secret_in_instructions_is_refused_naming_the_field(
    service: Memory, body: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        service.set_instructions(ExtractionInstructions.model_validate(body), user_id="u")
    assert refused.value.field == field
    assert service.instructions_history(user_id="u").versions == []


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch, database_url: str) -> Iterator[ChatServer]:
    with ChatServer() as server:
        use_lambda_environment(monkeypatch, database_url)
        for key, value in {
            "LLM_PROVIDER": "openai",
            "LLM_BASE_URL": server.base_url,
            "LLM_API_KEY": "sk-test",
            "LLM_MODEL": "glm-4-flash",
            "RELATED_MEMORIES_SHOWN": "0",
        }.items():
            monkeypatch.setenv(f"AGENT_MEMORY_{key}", value)
        yield server


def test_the_llm_extractor_is_prompted_with_the_projects_instructions_on_the_queue_path(
    llm: ChatServer, service: Memory
) -> None:
    service.set_instructions(
        DIET.model_copy(update={"instructions": "This is a cooking app: keep what the user eats and cooks."}),
        user_id="u-42",
        project_id="kitchen",
    )
    llm.script(
        Reply(body=memories_answer({"content": "The user is vegan.", "category": "diet", "is_evergreen": True})),
        Reply(body=memories_answer({"content": "The user is vegan.", "category": "diet", "is_evergreen": True})),
    )
    ingest(conversation("u-42", project_id="kitchen", conversation_id="c-1", messages=CHAT))
    system = llm.requests[0].json["messages"][0]["content"]
    assert "This is a cooking app: keep what the user eats and cooks." in system
    assert "Never keep anything about: football." in system
    assert '- "diet": What the user eats (e.g. vegan)' in system
    assert "category is one of identity, preference, project, decision, fact, other, diet." in system
    vegan = contents(service, "u-42", "kitchen")["The user is vegan."]
    assert vegan.category == "preference" and vegan.metadata["categories"] == ["diet"]
    # Without instructions (another project), the prompt has no project section.
    ingest(conversation("u-42", project_id="garden", conversation_id="c-2", messages=CHAT))
    assert "This project's own instructions" not in llm.requests[1].json["messages"][0]["content"]


# ---- the HTTP API, through the handler -------------------------------------------------------


def http(method: str, path: str, query: dict[str, str], body: Any = None) -> dict[str, Any]:
    evt = with_request("http-memory-update.json" if body is not None else "http-memory-get.json", method, path, query)
    if body is not None:
        evt = with_body(evt, body)
    return invoke(evt)


def test_the_http_api_sets_reads_and_versions_instructions_and_post_conversations_applies_them(
    lambda_env: str,
) -> None:
    empty = http("GET", "/instructions", {"user_id": "u-9", "project_id": "web"})
    assert empty["statusCode"] == 200 and body_of(empty)["version"] == 0
    body = {"user_id": "u-9", "project_id": "web", **DIET.model_dump(mode="json", exclude_defaults=True)}
    put = http("PUT", "/instructions", {}, body)
    assert put["statusCode"] == 200 and body_of(put)["version"] == 1, put
    got = body_of(http("GET", "/instructions", {"user_id": "u-9", "project_id": "web"}))
    assert got["instructions"]["ignore"] == ["football"] and got["source"] == "api"
    for bad, field, status in (
        ({"ignore": ["x" * 201]}, "ignore[0]", 413),  # over a length limit, as at every door
        ({"colour": "red"}, "colour", 400),
        ({"categories": [{"name": "Not A Name!"}]}, "categories[0].name", 400),
        ({"categories": [{"name": "diet", "kind": "food"}]}, "categories[0]", 400),
        ({"instructions": "use the key AKIAIOSFODNN7EXAMPLE to log in"}, "instructions", 400),
    ):
        refused = http("PUT", "/instructions", {}, {"user_id": "u-9", "project_id": "web", **bad})
        assert refused["statusCode"] == status and body_of(refused)["field"] == field, refused
    versions = body_of(http("GET", "/instructions/history", {"user_id": "u-9", "project_id": "web"}))["versions"]
    assert [v["version"] for v in versions] == [1]
    posted = invoke(
        with_request(
            with_body("http-memory-update.json", {"user_id": "u-9", "project_id": "web", "messages": CHAT}),
            "POST",
            "/conversations",
            {},
        )
    )
    assert posted["statusCode"] == 200, posted
    listed = http("GET", "/memories", {"user_id": "u-9", "project_id": "web"})
    kept = {m["content"] for m in body_of(listed)["memories"]}
    assert kept == {"The user prefers TypeScript.", "The user is vegan."}


# ---- the Python clients, against rushmem serve -------------------------------------------


@pytest.fixture
def served(lambda_env: str) -> Iterator[str]:
    with serving(unverified_jwt=False) as url:
        yield url


def test_both_clients_set_read_and_list_versions_and_get_the_field_of_a_refusal(served: str) -> None:
    client = MemoryClient(served)
    assert client.get_instructions(user_id="u1", project_id="web").version == 0
    stored = client.set_instructions(DIET, user_id="u1", project_id="web")
    assert stored.version == 1 and stored.instructions == DIET
    with pytest.raises(InvalidInput) as refused:
        client.set_instructions(ignore=["ok", "AKIAIOSFODNN7EXAMPLE"], user_id="u1", project_id="web")
    assert refused.value.field == "ignore[1]"

    async def run() -> list[int]:
        async with AsyncMemoryClient(served) as aclient:
            await aclient.set_instructions(keep=["recipes"], user_id="u1", project_id="web")
            assert (await aclient.get_instructions(user_id="u1", project_id="web")).instructions.keep == ["recipes"]
            return [v.version for v in (await aclient.instructions_history(user_id="u1", project_id="web")).versions]

    assert asyncio.run(run()) == [1, 2]

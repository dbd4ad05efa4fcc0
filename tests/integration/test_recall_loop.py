"""The recall-loop guard on the write path (rushmem.ingest.conversation): a conversation
handed over with a [RUSH_MEMORY] block still in it (the agent's prompt, or an echo of it) never
turns the block's recalled facts into new memories, whatever the extractor, through every door
that takes a conversation: the queue (IngestFunction), POST /conversations, MCP remember_conversation."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client

from rushmem.mcp.tools import Identity, MemoryTools, build_server, fixed_identity
from rushmem.recall.block import build_memory_block
from rushmem.service import Memory
from rushmem_tools.local import runtime as lambda_local
from tests.support.ingest import TEMPLATE, ChatServer, Reply, failures, memories_answer, sqs_event, sqs_record
from tests.support.recall import body_of, invoke, with_body

# What recall handed the agent earlier, in the first person as a client may have stored it: the
# rules extractor reads such lines as the user's own statements.
BLOCK = build_memory_block(["I live in Berlin.", "My stack is Haskell."])
ECHOED = {"The user lives in Berlin.", "The user's stack is Haskell."}
NEW = "The user always deploys on Fridays."


def handed_over(user: str) -> dict[str, Any]:
    return {
        "user_id": user,
        "conversation_id": f"c-{user}",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant.\n" + BLOCK},
            {"role": "user", "content": BLOCK + "\nI always deploy on Fridays."},
            {"role": "assistant", "content": "Noted."},
        ],
    }


def stored(service: Memory, user: str) -> set[str]:
    return {m.content for m in service.list(user_id=user).memories}


def test_the_queue_stores_the_new_fact_and_not_the_recalled_ones(lambda_env: str, service: Memory) -> None:
    result = lambda_local.invoke(TEMPLATE, "IngestFunction", sqs_event(sqs_record(handed_over("u1"))))
    assert failures(result) == []
    assert stored(service, "u1") == {NEW}


def test_post_conversations_and_mcp_remember_conversation_guard_too(lambda_env: str, service: Memory) -> None:
    answer = invoke(with_body("http-conversation.json", handed_over("u2")))
    assert body_of(answer)["created"] == 1
    assert stored(service, "u2") == {NEW}

    server = build_server(MemoryTools(lambda: service, fixed_identity(Identity("u3"))), "all")

    async def scenario() -> None:
        async with Client(server) as client:
            result = await client.call_tool("remember_conversation", {"messages": handed_over("u3")["messages"]})
            assert result.structured_content is not None and result.structured_content["created"] == 1

    asyncio.run(scenario())
    assert stored(service, "u3") == {NEW}


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch, database_url: str) -> Iterator[ChatServer]:
    with ChatServer() as server:
        for key, value in {
            "DATABASE_URL": database_url,
            "EMBEDDING_PROVIDER": "hash",
            "LLM_PROVIDER": "openai",
            "LLM_BASE_URL": server.base_url,
            "LLM_API_KEY": "sk-test",
            "MAX_RETRIES": "0",
        }.items():
            monkeypatch.setenv(f"AGENT_MEMORY_{key}", value)
        yield server


def test_an_llm_extractor_never_reads_the_block(llm: ChatServer, service: Memory) -> None:
    llm.script(Reply(body=memories_answer({"content": NEW, "category": "fact"})))
    result = lambda_local.invoke(TEMPLATE, "IngestFunction", sqs_event(sqs_record(handed_over("u4"))))
    assert failures(result) == []
    ((request),) = llm.requests
    prompt = str(request.json)
    assert "I always deploy on Fridays." in prompt
    assert "Berlin" not in prompt and "Haskell" not in prompt

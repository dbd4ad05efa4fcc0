"""The MCP server, driven by the official SDK's own client: over stdio (`rushmem mcp` as a
subprocess, as Claude Desktop or Cursor starts it) and over Streamable HTTP against `rushmem
serve` (RecallFunction's /mcp behind a real HTTP server), in both protocol eras the SDK speaks."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent

from rushmem.config import Settings
from rushmem.mcp.tools import Identity, MemoryTools, build_server, fixed_identity
from rushmem.recall.block import BLOCK_START
from rushmem.service import Memory
from rushmem_client.mcp_auth import mcp_http_client
from tests.support.recall import ROOT, serving, token

TOOLS = {
    "recall_memories",
    "remember",
    "remember_conversation",
    "list_memories",
    "get_memory",
    "update_memory",
    "forget_memory",
    "memory_history",
    "get_instructions",
    "set_instructions",
    "pending_memories",
}
# The small surface a host gets unless told otherwise (RUSHMEM_MCP_TOOLS, `--tools`).
CORE = {"recall_memories", "remember", "list_memories", "update_memory", "forget_memory"}
LANGUAGE = "which language for systems programming"


def structured(result: CallToolResult) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    assert result.is_error, result.structured_content
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


# ---- the server: rushmem serve, RecallFunction's /mcp ----------------------------------


@pytest.fixture
def served(lambda_env: str) -> Iterator[str]:
    with serving() as url:
        yield url


@asynccontextmanager
async def http_client(url: str, mode: str = "auto", **headers: str) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={k.replace("_", "-"): v for k, v in headers.items()}, timeout=60)
    async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http), mode=mode) as client:
        yield client


async def connect_error(url: str, mode: str = "auto", **headers: str) -> MCPError:
    """The error connecting raises. The SDK's client raises it inside a task group, so it
    arrives wrapped in a (nested) ExceptionGroup."""
    caught: BaseException | None = None
    try:
        async with http_client(url, mode, **headers) as client:
            await client.list_tools()
    except BaseException as exc:
        caught = exc
    while isinstance(caught, BaseExceptionGroup) and len(caught.exceptions) == 1:
        caught = caught.exceptions[0]
    assert isinstance(caught, MCPError), caught
    return caught


# ---- one scenario, every tool, whatever the transport ---------------------------------------


async def exercise_every_tool(client: Client, user: str) -> Any:
    """Every tool once, with real round trips; returns the last recall (for comparison with REST)."""
    listed = await client.list_tools()
    assert {t.name for t in listed.tools} == TOOLS
    by_name = {t.name: t for t in listed.tools}
    assert "BEFORE answering" in (by_name["recall_memories"].description or "")
    assert "Do NOT store small talk" in (by_name["remember"].description or "")
    assert by_name["recall_memories"].annotations and by_name["recall_memories"].annotations.read_only_hint
    assert by_name["forget_memory"].annotations and by_name["forget_memory"].annotations.destructive_hint
    # The user is the transport's business, never an argument the model could change.
    assert all("user_id" not in (t.input_schema.get("properties") or {}) for t in listed.tools)

    stored = structured(
        await client.call_tool(
            "remember",
            {"memories": ["Prefers Rust for systems programming", "Uses pnpm, never npm"], "category": "preference"},
        )
    )
    assert stored["created"] == 2
    rust_id, pnpm_id = stored["ids"]

    recalled = structured(await client.call_tool("recall_memories", {"query": LANGUAGE}))
    assert recalled["memories"][0]["content"] == "Prefers Rust for systems programming"
    assert recalled["prompt_block"].startswith(BLOCK_START)
    assert "Prefers Rust for systems programming" in recalled["prompt_block"]

    # Filters narrow recall and list; a bad one is an error naming the field.
    decisions = structured(
        await client.call_tool("recall_memories", {"query": LANGUAGE, "filters": {"categories": ["decision"]}})
    )
    assert decisions["memories"] == [] and decisions["prompt_block"] == ""
    prefs = structured(
        await client.call_tool("recall_memories", {"query": LANGUAGE, "filters": {"categories": ["preference"]}})
    )
    assert prefs["memories"][0]["id"] == rust_id
    old = structured(await client.call_tool("list_memories", {"filters": {"created_before": "2000-01-01T00:00:00Z"}}))
    assert old["memories"] == []
    window = {"created_after": "2030-01-01T00:00:00Z", "created_before": "2020-01-01T00:00:00Z"}
    assert "filters.created_before" in error_text(await client.call_tool("list_memories", {"filters": window}))

    first = structured(await client.call_tool("list_memories", {"limit": 1}))
    assert len(first["memories"]) == 1 and first["next_cursor"]
    second = structured(await client.call_tool("list_memories", {"limit": 1, "cursor": first["next_cursor"]}))
    assert {first["memories"][0]["id"], second["memories"][0]["id"]} == {rust_id, pnpm_id}
    assert second["next_cursor"] is None

    got = structured(await client.call_tool("get_memory", {"memory_id": pnpm_id}))
    assert got["content"] == "Uses pnpm, never npm" and got["category"] == "preference" and got["user_id"] == user
    assert "no memory" in error_text(await client.call_tool("get_memory", {"memory_id": str(uuid.uuid4())}))

    # A correction: new content (re-embedded, so recall finds it by its new words), kept id.
    changed = structured(
        await client.call_tool(
            "update_memory",
            {"memory_id": pnpm_id, "content": "Uses bun as the package manager", "expires_at": "2099-01-01T00:00:00Z"},
        )
    )
    assert changed["id"] == pnpm_id and changed["content"] == "Uses bun as the package manager"
    assert changed["expires_at"].startswith("2099-01-01")
    found = structured(await client.call_tool("recall_memories", {"query": "bun package manager", "limit": 1}))
    assert [m["id"] for m in found["memories"]] == [pnpm_id]
    cleared = structured(await client.call_tool("update_memory", {"memory_id": pnpm_id, "expires_at": None}))
    assert cleared["expires_at"] is None
    assert structured(await client.call_tool("get_memory", {"memory_id": pnpm_id}))["expires_at"] is None
    # No change given: the memory as it is, as PATCH /memories/{id} answers an empty body.
    unchanged = structured(await client.call_tool("update_memory", {"memory_id": pnpm_id}))
    assert unchanged["content"] == "Uses bun as the package manager" and unchanged["expires_at"] is None
    assert "no memory" in error_text(
        await client.call_tool("update_memory", {"memory_id": str(uuid.uuid4()), "category": "fact"})
    )

    history = structured(await client.call_tool("memory_history", {"memory_id": pnpm_id}))
    assert [(e["event"], e["source"]) for e in history["events"]][:2] == [("created", "mcp"), ("updated", "mcp")]
    assert "no history" in error_text(await client.call_tool("memory_history", {"memory_id": str(uuid.uuid4())}))

    # A conversation through the write path (the offline rules extractor), idempotent.
    chat = [
        {"role": "user", "content": "My stack is TypeScript, with React for the UI."},
        {"role": "assistant", "content": "Great choice."},
    ]
    outcome = structured(await client.call_tool("remember_conversation", {"messages": chat, "conversation_id": "c-1"}))
    assert outcome["status"] == "stored" and outcome["created"] == 1
    again = structured(await client.call_tool("remember_conversation", {"messages": chat, "conversation_id": "c-1"}))
    assert again["status"] == "duplicate"
    stack = structured(await client.call_tool("get_memory", {"memory_id": outcome["ids"][0]}))
    assert "TypeScript" in stack["content"] and stack["source"] == "c-1"

    forgotten = structured(await client.call_tool("forget_memory", {"memory_id": rust_id}))
    assert forgotten == {"done": True}
    assert "no memory" in error_text(await client.call_tool("forget_memory", {"memory_id": rust_id}))
    after = structured(await client.call_tool("recall_memories", {"query": LANGUAGE}))
    assert rust_id not in [m["id"] for m in after["memories"]]

    # The project's extraction instructions: set (a version), read back, a secret refused naming the field.
    assert structured(await client.call_tool("get_instructions", {}))["version"] == 0
    put = structured(await client.call_tool("set_instructions", {"ignore": ["football"], "keep": ["recipes"]}))
    assert put["version"] == 1 and put["source"] == "mcp"
    got = structured(await client.call_tool("get_instructions", {}))
    assert got["instructions"]["ignore"] == ["football"] and got["version"] == 1
    assert "keep[0]" in error_text(
        await client.call_tool("set_instructions", {"keep": ["ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"]})
    )

    # Bad arguments come back as a tool error the model can read, naming the field.
    assert "limit" in error_text(await client.call_tool("recall_memories", {"query": "x", "limit": 500}))
    assert "memories[0]" in error_text(await client.call_tool("remember", {"memories": ["   "]}))
    return after


# ---- over HTTP: rushmem serve ----------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_every_tool_over_http_and_recall_is_the_same_block_as_post_recall(served: str, mode: str) -> None:
    async def scenario() -> Any:
        async with http_client(served, mode, x_memory_user="u-http") as client:
            after = await exercise_every_tool(client, "u-http")
            if mode == "auto":  # the SDK's client probes and picks the stateless 2026-07-28 protocol
                assert client.session.discover_result is not None
            else:
                assert client.session.initialize_result is not None
            return after

    after = anyio.run(scenario)
    rest = httpx.post(f"{served}/recall", json={"user_id": "u-http", "query": LANGUAGE}).json()
    assert after["memories"], "the comparison needs something recalled"
    assert rest["prompt_block"] == after["prompt_block"]
    assert [m["id"] for m in rest["memories"]] == [m["id"] for m in after["memories"]]


def test_the_python_helper_builds_the_client_the_endpoint_expects(served: str) -> None:
    async def scenario() -> list[str]:
        http = mcp_http_client(served, user_id="u-helper", project_id="p9", auth="none")
        async with http, Client(streamable_http_client(f"{served}/mcp", http_client=http)) as client:
            await client.call_tool("remember", {"memories": ["Chose SQLite for the prototype"], "category": "decision"})
            listed = structured(await client.call_tool("list_memories", {}))["memories"]
            return [m["project_id"] for m in listed]

    assert anyio.run(scenario) == ["p9"]


def test_iam_callers_name_the_user_in_a_header_and_see_only_that_users_memories(served: str) -> None:
    async def scenario() -> None:
        async with http_client(served, x_memory_user="alice", x_memory_project="svg-editor") as alice:
            await alice.call_tool("remember", {"memories": ["Chose Vite for the SVG editor"], "category": "decision"})
            await alice.call_tool("remember", {"memories": ["Is called Alice"], "category": "identity"})
            mine = structured(await alice.call_tool("list_memories", {}))["memories"]
            # The session's project goes to project facts; identity holds in every project.
            assert {(m["content"], m["project_id"]) for m in mine} == {
                ("Chose Vite for the SVG editor", "svg-editor"),
                ("Is called Alice", None),
            }
        async with http_client(served, x_memory_user="bob") as bob:
            assert structured(await bob.call_tool("list_memories", {}))["memories"] == []
            found = structured(await bob.call_tool("recall_memories", {"query": "SVG editor build tool"}))
            assert found["memories"] == []
            alices = mine[0]["id"]
            assert "no memory" in error_text(await bob.call_tool("get_memory", {"memory_id": alices}))
            assert "no memory" in error_text(
                await bob.call_tool("update_memory", {"memory_id": alices, "content": "x"})
            )
            assert "no memory" in error_text(await bob.call_tool("forget_memory", {"memory_id": alices}))
            assert "no history" in error_text(await bob.call_tool("memory_history", {"memory_id": alices}))
        async with http_client(served, x_memory_user="alice") as alice:
            assert len(structured(await alice.call_tool("list_memories", {}))["memories"]) == 2

    anyio.run(scenario)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_without_a_user_the_client_gets_a_message_naming_the_header(served: str, mode: str) -> None:
    error = anyio.run(connect_error, served, mode)
    assert "x-memory-user header is required" in error.error.message


def test_jwt_callers_are_their_sub_and_cannot_name_another_user(served: str) -> None:
    async def scenario() -> None:
        async with http_client(served, authorization=f"Bearer {token('carol')}") as carol:
            await carol.call_tool("remember", {"memories": ["Works night shifts"]})
        async with http_client(served, x_memory_user="carol") as backend:
            listed = structured(await backend.call_tool("list_memories", {}))["memories"]
            assert [m["content"] for m in listed] == ["Works night shifts"]
        error = await connect_error(served, authorization=f"Bearer {token('carol')}", x_memory_user="dave")
        assert "names another user" in error.error.message

    anyio.run(scenario)


def test_get_and_delete_are_405_and_a_non_json_body_is_a_json_rpc_parse_error(served: str) -> None:
    for method in ("GET", "DELETE"):
        answer = httpx.request(method, f"{served}/mcp", headers={"x-memory-user": "u1"})
        assert answer.status_code == 405 and answer.headers["allow"] == "POST"
        assert "stateless" in answer.json()["error"]["message"]
    broken = httpx.post(
        f"{served}/mcp",
        content=b"{not json",
        headers={
            "x-memory-user": "u1",
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
        },
    )
    assert broken.status_code == 400 and broken.json()["error"]["code"] == -32700


# ---- over stdio: `rushmem mcp`, a subprocess as an MCP host starts it ------------------


def stdio_server(*args: str) -> StdioServerParameters:
    # The installed console script is `rushmem`; `python -m rushmem_tools` is the same main.
    return StdioServerParameters(
        command=sys.executable, args=["-m", "rushmem_tools", "mcp", *args], env=dict(os.environ), cwd=ROOT
    )


def test_every_tool_over_stdio_and_recall_is_the_services_block(lambda_env: str) -> None:
    async def scenario() -> Any:
        async with Client(stdio_server("--user", "u-stdio"), mode="legacy") as client:
            return await exercise_every_tool(client, "u-stdio")

    after = anyio.run(scenario)
    service = Memory(Settings(database_url=lambda_env, embedding_provider="hash", db_role="agent_memory_app"))
    try:
        direct = service.recall(LANGUAGE, user_id="u-stdio")
        assert service.list(user_id="u-stdio").memories, "the subprocess wrote to this database"
    finally:
        service.close()
    assert after["memories"] and direct.prompt_block == after["prompt_block"]


def test_stdio_speaks_the_modern_protocol_and_uses_the_project_given(lambda_env: str) -> None:
    """The SDK's default client mode probes server/discover (2026-07-28) first."""

    async def scenario() -> Any:
        async with Client(stdio_server("--user", "u-modern", "--project", "p1", "--no-warm")) as client:
            assert client.session.discover_result is not None
            stored = structured(await client.call_tool("remember", {"memories": ["Deploys on Fridays"]}))
            return structured(await client.call_tool("get_memory", {"memory_id": stored["ids"][0]}))

    assert anyio.run(scenario)["project_id"] == "p1"  # the session's project, from --project


async def remember_correct_recall_forget(client: Client) -> None:
    """The small surface's loop, its results structured though it lists no output schemas."""
    listed = await client.list_tools()
    assert {t.name for t in listed.tools} == CORE
    assert all(t.output_schema is None for t in listed.tools)
    stored = structured(await client.call_tool("remember", {"memories": ["Lives in Paris"], "category": "identity"}))
    memory_id = stored["ids"][0]
    changed = structured(await client.call_tool("update_memory", {"memory_id": memory_id, "content": "Lives in Lyon"}))
    assert changed["content"] == "Lives in Lyon"
    recalled = structured(await client.call_tool("recall_memories", {"query": "where does the user live"}))
    assert [m["id"] for m in recalled["memories"]] == [memory_id]
    assert structured(await client.call_tool("forget_memory", {"memory_id": memory_id})) == {"done": True}
    assert structured(await client.call_tool("list_memories", {}))["memories"] == []


def test_the_default_surface_is_the_five_core_tools_over_http_and_stdio(
    lambda_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RUSHMEM_MCP_TOOLS")

    async def over_http(url: str) -> None:
        async with http_client(url, x_memory_user="u-core-http") as client:
            await remember_correct_recall_forget(client)

    with serving() as url:
        anyio.run(over_http, url)

    async def over_stdio() -> None:
        async with Client(stdio_server("--user", "u-core-stdio", "--no-warm")) as client:
            await remember_correct_recall_forget(client)

    anyio.run(over_stdio)
    # --tools overrides the setting.
    monkeypatch.setenv("RUSHMEM_MCP_TOOLS", "all")

    async def small() -> set[str]:
        async with Client(stdio_server("--user", "u-core-stdio", "--no-warm", "--tools", "core")) as client:
            return {t.name for t in (await client.list_tools()).tools}

    assert anyio.run(small) == CORE


def test_mcp_command_refuses_a_bad_user_before_serving(lambda_env: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rushmem_tools", "mcp", "--user", "bad\x07user"],
        input="",
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 2 and "--user" in done.stderr and done.stdout == ""


# ---- errors the model reads ----------------------------------------------------------------


def test_a_database_outage_is_a_tool_error_without_the_address(pg_server: str) -> None:
    unreachable = "postgresql://agent:secret@127.0.0.1:9/nowhere"
    service = Memory(Settings(database_url=unreachable, embedding_provider="hash", connect_timeout_s=1))
    server = build_server(MemoryTools(lambda: service, fixed_identity(Identity("u1"))))

    async def scenario() -> str:
        async with Client(server) as client:
            return error_text(await client.call_tool("recall_memories", {"query": "anything"}))

    try:
        message = anyio.run(scenario)
    finally:
        service.close()
    assert "database is unavailable" in message
    assert "127.0.0.1" not in message and "secret" not in message

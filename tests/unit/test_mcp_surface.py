"""The MCP surface a model pays for on every turn: what the server lists in ``tools/list`` by
default (the small surface), counted from the real server's answer through the SDK's own client,
and what ``all`` adds. No database: listing the tools builds no service."""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from rushmem.mcp.tools import Identity, MemoryTools, Surface, build_server, fixed_identity
from rushmem_contract import operations as ops

# The budget for the default surface: tools, and characters of what tools/list sends for
# them (each tool's JSON as the wire carries it: name, title, description, schemas, annotations).
MAX_TOOLS = 5
MAX_CHARS = 6_000
# What an agent must be able to do with the default surface, by operation.
COVERED = {"recall": "recall", "remember": "add", "list": "list", "correct": "update", "forget": "delete"}


def server(surface: Surface | None = None) -> MCPServer[Any]:
    tools = MemoryTools(lambda: None, fixed_identity(Identity("u1")))  # type: ignore[arg-type,return-value]
    return build_server(tools) if surface is None else build_server(tools, surface)


def listed(surface: Surface | None = None) -> list[dict[str, Any]]:
    """The tools as ``tools/list`` sends them (JSON, by the wire's names), through the SDK's client
    in memory."""

    async def run() -> list[dict[str, Any]]:
        async with Client(server(surface)) as client:
            answer = await client.list_tools()
            tools: list[dict[str, Any]] = json.loads(answer.model_dump_json(by_alias=True, exclude_none=True))["tools"]
            return tools

    return anyio.run(run)


def chars(tool: dict[str, Any]) -> int:
    """A tool's cost to a model: its listed JSON, compact."""
    return len(json.dumps(tool, separators=(",", ":"), ensure_ascii=False))


def test_the_default_surface_is_at_most_five_tools_and_six_thousand_characters() -> None:
    tools = listed()
    total = sum(chars(t) for t in tools)
    assert len(tools) <= MAX_TOOLS, [t["name"] for t in tools]
    # Over the budget: hide the new field from the tool (its row's `hidden`), or shorten a description.
    assert total <= MAX_CHARS, {t["name"]: chars(t) for t in tools}


def test_the_default_surface_lists_no_output_schemas() -> None:
    assert not [t["name"] for t in listed() if "outputSchema" in t]
    assert all("outputSchema" in t for t in listed("all"))


def test_the_default_surface_remembers_recalls_lists_corrects_and_forgets() -> None:
    names = {t["name"] for t in listed()}
    by_tool = {op.mcp.name: op.name for op in ops.OPERATIONS if op.mcp is not None}
    assert {by_tool[name] for name in names} == set(COVERED.values())


def test_all_offers_every_tool_of_the_table() -> None:
    names = {t["name"] for t in listed("all")}
    assert names == {op.mcp.name for op in ops.OPERATIONS if op.mcp is not None}
    assert len(names) > MAX_TOOLS


@pytest.mark.parametrize("surface", ["core", "all"])
def test_every_input_schema_is_a_valid_schema_without_definitions_or_generated_titles(surface: Surface) -> None:
    for tool in listed(surface):
        schema = tool["inputSchema"]
        jsonschema.Draft202012Validator.check_schema(schema)
        text = json.dumps(schema)
        assert "$defs" not in schema and "$ref" not in text, tool["name"]
        assert '"title"' not in text, tool["name"]
        assert "user_id" not in schema.get("properties", {}), tool["name"]


def test_what_a_model_fills_in_by_the_schema_is_accepted_as_the_tool_call() -> None:
    """The compact schema admits what the request model accepts: a fact as a string or as an
    object with its category, a correction's null expiry."""
    tools = {t["name"]: t["inputSchema"] for t in listed()}
    remember = {"memories": ["Prefers tabs", {"content": "Is called Ana", "category": "identity"}], "category": "fact"}
    jsonschema.validate(remember, tools["remember"])
    ops.ADD.build(**remember, user_id="u1")
    correction = {"memory_id": "6f1c5c7e-3b7a-4f0a-9a7a-1234567890ab", "expires_at": None}
    jsonschema.validate(correction, tools["update_memory"])
    ops.UPDATE.build(**correction, user_id="u1")
    recall = {"query": "editor in March 2026", "filters": {"categories": ["decision"]}}
    jsonschema.validate(recall, tools["recall_memories"])
    ops.RECALL.build(**recall, user_id="u1")
    with pytest.raises(jsonschema.ValidationError):  # only the expiry of an update may be null
        jsonschema.validate({"memory_id": correction["memory_id"], "content": None}, tools["update_memory"])


def test_the_small_surfaces_instructions_name_only_its_tools() -> None:
    names = {t["name"] for t in listed()}
    every = {op.mcp.name for op in ops.OPERATIONS if op.mcp is not None}
    instructions = server().instructions or ""
    assert "recall_memories" in instructions
    assert not {name for name in every - names if re.search(rf"\b{name}\b", instructions)}
    assert "remember_conversation" in (server("all").instructions or "")


def test_the_small_surface_takes_the_rows_fields_but_the_hidden_and_lean_ones() -> None:
    rows = {op.mcp.name: op for op in ops.OPERATIONS if op.mcp is not None}
    for tool in listed():
        op = rows[tool["name"]]
        assert op.mcp is not None
        left_out = {"user_id", "consistency", *op.mcp.left_out(True)}
        assert set(tool["inputSchema"]["properties"]) == set(op.request.model_fields) - left_out, tool["name"]
    # A nested field the row leaves out is not in the nested object either.
    recall = next(t for t in listed() if t["name"] == "recall_memories")["inputSchema"]
    assert set(recall["properties"]["filters"]["properties"]) == {"categories"}


def test_every_lean_field_is_one_the_full_surface_offers() -> None:
    """A row's lean names are fields (a typo, or a field renamed, would leave the small surface
    carrying it)."""
    full = {t["name"]: t["inputSchema"]["properties"] for t in listed("all")}
    for op in ops.OPERATIONS:
        if op.mcp is None:
            continue
        for name in op.mcp.lean:
            outer, _, inner = name.partition(".")
            assert outer in full[op.mcp.name], (op.mcp.name, name)
            assert not inner or f'"{inner}":' in json.dumps(full[op.mcp.name][outer]), (op.mcp.name, name)

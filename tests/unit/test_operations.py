"""The table of operations is the one definition every door derives from: each row has its verb, its
HTTP route, its Python method, its MCP tool and CLI command where the row names them, and each of
these takes exactly the row's request fields. A row a door forgets fails here (the cross-door
conformance test, tests/integration/test_conformance.py, then runs every row through every door)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from rushmem.mcp.tools import Identity, MemoryTools, arguments_of, build_server, fixed_identity, offered
from rushmem.service.dispatch import VERBS
from rushmem_contract import operations as ops
from rushmem_contract.errors import InputTooLarge, InvalidInput
from rushmem_contract.methods import Method, Operations
from rushmem_contract.operations import OPERATIONS, Operation
from rushmem_tools.cli.main import build_parser

ROWS = [pytest.param(op, id=op.name) for op in OPERATIONS]


def test_every_row_has_a_verb_and_every_verb_a_row() -> None:
    assert set(VERBS) == {op.name for op in OPERATIONS}


def test_every_row_is_a_python_method_of_every_python_door() -> None:
    methods = {value.op.name for value in vars(Operations).values() if isinstance(value, Method)}
    assert methods == {op.name for op in OPERATIONS}
    # mem0's words are the same methods.
    assert Operations.search is Operations.recall and Operations.get_all is Operations.list


def app() -> Any:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "functions" / "recall"))
    try:
        import app as handler  # type: ignore[import-not-found]
    finally:
        sys.path.pop(0)
    return handler.app


@pytest.mark.parametrize("op", ROWS)
def test_every_row_is_an_http_route_with_the_rows_parameters(op: Operation[Any, Any]) -> None:
    document = json.loads(app().get_openapi_json_schema())
    route = document["paths"][op.path][op.method.lower()]
    assert route["operationId"] == op.name
    params = {p["name"] for p in route.get("parameters", [])}
    expected = set(op.path_fields)
    for name in op.query_fields():
        field = op.request.model_fields[name]
        nested = ops.nested_model(field)
        expected |= set(nested.model_fields) if nested is not None else {field.alias or name}
    assert params == expected
    assert ("requestBody" in route) == op.has_body


@pytest.mark.parametrize("op", [pytest.param(op, id=op.name) for op in offered("all")])
def test_every_tool_takes_the_rows_fields_but_the_hidden_ones(op: Operation[Any, Any]) -> None:
    assert op.mcp is not None
    server = build_server(MemoryTools(lambda: None, fixed_identity(Identity("u1"))), "all")  # type: ignore[arg-type,return-value]

    async def listed() -> dict[str, Any]:
        return {tool.name: tool.input_schema for tool in await server.list_tools()}

    schema = anyio.run(listed)[op.mcp.name]
    assert set(schema["properties"]) == set(op.request.model_fields) - {"user_id", "consistency", *op.mcp.hidden}
    assert {p.name for p in arguments_of(op)} == set(schema["properties"])


def test_the_small_surface_is_the_core_rows() -> None:
    assert {op.name for op in offered("core")} == {op.name for op in OPERATIONS if op.mcp and op.mcp.core}


@pytest.mark.parametrize("op", [pytest.param(op, id=op.name) for op in OPERATIONS if op.cli is not None])
def test_every_command_takes_the_rows_fields(op: Operation[Any, Any]) -> None:
    assert op.cli is not None
    parser = build_parser(None)
    sub = next(a for a in parser._actions if a.dest == "command")
    command = sub.choices[op.cli.name]  # type: ignore[index]
    if op is ops.INGEST:  # a file of messages, as the queue delivers them
        assert {a.dest for a in command._actions} >= {"file"}
        return
    dests = {a.dest for a in command._actions}
    for name, field in op.request.model_fields.items():
        if name == "consistency":
            continue
        nested = ops.nested_model(field)
        assert (set(nested.model_fields) if nested is not None and name != op.cli.positional else {name}) <= dests


def test_a_refusal_is_one_shape_at_every_door() -> None:
    """What a door builds its request with refuses the same way: a size over a ceiling is
    InputTooLarge naming the field, anything else InvalidInput naming it."""
    with pytest.raises(InputTooLarge) as large:
        ops.ADD.build(["x" * 20_001], user_id="u1")
    assert (large.value.field, str(large.value)) == (
        "memories[0].content",
        "memories[0].content is 20001 characters; the limit is 20000",
    )
    with pytest.raises(InvalidInput) as bad:
        ops.LIST.build(user_id="u1", limit=0)
    assert bad.value.field == "limit" and not isinstance(bad.value, InputTooLarge)


def test_one_string_is_one_memory() -> None:
    request = ops.ADD.build("The user lives in Berlin", user_id="u1")
    assert [m.content for m in request.facts()] == ["The user lives in Berlin"]
    assert ops.ADD.http(request).body == {"user_id": "u1", "memories": [{"content": "The user lives in Berlin"}]}


def test_a_request_travels_and_reads_back_the_same() -> None:
    """What the clients send (Operation.http) is what the routes read (Operation.from_http)."""
    listed = ops.LIST.build(
        user_id="u1", limit=5, include_inactive=True, filters={"categories": ["fact"], "metadata": {"team": "web"}}
    )
    sent = ops.LIST.http(listed)
    assert sent.query["categories"] == "fact" and json.loads(sent.query["metadata"]) == {"team": "web"}
    assert ops.LIST.from_http({}, sent.query, None) == listed
    changed = ops.UPDATE.build("6f1c5c7e-3b7a-4f0a-9a7a-1234567890ab", "New text", user_id="u1")
    sent = ops.UPDATE.http(changed)
    assert (sent.query, sent.body) == ({"user_id": "u1"}, {"content": "New text"})
    path = {"memory_id": "6f1c5c7e-3b7a-4f0a-9a7a-1234567890ab"}
    assert ops.UPDATE.from_http(path, sent.query, sent.body) == changed


def test_methods_take_the_request_model_or_its_fields() -> None:
    by_fields = ops.RECALL.build("which editor", user_id="u1", limit=3)
    assert ops.RECALL.build(by_fields) is by_fields
    assert ops.RECALL.build(by_fields, limit=4).limit == 4

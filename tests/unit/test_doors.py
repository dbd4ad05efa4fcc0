"""Each operation's parameters are defined once, on its request model (rushmem_contract.schemas);
this checks every door against it, so that none drifts: the HTTP route, the sync and the async
client, the MCP tool and the CLI take the same parameters with the same limits and defaults."""

from __future__ import annotations

import datetime as dt
import inspect
from typing import Any

import pytest

from rushmem.mcp.tools import Identity, MemoryTools, fixed_identity
from rushmem_client import AsyncMemoryClient, MemoryClient
from rushmem_contract.models import MemoryFilters
from rushmem_contract.params import bounds, default
from rushmem_contract.schemas import ListRequest, RecallRequest
from rushmem_tools.cli.main import build_parser

FILTERS = set(MemoryFilters.model_fields)


def parameters(fn: Any) -> dict[str, inspect.Parameter]:
    return {n: p for n, p in inspect.signature(fn).parameters.items() if n not in ("self", "ctx")}


def tool_schema(name: str) -> dict[str, Any]:
    from mcp.server.mcpserver.tools.base import Tool

    tools = MemoryTools(lambda: None, fixed_identity(Identity("u1")))  # type: ignore[arg-type,return-value]
    return Tool.from_function(getattr(tools, name)).parameters


@pytest.mark.parametrize("name", [n for n in vars(MemoryClient) if not n.startswith("_")])
def test_the_async_client_has_the_sync_clients_signatures(name: str) -> None:
    sync, aio = getattr(MemoryClient, name), getattr(AsyncMemoryClient, name, None)
    if name in ("close",):
        assert aio is None
        return
    assert aio is not None, name
    assert list(parameters(sync)) == list(parameters(aio))
    assert [p.default for p in parameters(sync).values()] == [p.default for p in parameters(aio).values()]


@pytest.mark.parametrize(
    ("method", "model", "door_only"),
    [
        ("recall", RecallRequest, set()),
        ("list_memories", ListRequest, set()),
    ],
)
def test_the_clients_methods_take_the_request_models_fields(method: str, model: Any, door_only: set[str]) -> None:
    params = parameters(getattr(MemoryClient, method))
    assert set(params) - door_only == set(model.model_fields)


def test_get_memories_query_parameters_are_the_list_requests_fields() -> None:
    from rushmem.routes.memories import list_memories

    params = parameters(list_memories)
    assert set(params) == (set(ListRequest.model_fields) - {"filters"}) | FILTERS
    limit = params["limit"]
    assert limit.default == default(ListRequest, "limit")
    query = limit.annotation.__metadata__[0] if hasattr(limit.annotation, "__metadata__") else None
    assert query is None or (query.metadata and {"ge", "le"} <= set(bounds(ListRequest, "limit")))


def test_the_mcp_tools_limits_and_defaults_are_the_models() -> None:
    recall = tool_schema("recall_memories")["properties"]
    limit = next(s for s in recall["limit"]["anyOf"] if s.get("type") == "integer")
    assert (limit["minimum"], limit["maximum"]) == (
        bounds(RecallRequest, "limit")["ge"],
        bounds(RecallRequest, "limit")["le"],
    )
    assert recall["limit"]["description"] == RecallRequest.model_fields["limit"].description
    listing = tool_schema("list_memories")["properties"]
    assert listing["limit"]["default"] == default(ListRequest, "limit")
    assert listing["limit"]["maximum"] == bounds(ListRequest, "limit")["le"]
    cursor = next(s for s in listing["cursor"]["anyOf"] if s.get("type") == "string")
    assert cursor["maxLength"] == bounds(ListRequest, "cursor")["max_length"]
    # The filters, with the model's descriptions.
    for name in FILTERS:
        assert listing[name]["description"] == MemoryFilters.model_fields[name].description
        assert recall[name]["description"] == MemoryFilters.model_fields[name].description
    # The rest of each request is the transport's (user, consistency) or a debugging switch.
    assert (
        set(recall)
        == (
            set(RecallRequest.model_fields)
            - {"user_id", "messages", "now", "include_inactive", "filters", "consistency"}
        )
        | FILTERS
    )
    assert set(listing) == (set(ListRequest.model_fields) - {"user_id", "filters", "consistency"}) | FILTERS


def subcommand(name: str) -> Any:
    parser = build_parser(None)
    sub = next(a for a in parser._actions if a.dest == "command")
    return sub.choices[name]  # type: ignore[index]


def test_the_cli_recall_takes_the_request_models_parameters_and_limits() -> None:
    recall = subcommand("recall")
    dests = {a.dest for a in recall._actions}
    assert {"user", "project", "limit", "now", "include_inactive", "query"} <= dests
    assert {"categories", "metadata_filter", "created_after", "created_before"} <= dests
    # Out of range is the service's InvalidInput (exit code 2), against the same bound.
    assert next(a for a in recall._actions if a.dest == "limit").help == RecallRequest.model_fields["limit"].description


def test_every_filter_reaches_the_cli_and_round_trips_through_the_query() -> None:
    """The doors derive the filters from MemoryFilters: each field is a flag of recall and list, and
    what the clients put in GET /memories' query reads back as the same filters."""
    from rushmem_contract.schemas import filter_query, list_filters
    from rushmem_tools.cli.memories import filter_flag

    for command in ("recall", "list"):
        dests = {a.dest for a in subcommand(command)._actions}
        assert {filter_flag(name)[1] for name in FILTERS} <= dests
    full = MemoryFilters(
        categories=["fact", "decision"], metadata={"team": "web", "tags": ["a,b"]},
        created_after=dt.datetime(2026, 1, 1, tzinfo=dt.UTC), created_before=dt.datetime(2026, 2, 1, tzinfo=dt.UTC),
    )  # fmt: skip
    assert set(filter_query(full)) == FILTERS
    assert list_filters(filter_query(full)) == full

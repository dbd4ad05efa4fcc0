"""The one error table (rushmem_contract.kinds), walked kind by kind: every door says the same
thing about the same error: the HTTP answer's status and code, the MCP tool error's code and text,
the CLI's exit code (as the README documents them) and the exception the client raises back."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx
import pytest
from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_types import TextContent

from rushmem.http.errors import install_error_handlers
from rushmem.mcp.tools import tool_error
from rushmem_client import calls
from rushmem_client.errors import error_from_answer
from rushmem_contract import retry
from rushmem_contract.errors import (
    AgentMemoryError,
    ConfigurationError,
    DatabaseUnavailable,
    InvalidInput,
    ProviderError,
)
from rushmem_contract.kinds import ERROR_KINDS, INTERNAL, ErrorKind, error_kind
from rushmem_tools.cli.main import error_line
from rushmem_tools.local.server import http_api_event

# README, "The CLI": 2 bad input, 3 configuration, 4 database unavailable, 5 provider failure.
DOCUMENTED_EXIT_CODES: dict[type[AgentMemoryError], int] = {
    InvalidInput: 2,
    ConfigurationError: 3,
    DatabaseUnavailable: 4,
    ProviderError: 5,
}


def example(kind: ErrorKind) -> AgentMemoryError:
    if issubclass(kind.error, InvalidInput):
        return kind.error("limit is too big", field="limit")
    if issubclass(kind.error, ProviderError):
        return kind.error("bedrock", "AccessDenied for arn:aws:iam::1:role/x")
    return kind.error("secret detail: db.internal:5432")


def http_answer(exc: AgentMemoryError) -> tuple[int, dict[str, Any], dict[str, str]]:
    app = APIGatewayHttpResolver()
    install_error_handlers(app, _Quiet())

    @app.get("/boom")
    def boom() -> None:
        raise exc

    answer = app.resolve(http_api_event("GET", "/boom", []), {})  # type: ignore[arg-type]
    return answer["statusCode"], json.loads(answer["body"]), answer.get("headers") or {}


class _Quiet:
    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def mcp_error_text(exc: AgentMemoryError) -> str:
    server: MCPServer[Any] = MCPServer("t")

    def failing() -> str:
        raise tool_error(exc)

    server.add_tool(failing, name="failing")

    async def call() -> str:
        async with Client(server) as client:
            result = await client.call_tool("failing", {})
        assert result.is_error
        block = result.content[0]
        assert isinstance(block, TextContent)
        return block.text

    return anyio.run(call)


@pytest.mark.parametrize("kind", ERROR_KINDS, ids=lambda k: k.code)
def test_every_door_derives_the_same_answer_from_the_table(kind: ErrorKind) -> None:
    exc = example(kind)
    assert error_kind(exc) is kind

    # HTTP: the status, the code and the public wording (hosts and ARNs stay in the logs).
    status, body, headers = http_answer(exc)
    assert (status, body["code"], body["message"]) == (kind.status, kind.code, kind.message(exc))
    if kind.public_message is not None:
        assert "db.internal" not in body["message"] and "arn:aws" not in body["message"]
    if status == 503:
        assert headers.get("Retry-After") == str(retry.RETRY_AFTER_S)

    # MCP: the same code and wording, as a tool error.
    text = mcp_error_text(exc)
    assert f"{kind.code}: " in text and kind.message(exc) in text

    # CLI: the documented exit code; the operator sees the whole message.
    documented = next((code for base, code in DOCUMENTED_EXIT_CODES.items() if issubclass(kind.error, base)), 1)
    assert kind.exit_code == documented
    assert str(exc).split(": ")[-1] in error_line(exc)

    # The client: the answer decodes back into the same exception type, retried or not as the
    # table says.
    back = error_from_answer(status, body)
    assert type(back) is kind.error
    if isinstance(exc, InvalidInput):
        assert isinstance(back, InvalidInput) and back.field == exc.field
    request = httpx.Request("GET", "http://api/boom")
    response = httpx.Response(status, json=body, request=request)
    if kind.retryable:
        with pytest.raises(retry.Retryable) as retried:
            calls.check_answer(response, "http://api")
        assert type(calls.given_up(retried.value)) is kind.error
    else:
        with pytest.raises(kind.error):
            calls.check_answer(response, "http://api")


def test_retryable_kinds_are_exactly_the_retry_policys_statuses() -> None:
    assert {k.code for k in ERROR_KINDS if k.retryable} == {
        "statement_timeout",
        "database_resuming",
        "database_unavailable",
        "provider_error",
        "service_unavailable",
    }
    assert {429, 502, 503, 504} == retry.RETRY_STATUSES
    assert not INTERNAL.retryable and error_kind(RuntimeError("boom")) is INTERNAL


def test_the_client_waits_what_retry_after_asks_within_its_bound() -> None:
    request = httpx.Request("GET", "http://api/x")
    answer = httpx.Response(429, headers={"Retry-After": "1.5"}, json={"message": "slow down"}, request=request)
    with pytest.raises(retry.Retryable) as throttled:
        calls.check_answer(answer, "http://api")
    assert throttled.value.retry_after == 1.5
    long = httpx.Response(503, headers={"Retry-After": "3600"}, json={}, request=request)
    with pytest.raises(retry.Retryable) as later:
        calls.check_answer(long, "http://api")
    assert later.value.retry_after == retry.CLIENT_MAX_DELAY_S
    # No header: the jittered backoff.
    assert retry.wait_for(retry.Retryable("x"), 1, 0.2, jitter=lambda a, b: b) == 0.2
    assert retry.wait_for(retry.Retryable("x", 0.7), 3, 0.2) == 0.7

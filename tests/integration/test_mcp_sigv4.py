"""A backend calls the deployed MCP endpoint with the SDK's client, signing with SigV4 as API
Gateway's AWS_IAM authorizer requires: the signatures are checked by an independent verifier
written from AWS's Signature Version 4 specification (not botocore, which signs), in front of
`rushmem serve`."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from botocore.credentials import Credentials
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from rushmem_client.mcp_auth import SigV4Auth, mcp_http_client
from rushmem_contract.errors import ConfigurationError
from tests.support.recall import serving
from tests.support.sigv4 import ACCESS_KEY, REGION, SECRET_KEY, SESSION_TOKEN, verify


class VerifyingGateway(httpx2.AsyncBaseTransport):
    """What API Gateway does before the function: refuse a request whose signature does not hold
    (403), pass the others on (here to `rushmem serve`)."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.checked: list[str | None] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        problem = verify(request.method, str(request.url), {k.lower(): v for k, v in request.headers.items()}, body)
        self.checked.append(problem)
        if problem:
            return httpx2.Response(403, json={"message": problem})
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def credentials() -> Credentials:
    return Credentials(ACCESS_KEY, SECRET_KEY, SESSION_TOKEN)


def signed_request(**headers: str) -> httpx2.Request:
    request = httpx2.Request(
        "POST", "https://abc123.execute-api.eu-west-1.amazonaws.com/mcp", headers=headers, content=b'{"jsonrpc":"2.0"}'
    )
    flow = SigV4Auth(REGION, credentials=credentials()).sync_auth_flow(request)
    return next(flow)


def check(request: httpx2.Request) -> str | None:
    return verify(request.method, str(request.url), {k.lower(): v for k, v in request.headers.items()}, request.content)


def test_the_signature_covers_the_identity_headers_and_breaks_when_they_change() -> None:
    request = signed_request(**{"X-Memory-User": "u-42", "X-Memory-Project": "svg", "Content-Type": "application/json"})
    assert check(request) is None
    assert request.headers["x-amz-security-token"] == SESSION_TOKEN
    assert "x-memory-project" in request.headers["authorization"]
    request.headers["X-Memory-User"] = "someone-else"
    assert check(request) == "signature mismatch"
    tampered = signed_request(**{"X-Memory-User": "u-42"})
    tampered.headers["connection"] = "close"  # unsigned, hop-by-hop: may change on the way
    assert check(tampered) is None
    wrong_body = signed_request(**{"X-Memory-User": "u-42"})
    assert verify("POST", str(wrong_body.url), dict(wrong_body.headers), b"{}") == "signature mismatch"


def test_the_region_comes_from_the_api_url_or_must_be_given(monkeypatch: pytest.MonkeyPatch) -> None:
    client = mcp_http_client(
        "https://abc123.execute-api.ap-south-1.amazonaws.com", user_id="u", credentials=credentials()
    )
    assert isinstance(client.auth, SigV4Auth) and client.auth.region == "ap-south-1"
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    with pytest.raises(ConfigurationError, match="region"):
        mcp_http_client("https://memory.example.com", user_id="u", auth="iam", credentials=credentials())
    assert mcp_http_client("http://127.0.0.1:8080", user_id="u").auth is None  # as MemoryClient: no auth
    with pytest.raises(ConfigurationError, match="token"):
        mcp_http_client("https://memory.example.com", auth="jwt")


@pytest.fixture
def served(lambda_env: str) -> Iterator[str]:
    with serving(unverified_jwt=False) as url:
        yield url


def test_the_sdk_client_signs_every_request_and_the_tools_answer(served: str) -> None:
    gateway = VerifyingGateway()

    async def scenario() -> Any:
        # The verifier stands where API Gateway would.
        http = mcp_http_client(
            served,
            user_id="u-signed",
            project_id="p1",
            auth="iam",  # a localhost URL alone means no auth
            region=REGION,
            credentials=credentials(),
            transport=gateway,
        )
        async with http, Client(streamable_http_client(f"{served}/mcp", http_client=http)) as client:
            await client.call_tool("remember", {"memories": ["Signs every request"], "category": "fact"})
            return (await client.call_tool("recall_memories", {"query": "signing requests"})).structured_content

    recalled = anyio.run(scenario)
    assert [m["content"] for m in recalled["memories"]] == ["Signs every request"]
    assert len(gateway.checked) >= 3 and not any(gateway.checked), gateway.checked


def test_an_unsigned_client_is_refused_by_the_gateway(served: str) -> None:
    gateway = VerifyingGateway()

    async def scenario() -> None:
        http = mcp_http_client(served, user_id="u-signed", auth="none", transport=gateway)
        async with http, Client(streamable_http_client(f"{served}/mcp", http_client=http)) as client:
            await client.list_tools()

    with pytest.raises(BaseException):  # noqa: B017 - the SDK wraps the 403 in task-group exceptions
        anyio.run(scenario)
    assert gateway.checked and gateway.checked[0] == "no SigV4 authorization header"

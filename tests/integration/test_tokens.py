"""`agent-memory serve --jwt-issuer`: real tokens from a local OpenID Connect issuer (RSA keys made in
the test, its discovery document and JWKS served over HTTP on 127.0.0.1), verified on every request as
the stack's JWT authorizer does, through serve's /mcp and REST routes over real HTTP; the OAuth
discovery an MCP host follows from a 401 to the issuer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator

import anyio
import httpx
import httpx2
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from agent_memory.config import get_settings
from agent_memory_client import MemoryClient
from agent_memory_contract.errors import ConfigurationError, Forbidden
from agent_memory_tools.local.server import LocalApi, make_server
from agent_memory_tools.local.tokens import JwtVerifier
from tests.support.oauth_issuer import AUDIENCE, LocalIssuer
from tests.support.recall import ROOT, TEMPLATE

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture
def served(lambda_env: str, issuer: LocalIssuer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """serve as `agent-memory serve --jwt-issuer ISSUER --jwt-audience AUDIENCE` runs it."""
    monkeypatch.setenv("AGENT_MEMORY_OAUTH_ISSUER", issuer.url)
    monkeypatch.setenv("AGENT_MEMORY_OAUTH_SCOPES", "openid,email")
    get_settings.cache_clear()
    verifier = JwtVerifier(issuer.url, [AUDIENCE])
    verifier.discover()
    server = make_server(LocalApi(TEMPLATE, verifier=verifier), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


# ---- discovery: from a 401 to the authorization server ---------------------------------------


def test_an_mcp_host_without_a_token_is_sent_to_the_metadata_and_on_to_the_issuer(
    served: str, issuer: LocalIssuer
) -> None:
    refused = httpx.post(f"{served}/mcp", json=INITIALIZE, headers=MCP_HEADERS)
    assert refused.status_code == 401
    challenge = refused.headers["www-authenticate"]
    assert challenge == f'Bearer resource_metadata="{served}/.well-known/oauth-protected-resource/mcp"'
    metadata_url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]

    metadata = httpx.get(metadata_url)  # no token needed
    assert metadata.status_code == 200
    document = metadata.json()
    # RFC 9728: the resource is the URL the host called.
    assert document["resource"] == f"{served}/mcp"
    assert document["authorization_servers"] == [issuer.url]
    assert document["scopes_supported"] == ["openid", "email"]
    assert document["bearer_methods_supported"] == ["header"]
    # The root well-known URI, which hosts try when a 401 carries no challenge, says the same.
    assert httpx.get(f"{served}/.well-known/oauth-protected-resource").json() == document
    # An issuer whose own metadata advertises S256 PKCE needs no stand-in metadata here.
    assert httpx.get(f"{served}/.well-known/oauth-authorization-server").status_code == 404

    configuration = httpx.get(f"{document['authorization_servers'][0]}/.well-known/openid-configuration").json()
    assert configuration["issuer"] == issuer.url
    assert "S256" in configuration["code_challenge_methods_supported"]


def test_every_route_but_the_metadata_wants_a_token(served: str) -> None:
    for method, path in [("GET", "/memories"), ("POST", "/recall"), ("GET", "/openapi.json"), ("GET", "/nowhere")]:
        answer = httpx.request(method, f"{served}{path}", params={"user_id": "u1"})
        assert answer.status_code == 401, path
        assert answer.json() == {"message": "Unauthorized"}  # what the JWT authorizer answers
        assert "resource_metadata=" in answer.headers["www-authenticate"]
        assert "error=" not in answer.headers["www-authenticate"]  # no token: no error code (RFC 6750)


# ---- a valid token: the user is its sub ------------------------------------------------------


async def _mcp_session(url: str, token: str) -> tuple[set[str], str]:
    http = httpx2.AsyncClient(headers=bearer(token), timeout=60)
    async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        stored = await client.call_tool("remember", {"facts": ["Deploys on Fridays, never on Mondays"]})
        assert not stored.is_error, stored.content
        recalled = await client.call_tool("recall_memories", {"query": "when does the user deploy"})
        return tools, " ".join(getattr(block, "text", "") for block in recalled.content)


def test_a_valid_token_reaches_the_tools_as_its_subject(served: str, issuer: LocalIssuer) -> None:
    sub = f"user-{uuid.uuid4().hex[:8]}"
    tools, recalled = anyio.run(_mcp_session, served, issuer.token(sub))
    assert {"remember", "recall_memories"} <= tools
    assert "Deploys on Fridays" in recalled
    # Stored for the token's sub: the REST API with the same token lists it, another user's sees nothing.
    with MemoryClient(served, token=issuer.token(sub)) as client:
        assert [m.content for m in client.list_memories()] == ["Deploys on Fridays, never on Mondays"]
        with pytest.raises(Forbidden):  # a token never acts for another user_id
            client.list_memories(user_id="someone-else")
    with MemoryClient(served, token=issuer.token("another-user")) as other:
        assert list(other.list_memories()) == []


def test_an_access_token_without_aud_is_matched_by_client_id(served: str, issuer: LocalIssuer) -> None:
    # Cognito's access tokens: no aud, the app client in client_id (the authorizer matches either).
    token = issuer.token("cognito-user", audience=None, client_id=AUDIENCE, token_use="access")
    answer = httpx.get(f"{served}/memories", headers=bearer(token))
    assert answer.status_code == 200 and answer.json()["memories"] == []
    stranger = issuer.token("cognito-user", audience=None, client_id="another-app")
    assert httpx.get(f"{served}/memories", headers=bearer(stranger)).status_code == 401


# ---- refused tokens ------------------------------------------------------------------------------


def _refusal(issuer: LocalIssuer, case: str) -> str:
    if case == "expired":
        return issuer.token(expires_in=-3600)
    if case == "wrong audience":
        return issuer.token(audience="some-other-api")
    if case == "wrong issuer":
        return issuer.token(issuer="https://evil.example.com")
    if case == "bad signature":  # signed by a key the issuer never published, under its kid
        return issuer.token(key=issuer.other_key)
    if case == "unknown kid":
        return issuer.token(key=issuer.other_key, kid="rotated-away")
    if case == "not a JWT":
        return "not-a-jwt"
    if case == "unsigned":
        import jwt

        return jwt.encode({"sub": "u", "iss": issuer.url, "aud": AUDIENCE, "exp": 2**31}, "", algorithm="none")
    raise AssertionError(case)


REFUSALS = {
    "expired": "expired",
    "wrong audience": "another audience",
    "wrong issuer": "another issuer",
    "bad signature": "signature",
    "unknown kid": "kid",
    "not a JWT": "not a JWT",
    "unsigned": "algorithm",
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_refused_token_gets_401_naming_why_through_mcp(served: str, issuer: LocalIssuer, case: str) -> None:
    answer = httpx.post(f"{served}/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **bearer(_refusal(issuer, case))})
    assert answer.status_code == 401
    challenge = answer.headers["www-authenticate"]
    assert challenge.startswith(f'Bearer resource_metadata="{served}/.well-known/oauth-protected-resource/mcp"')
    assert 'error="invalid_token"' in challenge
    assert REFUSALS[case] in challenge.split("error_description=", 1)[1]


def test_a_rotated_key_is_fetched_but_made_up_kids_do_not_hammer_the_issuer(served: str, issuer: LocalIssuer) -> None:
    before = issuer.jwks_requests
    assert httpx.get(f"{served}/memories", headers=bearer(issuer.token())).status_code == 200
    assert issuer.jwks_requests == before  # a known kid: the cached set
    # Tokens under kids the issuer never published: refused, the set fetched again at most once
    # per cooldown (serve's verifier has just fetched it: not at all).
    for _ in range(3):
        made_up = issuer.token(key=issuer.other_key, kid=uuid.uuid4().hex)
        assert httpx.get(f"{served}/memories", headers=bearer(made_up)).status_code == 401
    assert issuer.jwks_requests == before

    # The issuer rotates to a new key under a new kid: once the cooldown allows, the set is fetched
    # again and the new key's tokens verify.
    verifier = JwtVerifier(issuer.url, [AUDIENCE], refresh_cooldown_s=0)
    assert verifier.claims(f"Bearer {issuer.token('before')}")["sub"] == "before"
    fetched = issuer.jwks_requests
    issuer.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    issuer.kid = uuid.uuid4().hex
    assert verifier.claims(f"Bearer {issuer.token('after')}")["sub"] == "after"
    assert issuer.jwks_requests == fetched + 1


# ---- the command -----------------------------------------------------------------------------------


def serve_command(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "agent_memory_tools", "serve", "--port", "0", "--no-warm", "--template"]
    return subprocess.run(
        [*command, str(TEMPLATE), *args], capture_output=True, text=True, env=dict(os.environ), cwd=ROOT, timeout=120
    )


def test_the_serve_command_verifies_tokens_from_the_issuer_it_names(lambda_env: str) -> None:
    # Like Cognito: its OpenID configuration does not advertise S256 PKCE, so serve names itself as the
    # authorization server and serves RFC 8414 metadata that sends hosts to the issuer's endpoints.
    issuer = LocalIssuer(advertise_pkce=False)
    command = [sys.executable, "-m", "agent_memory_tools", "serve", "--port", "0", "--no-warm", "--template"]
    args = [str(TEMPLATE), "--jwt-issuer", issuer.url, "--jwt-audience", f"other,{AUDIENCE}"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen([*command, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stdout is not None
        started = json.loads(process.stdout.readline())
        url = started["url"]
        assert started["jwt_issuer"] == issuer.url and started["mcp"] == f"{url}/mcp"
        # From the metadata to the issuer's sign-in, with S256 PKCE advertised, as an MCP host reads them.
        metadata = httpx.get(f"{url}/.well-known/oauth-protected-resource/mcp", timeout=30).json()
        assert metadata["authorization_servers"] == [url]
        server = httpx.get(f"{url}/.well-known/oauth-authorization-server", timeout=30).json()
        assert server["issuer"] == url and server["code_challenge_methods_supported"] == ["S256"]
        assert server["authorization_endpoint"] == issuer.discovery()["authorization_endpoint"]
        assert server["token_endpoint"] == issuer.discovery()["token_endpoint"]
        refused = httpx.post(f"{url}/mcp", json=INITIALIZE, headers=MCP_HEADERS, timeout=30)
        assert refused.status_code == 401 and "resource_metadata=" in refused.headers["www-authenticate"]
        listed = httpx.get(f"{url}/memories", headers=bearer(issuer.token("cli-user")), timeout=30)
        assert listed.status_code == 200 and listed.json()["memories"] == []
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        issuer.close()


def test_serve_refuses_an_issuer_it_cannot_read_at_start(lambda_env: str, issuer: LocalIssuer) -> None:
    dead = f"http://127.0.0.1:{_free_port()}"
    result = serve_command("--jwt-issuer", dead, "--jwt-audience", AUDIENCE)
    assert result.returncode != 0
    assert "openid-configuration" in result.stderr and "Traceback" not in result.stderr
    no_audience = serve_command("--jwt-issuer", issuer.url)
    assert no_audience.returncode != 0 and "--jwt-audience" in no_audience.stderr


def test_the_verifier_wants_the_issuers_own_configuration(issuer: LocalIssuer) -> None:
    # A discovery document naming another issuer (a proxy, another spelling) is refused, as OpenID
    # Connect Discovery says: tokens would carry an iss that the configured one never matches.
    other_name = issuer.url.replace("127.0.0.1", "localhost")
    with pytest.raises(ConfigurationError, match=r"is for issuer 'http://127\.0\.0\.1"):
        JwtVerifier(other_name, [AUDIENCE]).discover()
    with pytest.raises(ConfigurationError, match="openid-configuration"):
        JwtVerifier(issuer.url + "/tenant", [AUDIENCE]).discover()  # nothing there


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port

"""The OAuth protected-resource metadata MCP hosts read, and the 401 challenge that points to it,
from RecallFunction's own routes (driven by API Gateway events, no I/O)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rushmem.config import get_settings
from rushmem.http.oauth import (
    authorization_server_metadata,
    bearer_challenge,
    protected_resource_metadata,
    public_base_url,
)
from rushmem_tools.local import runtime
from rushmem_tools.local.server import http_api_event
from tests.support.recall import ROOT, TEMPLATE

ISSUER = "https://cognito-idp.eu-west-1.amazonaws.com/eu-west-1_AbC123"
API_HOST = "abc123.execute-api.eu-west-1.amazonaws.com"
EVENTS = ROOT / "events"


def test_the_metadata_names_the_mcp_endpoint_and_the_issuer() -> None:
    document = protected_resource_metadata(f"https://{API_HOST}", ISSUER, ("openid", "email"))
    assert document == {
        "resource": f"https://{API_HOST}/mcp",
        "authorization_servers": [ISSUER],
        "bearer_methods_supported": ["header"],
        "resource_name": "rushmem",
        "scopes_supported": ["openid", "email"],
    }
    assert "scopes_supported" not in protected_resource_metadata(f"https://{API_HOST}", ISSUER)
    # An issuer identifier is compared as a string: Auth0's final slash is kept (issue 33).
    auth0 = "https://tenant.eu.auth0.com/"
    assert protected_resource_metadata(f"https://{API_HOST}", auth0)["authorization_servers"] == [auth0]
    # RFC 9728 section 3.3: each document names the resource its path derives from.
    root = protected_resource_metadata(
        f"https://{API_HOST}/", ISSUER, metadata_path="/.well-known/oauth-protected-resource"
    )
    assert root["resource"] == f"https://{API_HOST}"


def test_the_facade_names_this_api_and_sends_hosts_to_the_issuers_endpoints() -> None:
    document = protected_resource_metadata(f"https://{API_HOST}", ISSUER, facade=True)
    assert document["authorization_servers"] == [f"https://{API_HOST}"]
    sign_in = "https://acme.auth.eu-west-1.amazoncognito.com/oauth2"
    server = authorization_server_metadata(
        f"https://{API_HOST}/", f"{sign_in}/authorize", f"{sign_in}/token", ["openid"]
    )
    # RFC 8414: the issuer is the identifier the host used; S256 PKCE advertised, no registration.
    assert server["issuer"] == f"https://{API_HOST}"
    assert server["authorization_endpoint"] == f"{sign_in}/authorize"
    assert server["token_endpoint"] == f"{sign_in}/token"
    assert server["code_challenge_methods_supported"] == ["S256"]
    assert "none" in server["token_endpoint_auth_methods_supported"]
    assert server["scopes_supported"] == ["openid"] and "registration_endpoint" not in server


def test_the_base_url_is_where_the_caller_reached_the_api() -> None:
    assert public_base_url({"host": API_HOST, "x-forwarded-proto": "https"}) == f"https://{API_HOST}"
    assert public_base_url({"host": "127.0.0.1:8080", "x-forwarded-proto": "http"}) == "http://127.0.0.1:8080"
    # No proxy header: API Gateway only speaks HTTPS; a made-up scheme is not echoed.
    assert public_base_url({}, API_HOST) == f"https://{API_HOST}"
    assert public_base_url({"host": API_HOST, "x-forwarded-proto": "javascript"}) == f"https://{API_HOST}"


def test_the_challenge_points_to_the_metadata_and_says_why() -> None:
    assert bearer_challenge("http://127.0.0.1:9") == (
        'Bearer resource_metadata="http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp"'
    )
    refused = bearer_challenge("https://h/", error="invalid_token", description='the "token"\nhas expired')
    assert refused == (
        'Bearer resource_metadata="https://h/.well-known/oauth-protected-resource/mcp", '
        'error="invalid_token", error_description="the \'token\' has expired"'
    )


# ---- through the handler, as API Gateway invokes it ------------------------------------------


def invoke(path: str) -> dict[str, Any]:
    event = http_api_event("GET", path, [("Host", API_HOST), ("X-Forwarded-Proto", "https")])
    return runtime.invoke_spec(runtime.function_spec(TEMPLATE, "RecallFunction"), event)  # type: ignore[no-any-return]


def test_the_event_without_an_authorizer_gets_the_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    """events/http-oauth-protected-resource.json: what API Gateway passes on for an MCP host without a
    token (no authorizer context), on a stack with an issuer (the manifest's 404 is an IAM stack's)."""
    monkeypatch.setenv("AGENT_MEMORY_OAUTH_ISSUER", ISSUER)
    monkeypatch.setenv("AGENT_MEMORY_EMBEDDING_PROVIDER", "hash")
    get_settings.cache_clear()
    event = runtime.read_event(EVENTS / "http-oauth-protected-resource.json")
    assert "authorizer" not in event["requestContext"]
    answer = runtime.invoke_spec(runtime.function_spec(TEMPLATE, "RecallFunction"), event)
    assert answer["statusCode"] == 200
    document = json.loads(answer["body"])
    assert document["resource"] == f"https://{event['requestContext']['domainName']}/mcp"
    assert document["authorization_servers"] == [ISSUER]


@pytest.mark.parametrize("path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"])
def test_the_function_serves_the_metadata_without_a_token(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    monkeypatch.setenv("AGENT_MEMORY_OAUTH_ISSUER", ISSUER)
    monkeypatch.setenv("AGENT_MEMORY_OAUTH_SCOPES", "openid,email,profile")
    monkeypatch.setenv("AGENT_MEMORY_EMBEDDING_PROVIDER", "hash")
    get_settings.cache_clear()
    answer = invoke(path)
    assert answer["statusCode"] == 200
    document = json.loads(answer["body"])
    assert document["resource"] == f"https://{API_HOST}" + path.removeprefix("/.well-known/oauth-protected-resource")
    assert document["authorization_servers"] == [ISSUER]
    assert document["scopes_supported"] == ["openid", "email", "profile"]


def test_the_function_serves_the_cognito_facade(monkeypatch: pytest.MonkeyPatch) -> None:
    sign_in = "https://acme.auth.eu-west-1.amazoncognito.com/oauth2"
    monkeypatch.setenv("AGENT_MEMORY_OAUTH_ISSUER", ISSUER)
    monkeypatch.setenv("AGENT_MEMORY_OAUTH_AUTHORIZATION_ENDPOINT", f"{sign_in}/authorize")
    monkeypatch.setenv("AGENT_MEMORY_OAUTH_TOKEN_ENDPOINT", f"{sign_in}/token")
    monkeypatch.setenv("AGENT_MEMORY_EMBEDDING_PROVIDER", "hash")
    get_settings.cache_clear()
    resource = json.loads(invoke("/.well-known/oauth-protected-resource/mcp")["body"])
    assert resource["authorization_servers"] == [f"https://{API_HOST}"]
    answer = invoke("/.well-known/oauth-authorization-server")
    assert answer["statusCode"] == 200
    server = json.loads(answer["body"])
    assert server["issuer"] == f"https://{API_HOST}" and server["token_endpoint"] == f"{sign_in}/token"


@pytest.mark.parametrize(
    "path",
    [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-authorization-server",
    ],
)
def test_without_an_issuer_there_is_no_metadata(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    monkeypatch.setenv("AGENT_MEMORY_EMBEDDING_PROVIDER", "hash")
    answer = invoke(path)
    assert answer["statusCode"] == 404
    assert "RUSHMEM_OAUTH_" in json.loads(answer["body"])["message"]

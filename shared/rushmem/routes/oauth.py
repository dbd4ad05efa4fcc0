"""OAuth metadata for MCP hosts: where to sign in (RFC 9728 protected-resource metadata) and, with
the facade on, the authorization server's endpoints (RFC 8414). No authorizer in front of these
paths (template.yaml); 404 when the API accepts no tokens."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from rushmem.http.errors import route_not_found
from rushmem.http.oauth import (
    AUTHORIZATION_SERVER_PATH,
    METADATA_PATHS,
    authorization_server_metadata,
    protected_resource_metadata,
    public_base_url,
)
from rushmem.lifecycle import get_service
from rushmem.routes.request import headers, http_event

router = Router()


def _no_oauth(setting: str) -> Response[Any]:
    return route_not_found(http_event(router), f"this API serves no OAuth metadata: {setting} is unset")


def _public_json(document: dict[str, Any]) -> Response[Any]:
    return Response(
        status_code=200,
        content_type="application/json",
        body=json.dumps(document),
        headers={"Cache-Control": "public, max-age=3600"},
    )


def _base_url() -> str:
    return public_base_url(headers(router), http_event(router).request_context.domain_name)


def protected_resource() -> Response[Any]:
    """Protected-resource metadata (RFC 9728); 404 when RUSHMEM_OAUTH_ISSUER is unset."""
    settings = get_service().settings
    if not settings.oauth_issuer:
        return _no_oauth("RUSHMEM_OAUTH_ISSUER")
    return _public_json(
        protected_resource_metadata(
            _base_url(),
            settings.oauth_issuer,
            settings.oauth_scopes,
            facade=settings.oauth_facade,
            metadata_path=router.current_event.path,
        )
    )


for _path in METADATA_PATHS:
    router.get(_path, include_in_schema=False)(protected_resource)


@router.get(AUTHORIZATION_SERVER_PATH, include_in_schema=False)
def authorization_server() -> Response[Any]:
    """RFC 8414 metadata naming the issuer's endpoints with S256 PKCE (rushmem.http.oauth says why)."""
    settings = get_service().settings
    if not settings.oauth_facade or not settings.oauth_authorization_endpoint or not settings.oauth_token_endpoint:
        return _no_oauth("RUSHMEM_OAUTH_AUTHORIZATION_ENDPOINT")
    return _public_json(
        authorization_server_metadata(
            _base_url(), settings.oauth_authorization_endpoint, settings.oauth_token_endpoint, settings.oauth_scopes
        )
    )

"""Calling the deployed MCP endpoint (``POST {ApiUrl}mcp``) from a backend with the MCP SDK's client.

The SDK's Streamable HTTP client sends its requests through an ``httpx2.AsyncClient``; this module
builds one that authenticates as the stack expects and names the user:

- ``auth="iam"`` (``ApiAuthorization=AWS_IAM``; the default for an ``execute-api`` URL):
  :class:`SigV4Auth` signs every request (service ``execute-api``) with the default AWS credential
  chain. The signature covers ``X-Memory-User``
  and ``X-Memory-Project``, so nobody on the way can change whose memories a call touches.
- ``auth="jwt"``: ``Authorization: Bearer <token>``; the user is the token's ``sub``.
- ``auth="none"``: ``rushmem serve`` on localhost (the default for other URLs without a token).

Needs the ``mcp`` package (which brings ``httpx2``); nothing else in :mod:`rushmem_client`
imports this module.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any
from urllib.parse import urlsplit

import httpx2

from rushmem_client.calls import EXECUTE_API_HOST, Auth, _aws_credentials, _aws_region, infer_auth
from rushmem_client.common import region_from_host
from rushmem_contract.errors import ConfigurationError

USER_HEADER = "X-Memory-User"
PROJECT_HEADER = "X-Memory-Project"
# What the signature covers besides host and the x-amz-* headers it adds: the body's type and the
# identity. Not every header: hop-by-hop ones (connection) may change on the way to API Gateway.
SIGNED_HEADERS = ("content-type", "x-memory-user", "x-memory-project")


class SigV4Auth(httpx2.Auth):
    """AWS Signature Version 4 for an ``httpx2`` client (API Gateway's AWS_IAM authorizer).

    ``credentials``: a botocore credentials object; default: the default chain (environment,
    profile, SSO, the function's or container's role), refreshed as it expires.
    """

    requires_request_body = True  # the signature covers the body's hash

    def __init__(self, region: str, *, credentials: Any = None, service: str = "execute-api") -> None:
        self.region = region
        self.service = service
        self._credentials = credentials if credentials is not None else _aws_credentials()

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        from botocore.auth import SigV4Auth as BotocoreSigV4
        from botocore.awsrequest import AWSRequest

        signed = {k: v for k, v in request.headers.items() if k.lower() in SIGNED_HEADERS}
        aws = AWSRequest(method=request.method, url=str(request.url), data=request.content, headers=signed)
        # Refreshable credentials (roles, SSO) renew themselves here.
        BotocoreSigV4(self._credentials.get_frozen_credentials(), self.service, self.region).add_auth(aws)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            if name in aws.headers:
                request.headers[name] = aws.headers[name]
        yield request


def mcp_http_client(
    api_url: str,
    *,
    user_id: str | None = None,
    project_id: str | None = None,
    auth: Auth | None = None,
    token: str | Callable[[], str] | None = None,
    region: str | None = None,
    credentials: Any = None,
    timeout: float = 30.0,
    transport: httpx2.AsyncBaseTransport | None = None,
) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` for ``streamable_http_client(f"{api_url}/mcp", http_client=...)``.

    ``user_id`` goes into ``X-Memory-User`` (required by the endpoint for IAM callers; with a JWT
    it may be left out, or must be the token's ``sub``); ``project_id`` into ``X-Memory-Project``,
    the default project of the tools. The model never sees either. ``auth`` as MemoryClient's: when
    not given, a token means JWT, an execute-api host IAM, anything else none. ``transport``: httpx2's (a
    proxy's, or a test's).
    """
    headers = {USER_HEADER: user_id} if user_id else {}
    if project_id:
        headers[PROJECT_HEADER] = project_id
    signer: httpx2.Auth | None = None
    auth = infer_auth(api_url, auth, token)
    if auth == "iam":
        host = urlsplit(api_url).hostname or ""
        region = region or region_from_host(host, EXECUTE_API_HOST) or _aws_region()
        if not region:
            raise ConfigurationError("auth='iam' needs region= (not in the API URL nor the AWS configuration)")
        signer = SigV4Auth(region, credentials=credentials)
    elif auth == "jwt":
        if token is None:
            raise ConfigurationError("auth='jwt' needs token= (a string or a function returning one)")
        signer = _BearerAuth(token)
    elif auth != "none":
        raise ConfigurationError(f"auth must be 'iam', 'jwt' or 'none', not {auth!r}")
    return httpx2.AsyncClient(headers=headers, auth=signer, timeout=timeout, transport=transport)


class _BearerAuth(httpx2.Auth):
    def __init__(self, token: str | Callable[[], str]) -> None:
        self._token = token

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        token = self._token() if callable(self._token) else self._token
        request.headers["Authorization"] = f"Bearer {token}"
        yield request

"""What an MCP host reads to find where to sign in: OAuth 2.0 Protected Resource Metadata (RFC 9728).

The MCP authorization specification makes the MCP endpoint an OAuth 2.1 resource server: a host
that calls ``/mcp`` without a token is answered 401, reads this API's metadata (where the
``WWW-Authenticate`` challenge points, or the well-known URIs it tries in turn), and signs the user in
at the authorization server named there (``oauth_issuer``: the stack's Cognito user pool or any
OIDC issuer). Served without authentication by RecallFunction and ``rushmem serve`` alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

WELL_KNOWN = "/.well-known/oauth-protected-resource"
MCP_PATH = "/mcp"
# RFC 9728 section 3.1: the well-known segment goes between the host and the resource's path, so the
# metadata of https://host/mcp is at https://host/.well-known/oauth-protected-resource/mcp. MCP hosts
# also try the root one.
METADATA_PATHS = (WELL_KNOWN + MCP_PATH, WELL_KNOWN)
# RFC 8414: the authorization server metadata of an issuer at https://host (the facade below).
AUTHORIZATION_SERVER_PATH = "/.well-known/oauth-authorization-server"
# What anyone may read without a token.
PUBLIC_PATHS = (*METADATA_PATHS, AUTHORIZATION_SERVER_PATH)


def public_base_url(headers: Mapping[str, str], domain_name: str | None = None) -> str:
    """``scheme://host`` the caller reached this API at (``headers`` keys in lower case).

    API Gateway sets ``x-forwarded-proto`` (https) and ``host``; ``rushmem serve`` sets both
    the same way for plain HTTP on localhost.
    """
    scheme = (headers.get("x-forwarded-proto") or "https").split(",")[0].strip().lower()
    if scheme not in ("http", "https"):
        scheme = "https"
    host = (headers.get("host") or domain_name or "localhost").split(",")[0].strip()
    return f"{scheme}://{host}"


def resource_of(base_url: str, metadata_path: str) -> str:
    """The protected resource whose metadata is at ``metadata_path`` (RFC 9728 section 3.1: the
    well-known segment was inserted between the host and the resource's path), so each document
    names the resource its own URL derives from (section 3.3): ``/mcp``'s the MCP endpoint, the
    root one the API at its root."""
    return base_url.rstrip("/") + metadata_path.partition(WELL_KNOWN)[2]


def protected_resource_metadata(
    base_url: str,
    issuer: str,
    scopes: Sequence[str] = (),
    *,
    facade: bool = False,
    metadata_path: str = WELL_KNOWN + MCP_PATH,
) -> dict[str, Any]:
    """The metadata document served at ``base_url`` + ``metadata_path``.

    ``resource`` is the resource that path derives from (:func:`resource_of`): for ``/mcp``'s the
    MCP endpoint's URL, the canonical URI hosts send as the ``resource`` parameter (RFC 8707) and
    compare with the URL they called. ``authorization_servers`` the one issuer whose tokens the API
    accepts, exactly as its OpenID configuration names itself (an identifier is compared as a string:
    ``https://tenant.auth0.com/`` keeps its slash), or with ``facade`` this API itself, whose
    :func:`authorization_server_metadata` sends hosts to that issuer's endpoints.
    """
    document: dict[str, Any] = {
        "resource": resource_of(base_url, metadata_path),
        "authorization_servers": [base_url.rstrip("/") if facade else issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "rushmem",
    }
    if scopes:
        document["scopes_supported"] = list(scopes)
    return document


def authorization_server_metadata(
    base_url: str, authorization_endpoint: str, token_endpoint: str, scopes: Sequence[str] = ()
) -> dict[str, Any]:
    """RFC 8414 metadata that names the real issuer's endpoints and says what it supports.

    Cognito (and Entra ID) publish only OpenID discovery, without ``code_challenge_methods_supported``,
    and MCP hosts (Claude, Cursor, the MCP Inspector) refuse an authorization server that does not
    advertise S256 PKCE, although these support it. So the protected-resource metadata names this
    API as the authorization server, and this document sends the host to the issuer's own sign-in
    and token endpoints: nothing is proxied, tokens never pass through here, and API Gateway still
    verifies them against the issuer. No ``registration_endpoint``: hosts are given the client id.
    """
    document: dict[str, Any] = {
        "issuer": base_url.rstrip("/"),
        "authorization_endpoint": authorization_endpoint,
        "token_endpoint": token_endpoint,
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        # A public client (PKCE, no secret), or one with a secret sent either way.
        "token_endpoint_auth_methods_supported": ["none", "client_secret_basic", "client_secret_post"],
    }
    if scopes:
        document["scopes_supported"] = list(scopes)
    return document


def bearer_challenge(base_url: str, *, error: str | None = None, description: str | None = None) -> str:
    """The ``WWW-Authenticate`` value of a 401 from the MCP endpoint (RFC 6750 section 3, RFC 9728
    section 5.1): where the metadata is, and why a token was refused when one was sent (without a
    token, RFC 6750 section 3.1 wants no error information: ``description`` then goes unsaid)."""
    parts = [f'resource_metadata="{base_url.rstrip("/")}{WELL_KNOWN}{MCP_PATH}"']
    if not error:
        return "Bearer " + parts[0]
    parts.append(f'error="{error}"')
    if description:
        # A quoted-string of a header: one line of printable ASCII, no quotes or backslashes inside
        # (a token's header can hold any character; HTTP/1.1 headers carry Latin-1 at most).
        text = "".join(c if c.isprintable() else " " for c in description.encode("ascii", "replace").decode())
        clean = " ".join(text.replace('"', "'").replace("\\", "/").split())
        parts.append(f'error_description="{clean}"')
    return "Bearer " + ", ".join(parts)

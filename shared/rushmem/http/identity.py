"""Who the caller is, as API Gateway vouched for it: the JWT authorizer's claims (the service's
:class:`~rushmem.service.caller.Caller` decides whose memories a request may touch)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def jwt_claims(event: Mapping[str, Any]) -> dict[str, Any] | None:
    """The claims of the request's JWT authorizer (format 2.0 event), or None when the request
    came through no JWT authorizer (an IAM-signed backend, a local server without tokens).

    A JWT authorizer with no claims, or claims that are not an object, is a token that names
    nobody: ``{}`` (refused for its missing ``sub``), never None, which would make the caller a
    trusted backend free to name any user."""
    context = event.get("requestContext")
    authorizer = context.get("authorizer") if isinstance(context, Mapping) else None
    if not isinstance(authorizer, Mapping) or "jwt" not in authorizer:
        return None
    jwt = authorizer["jwt"]
    claims = jwt.get("claims") if isinstance(jwt, Mapping) else None
    return dict(claims) if isinstance(claims, Mapping) else {}

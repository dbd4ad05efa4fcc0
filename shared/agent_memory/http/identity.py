"""Who the caller is, and whose memories a request may touch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_memory_contract.errors import Forbidden, InvalidInput


def caller_user_id(claims: Mapping[str, Any] | None, requested: str | None) -> str:
    """Whose memories this request may touch.

    With JWT claims the user is ``sub`` and a different ``user_id`` is refused; without claims
    the caller is a trusted (IAM-signed) backend and must name the user.
    """
    if claims:
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            raise Forbidden("the token has no 'sub' claim, so the user is unknown")
        if requested is not None and requested != sub:
            raise Forbidden("user_id is not the authenticated user; a token only acts for its own 'sub'")
        return sub
    if requested is None:
        raise InvalidInput("user_id is required (the request carries no JWT identity)", field="user_id")
    return requested


def requester(claims: Mapping[str, Any] | None, iam_arn: str | None) -> str:
    """Who asked, as an erasure receipt records it: "user" (with their own token: never their id,
    which the receipt must not hold), the IAM principal that signed the request, or "api" (a
    local server without authentication)."""
    if claims:
        return "user"
    if iam_arn:
        return iam_arn
    return "api"

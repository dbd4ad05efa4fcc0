"""Who the caller is, and whose memories a request may touch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from agent_memory_contract.errors import Forbidden, InvalidInput
from agent_memory_contract.models import UserId

_user_id: TypeAdapter[str] = TypeAdapter(UserId)


def token_user_id(sub: object) -> str:
    """The user a token's ``sub`` names, held to the rules of every ``user_id`` (1..256
    characters, no control or invisible characters), and given exactly so: surrounding spaces
    are refused, not stripped, so that the user a token writes as is the one a ``user_id``
    names when it reads or erases. Forbidden (403) naming the claim otherwise."""
    if not isinstance(sub, str) or not sub:
        raise Forbidden("the token has no 'sub' claim, so the user is unknown")
    if sub != sub.strip():
        raise Forbidden("the token's 'sub' claim has surrounding whitespace; it is not a valid user id")
    try:
        return _user_id.validate_python(sub)
    except ValidationError as exc:
        reason = exc.errors()[0].get("msg", "invalid value")
        raise Forbidden(f"the token's 'sub' claim is not a valid user id: {reason}") from None


def caller_user_id(claims: Mapping[str, Any] | None, requested: str | None) -> str:
    """Whose memories this request may touch.

    With JWT claims the user is ``sub`` (checked by :func:`token_user_id`) and a different
    ``user_id`` is refused; without claims the caller is a trusted (IAM-signed) backend and must
    name the user.
    """
    if claims:
        sub = token_user_id(claims.get("sub"))
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

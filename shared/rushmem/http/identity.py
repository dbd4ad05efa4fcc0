"""Who the caller is, and whose memories a request may touch."""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from rushmem_contract.errors import Forbidden, InvalidInput
from rushmem_contract.models import UserId

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


def caller_user_id(claims: Mapping[str, Any] | None, requested: str | None) -> str:
    """Whose memories this request may touch.

    With JWT claims (even none: a token without a ``sub``) the user is ``sub`` (checked by
    :func:`token_user_id`) and a different ``user_id`` is refused; without a JWT authorizer
    (``claims`` None) the caller is a trusted (IAM-signed) backend and must name the user.
    """
    if claims is not None:
        sub = token_user_id(claims.get("sub"))
        if requested is not None and requested != sub:
            raise Forbidden("user_id is not the authenticated user; a token only acts for its own 'sub'")
        return sub
    if requested is None:
        raise InvalidInput("user_id is required (the request carries no JWT identity)", field="user_id")
    return requested


# An ARN is at most 2,048 characters (IAM's own limit on a role ARN with its path).
MAX_REQUESTER_CHARS = 2048


def requester(claims: Mapping[str, Any] | None, iam_arn: object) -> str:
    """Who asked, as an erasure receipt records it: "user" (with their own token: never their id,
    which the receipt must not hold), the IAM principal that signed the request, or "api" (a
    local server without authentication). The principal is recorded printable (control, invisible
    and surrogate characters escaped as ``\\uXXXX``, cut at :data:`MAX_REQUESTER_CHARS`): it is
    the record of who erased, never a reason for the erasure to fail."""
    if claims is not None:
        return "user"
    if isinstance(iam_arn, str) and iam_arn:
        return printable(iam_arn)[:MAX_REQUESTER_CHARS]
    return "api"


def printable(text: str) -> str:
    """``text`` with control, format and surrogate characters written as ``\\uXXXX`` escapes."""
    if text.isprintable():
        return text
    return "".join(f"\\u{ord(ch):04x}" if unicodedata.category(ch) in ("Cc", "Cf", "Cs") else ch for ch in text)

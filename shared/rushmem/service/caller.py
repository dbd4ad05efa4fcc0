"""Who calls, and whose memories a call may touch: the first thing the dispatcher decides for every
operation, the same way at every door.

A caller either acts for one user (a JWT's ``sub``, an MCP session's user), and may name no one
else, or is trusted (an IAM-signed backend, the local server, the CLI, in-process code) and names
the user of each call with ``user_id`` (a call on one memory by id may leave it out where the
connection can look across users: the dispatcher finds the memory's owner).
"""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from rushmem_contract.errors import Forbidden, InvalidInput
from rushmem_contract.models import UserId

if TYPE_CHECKING:
    from rushmem_contract.operations import Operation

_user_id: TypeAdapter[str] = TypeAdapter(UserId)

# An ARN is at most 2,048 characters (IAM's own limit on a role ARN with its path).
MAX_REQUESTER_CHARS = 2048


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


def printable(text: str) -> str:
    """``text`` with control, format and surrogate characters written as ``\\uXXXX`` escapes."""
    if text.isprintable():
        return text
    return "".join(f"\\u{ord(ch):04x}" if unicodedata.category(ch) in ("Cc", "Cf", "Cs") else ch for ch in text)


@dataclasses.dataclass(frozen=True)
class Caller:
    """Who calls (see the module's docstring). ``door`` is what the history records as the source
    of a change ("api", "mcp", "cli"; None in-process); ``requested_by`` what an erasure receipt
    records."""

    door: str | None = None
    user: str | None = None
    requested_by: str = "service"

    @classmethod
    def for_request(cls, claims: Mapping[str, Any] | None, *, iam_arn: object = None, door: str = "api") -> Caller:
        """An HTTP request's caller: with JWT claims (even none: a token without a ``sub``) the
        token's user; without, a trusted backend (the IAM principal that signed, if any)."""
        if claims is not None:
            return cls(door=door, user=token_user_id(claims.get("sub")), requested_by="user")
        if isinstance(iam_arn, str) and iam_arn:
            return cls(door=door, requested_by=printable(iam_arn)[:MAX_REQUESTER_CHARS])
        return cls(door=door, requested_by=door)

    def user_for(self, op: Operation[Any, Any], requested: str | None) -> str | None:
        """The user this call acts for: Forbidden when the caller may not make it, InvalidInput
        when a trusted caller names no user where one is needed."""
        if op.access == "trusted":
            if self.user is not None:
                raise Forbidden(f"{op.name}: a caller acting for one user may not call this (a trusted caller may)")
            return None
        if self.user is not None:
            if requested is not None and requested != self.user:
                raise Forbidden("user_id is not the authenticated user; a token only acts for its own 'sub'")
            return self.user
        if requested is None:
            if op.access == "any":
                return None
            raise InvalidInput("user_id is required (the request carries no JWT identity)", field="user_id")
        return requested

"""Cursors of the paged listing: opaque to callers, the last row's (created_at, id) inside."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import uuid
from collections.abc import Sequence

from pydantic import BaseModel

from rushmem_contract.errors import InvalidInput
from rushmem_contract.models import MAX_PAGE_BYTES, MemoryRecord


def lambda_bytes(item: BaseModel) -> int:
    """An item's bytes in Lambda's result: the API's JSON (ASCII, as Powertools writes it: a 4-byte
    character is 12), escaped again as part of the body string (14)."""
    return len(json.dumps(json.dumps(item.model_dump(mode="json"), separators=(",", ":"))))


def fitting(items: Sequence[BaseModel], budget: int = MAX_PAGE_BYTES) -> int:
    """How many of ``items``, from the first, fit in ``budget`` bytes as they travel in Lambda's
    result (their JSON, escaped again as part of the body string); at least one, so a page always
    moves on (one item is far below the budget under the content and metadata limits)."""
    used = 0
    for count, item in enumerate(items):
        used += lambda_bytes(item) + 1  # and the comma between items
        if used > budget:
            return max(count, 1)
    return len(items)


def encode_cursor(last: MemoryRecord) -> str:
    raw = json.dumps([last.created_at.isoformat(), str(last.id)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[dt.datetime, uuid.UUID]:
    """The (created_at, id) inside a cursor; InvalidInput (field ``cursor``) for anything that is
    not one this service returned, whatever its bytes, its JSON or the types inside."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
    except (ValueError, TypeError, RecursionError, binascii.Error):  # undecodable, not JSON, nested deep
        raise _not_ours() from None
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        raise _not_ours()
    try:
        created_at = dt.datetime.fromisoformat(value[0])
        if created_at.tzinfo is None:
            created_at = created_at.replace(tzinfo=dt.UTC)
        return created_at.astimezone(dt.UTC), uuid.UUID(value[1])
    except (ValueError, OverflowError):
        raise _not_ours() from None


def encode_history_cursor(at: dt.datetime, event_id: int) -> str:
    """A history page's cursor: its last event's (at, id)."""
    raw = json.dumps([at.isoformat(), event_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_history_cursor(cursor: str) -> tuple[dt.datetime, int]:
    """The (at, event id) inside a history cursor; InvalidInput (field ``cursor``) otherwise."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = json.loads(raw)
    except (ValueError, TypeError, RecursionError, binascii.Error):
        raise _not_ours() from None
    if not (
        isinstance(value, list)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], int)
        and not isinstance(value[1], bool)
        and 0 < value[1] < 2**63
    ):
        raise _not_ours()
    try:
        at = dt.datetime.fromisoformat(value[0])
    except (ValueError, OverflowError):
        raise _not_ours() from None
    return (at if at.tzinfo is not None else at.replace(tzinfo=dt.UTC)), value[1]


def _not_ours() -> InvalidInput:
    return InvalidInput("cursor is not one this service returned", field="cursor")

"""Cursors of the paged listing: opaque to callers, the last row's (created_at, id) inside."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import uuid

from agent_memory_contract.errors import InvalidInput
from agent_memory_contract.models import MemoryRecord


def encode_cursor(last: MemoryRecord) -> str:
    raw = json.dumps([last.created_at.isoformat(), str(last.id)]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[dt.datetime, uuid.UUID]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, memory_id = json.loads(raw)
        return dt.datetime.fromisoformat(created_at), uuid.UUID(memory_id)
    except (ValueError, TypeError, binascii.Error) as exc:
        raise InvalidInput("cursor is not one this service returned", field="cursor") from exc

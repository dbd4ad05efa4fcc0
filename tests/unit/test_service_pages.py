"""Pagination cursors (agent_memory.service.pages): a cursor goes round, garbage names the field."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from agent_memory.service.pages import decode_cursor, encode_cursor
from agent_memory_contract.errors import InvalidInput
from agent_memory_contract.models import MemoryRecord


def test_cursor_round_trip_and_garbage() -> None:
    at = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    last = MemoryRecord(
        id=uuid.uuid4(),
        user_id="u",
        project_id=None,
        content="x",
        category="fact",
        is_evergreen=False,
        created_at=at,
        updated_at=at,
    )
    assert decode_cursor(encode_cursor(last)) == (at, last.id)
    with pytest.raises(InvalidInput) as err:
        decode_cursor("not-a-cursor")
    assert err.value.field == "cursor"

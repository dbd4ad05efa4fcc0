"""Pagination cursors (rushmem.service.pages): a cursor goes round, garbage names the field."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest

from rushmem.service.pages import decode_cursor, decode_history_cursor, encode_cursor, encode_history_cursor
from rushmem_contract.errors import InvalidInput
from rushmem_contract.models import MemoryRecord


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


@pytest.mark.parametrize(
    "garbage",
    ["not-a-cursor", encode_history_cursor(dt.datetime(2026, 1, 2, tzinfo=dt.UTC), 7)[:-3], "WyJ4IiwgMV0", "WzEsIDJd"],
)
def test_history_cursor_round_trip_and_garbage(garbage: str) -> None:
    at = dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC)
    assert decode_history_cursor(encode_history_cursor(at, 12345)) == (at, 12345)
    # A list page's cursor is not a history page's.
    memory_cursor = encode_cursor(
        MemoryRecord(
            id=uuid.uuid4(),
            user_id="u",
            project_id=None,
            content="x",
            category="fact",
            is_evergreen=False,
            created_at=at,
            updated_at=at,
        )
    )
    for cursor in (garbage, memory_cursor):
        with pytest.raises(InvalidInput) as err:
            decode_history_cursor(cursor)
        assert err.value.field == "cursor"

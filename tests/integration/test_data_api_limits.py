"""The largest memories the service accepts, through the RDS Data API stand-in (which refuses a row
over 64 KB and an answer over 1 MiB, as the Data API does): each is written, edited, listed,
recalled, exported and its history read, and every answer a Lambda would send stays under 6 MB."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from rushmem.config import Settings
from rushmem.service import Memory, pages
from rushmem_contract.errors import InputTooLarge
from rushmem_contract.instructions import MAX_INSTRUCTIONS_CHARS, MAX_INSTRUCTIONS_JSON_CHARS, MAX_PHRASE_CHARS
from rushmem_contract.models import LAMBDA_RESPONSE_BYTES, MAX_CONTENT_CHARS, MAX_METADATA_CHARS, metadata_chars
from tests.support.data_api import MAX_RESPONSE_BYTES, DataApiStandIn

USER = "u-largest"
COUNT = 60
# A 4-byte UTF-8 character (4 bytes in the Data API's answer, 12 in the API's ASCII JSON) and a quote
# (escaped once in a text column, twice in a jsonb one): the characters that cost the most bytes.
HEAVY = ("😀", "𝄞", '"')


def _content(i: int, alphabet: str) -> str:
    head = f"Fact {i} about the user: "
    body = (alphabet * MAX_CONTENT_CHARS)[: MAX_CONTENT_CHARS - len(head)]
    return head + body


def _metadata(i: int, alphabet: str) -> dict[str, object]:
    """Metadata of exactly MAX_METADATA_CHARS characters as the limit counts them."""
    note = ""
    for ch in alphabet * MAX_METADATA_CHARS:
        if metadata_chars({"n": i, "note": note + ch}) > MAX_METADATA_CHARS:
            break
        note += ch
    assert metadata_chars({"n": i, "note": note}) >= MAX_METADATA_CHARS - 1
    return {"n": i, "note": note}


@pytest.fixture
def largest(data_api_settings: Settings) -> Iterator[Memory]:
    """The service through the stand-in with its limits at their ceilings."""
    settings = data_api_settings.model_copy(
        update={"max_memory_chars": MAX_CONTENT_CHARS, "max_metadata_chars": MAX_METADATA_CHARS}
    )
    service = Memory(settings)
    yield service
    service.close()


@pytest.mark.parametrize("alphabet", ["😀", '𝄞"', "é\"'\\"], ids=["emoji", "clef-and-quotes", "latin-escapes"])
def test_the_largest_memories_fit_a_row_and_every_page(
    largest: Memory, data_api: DataApiStandIn, alphabet: str
) -> None:
    data_api.refused.clear()
    data_api.response_bytes.clear()
    written = {_content(i, alphabet): _metadata(i, alphabet) for i in range(COUNT)}
    ids: list[str] = []
    items = [{"content": c, "metadata": m} for c, m in written.items()]
    for start in range(0, COUNT, 20):
        ids += [str(i) for i in largest.add(items[start : start + 20], user_id=USER).ids]
    assert len(ids) == COUNT
    # An edit of content and metadata: its "updated" event holds the new content, the previous
    # content and the previous metadata in one row.
    edited = largest.update(
        ids[0], content=_content(1000, alphabet[::-1]), metadata=_metadata(1000, alphabet[::-1]), user_id=USER
    )
    assert edited.content == _content(1000, alphabet[::-1])

    listed, cursor = [], None
    while True:
        page = largest.list(user_id=USER, limit=100, cursor=cursor)
        assert pages.lambda_bytes(page) < LAMBDA_RESPONSE_BYTES
        listed += page.memories
        cursor = page.next_cursor
        if not cursor:
            break
    assert len(listed) == COUNT
    assert all(m.metadata == written[m.content] for m in listed if m.content in written)
    assert sum(m.content in written for m in listed) == COUNT - 1  # all but the edited one, as written

    lines, cursor = [], None
    while True:
        exported = largest.export(user_id=USER, history=True, limit=100, cursor=cursor)
        assert pages.lambda_bytes(exported) < LAMBDA_RESPONSE_BYTES
        lines += exported.lines
        cursor = exported.next_cursor
        if not cursor:
            break
    assert len(lines) == COUNT + 1  # and the version the edit replaced

    history = largest.history(ids[0], user_id=USER)
    assert [e.event for e in history.events][-1] == "updated" and pages.lambda_bytes(history) < LAMBDA_RESPONSE_BYTES

    recalled = largest.recall("Fact about the user", user_id=USER, limit=50)
    assert recalled.memories and pages.lambda_bytes(recalled) < LAMBDA_RESPONSE_BYTES
    assert all(m.content.startswith("Fact ") for m in recalled.memories)

    # No answer was ever refused: each read of large rows is cut by its bytes in SQL (and a page
    # carries on in a statement of its own; recall keeps its best candidates that fit).
    assert data_api.refused == []
    assert max(data_api.response_bytes) <= MAX_RESPONSE_BYTES
    print(
        f"\n{alphabet!r}: largest answer {max(data_api.response_bytes) / 1024:.0f} KiB, "
        f"requests {len(data_api.response_bytes)}, recall kept {len(recalled.memories)} of 50"
    )


def _largest_instructions(ch: str) -> dict[str, Any]:
    """Extraction instructions of every part, cut to MAX_INSTRUCTIONS_JSON_CHARS in all."""
    phrase = (f"topic {ch}" * MAX_PHRASE_CHARS)[:MAX_PHRASE_CHARS]
    parts: dict[str, Any] = {
        "instructions": (f"Keep {ch}" * MAX_INSTRUCTIONS_CHARS)[:MAX_INSTRUCTIONS_CHARS],
        "keep": [phrase] * 30,
        "ignore": [phrase] * 30,
        "categories": [{"name": f"c{i}", "description": phrase, "keywords": [phrase] * 5} for i in range(5)],
    }
    for key in ("keep", "ignore"):
        while metadata_chars(parts) > MAX_INSTRUCTIONS_JSON_CHARS and parts[key]:
            parts[key].pop()
    return parts


def test_the_largest_instructions_fit_a_row_and_a_history_answer(largest: Memory, data_api: DataApiStandIn) -> None:
    """Each part of a project's instructions has its limit; together they could make a version of
    ~95,000 characters, a row the Data API would never return. All together they are bounded too."""
    data_api.refused.clear()
    parts = _largest_instructions("😀")
    assert MAX_INSTRUCTIONS_JSON_CHARS - 250 < metadata_chars(parts) <= MAX_INSTRUCTIONS_JSON_CHARS
    for version in range(1, 4):
        stored = largest.set_instructions(**parts, user_id=USER, project_id="p")
        assert stored.version == version
    assert largest.get_instructions(user_id=USER, project_id="p").instructions.keep == parts["keep"]
    history = largest.instructions_history(user_id=USER, project_id="p")
    assert [v.version for v in history.versions] == [1, 2, 3]
    assert "row" not in data_api.refused
    with pytest.raises(InputTooLarge) as refused:
        largest.set_instructions(
            **{**parts, "keep": [*parts["keep"], "x" * MAX_PHRASE_CHARS]}, user_id=USER, project_id="p"
        )
    assert refused.value.field == "instructions" and "characters as JSON" in str(refused.value)


def test_without_the_bound_the_largest_instructions_are_a_row_the_data_api_refuses(
    largest: Memory, data_api: DataApiStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the bound prevents: every part at its own limit is a version the Data API cannot return,
    so its write fails (its RETURNING row is refused), a 5xx for input each part's limit accepted."""
    from rushmem.service import instructing

    monkeypatch.setattr(instructing, "MAX_INSTRUCTIONS_JSON_CHARS", 10**6)
    phrase = "😀" * MAX_PHRASE_CHARS
    categories = [{"name": f"c{i}", "keywords": [phrase] * 20} for i in range(3)]
    data_api.refused.clear()
    with pytest.raises(Exception, match="64 KB"):
        largest.set_instructions(
            instructions="😀" * MAX_INSTRUCTIONS_CHARS,
            keep=[phrase] * 30,
            ignore=[phrase] * 30,
            categories=categories,
            user_id=USER,
        )
    assert data_api.refused == ["row"]


def test_the_largest_pending_writes_are_listed_without_a_refused_answer(
    data_api_settings: Settings, data_api: DataApiStandIn
) -> None:
    """Writes held for review (an untrusted source) of the largest content: 60 of them are ~1.2 MB
    of 4-byte characters, more than one Data API answer; listed whole, oldest first, none refused."""
    settings = data_api_settings.model_copy(
        update={"max_memory_chars": MAX_CONTENT_CHARS, "max_metadata_chars": MAX_METADATA_CHARS}
    )
    with Memory(settings, review_writes=True, untrusted_sources="mcp") as service:
        items = [{"content": _content(i, "😀")} for i in range(COUNT)]
        held = [
            p for s in range(0, COUNT, 20) for p in service.add(items[s : s + 20], user_id=USER, source="mcp").pending
        ]
        assert len(held) == COUNT
        data_api.refused.clear()
        data_api.response_bytes.clear()
        listed = service.pending(user_id=USER).memories
    assert sorted(p.content for p in listed) == sorted(i["content"] for i in items)
    assert data_api.refused == [] and max(data_api.response_bytes) <= MAX_RESPONSE_BYTES

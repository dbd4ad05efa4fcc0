"""Pages within Lambda's 6 MB answer: a user whose memories carry large (allowed) metadata gets list
and export pages bounded by bytes as well as by count, the cursor carrying on to the last memory;
`rushmem serve` refuses an answer over 6 MB as Lambda does (502), so this is what a deployed
stack would do."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator

import pytest

from rushmem_client import MemoryClient
from rushmem_contract.models import LAMBDA_RESPONSE_BYTES, MAX_CONTENT_CHARS, MAX_METADATA_CHARS, metadata_chars
from tests.support.recall import serving

USER = "u-large"
COUNT = 160


@pytest.fixture
def served(lambda_env: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("AGENT_MEMORY_MAX_MEMORY_CHARS", str(MAX_CONTENT_CHARS))  # the ceiling
    with serving(unverified_jwt=False) as url:
        yield url


def _large(i: int) -> dict[str, object]:
    # Content and metadata at the write ceilings (MAX_CONTENT_CHARS characters; MAX_METADATA_CHARS
    # as JSON), of what costs Lambda's result the most: a 4-byte character is 14 bytes there (its
    # ASCII escape, escaped again), a quote 4.
    content = f"Memory {i}: " + '"\U0001f600' * MAX_CONTENT_CHARS
    notes = [f"{i}-{j} " + "\U0001f600" * 90 for j in range(MAX_METADATA_CHARS // 90)]
    while metadata_chars({"notes": notes}) > MAX_METADATA_CHARS:
        notes.pop()
    return {"content": content[:MAX_CONTENT_CHARS], "metadata": {"notes": notes}}


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()


def test_list_and_export_pages_stay_under_6_mb_and_the_cursor_carries_on(served: str) -> None:
    with MemoryClient(served) as client:
        for start in range(0, COUNT, 20):
            client.add([_large(i) for i in range(start, start + 20)], user_id=USER)
    # What one page of 500 would hold, as the Lambda result escapes it: well over 6 MB.
    status, body = _get(f"{served}/memories?user_id={USER}&limit=500")
    assert status == 200, body[:200]
    first = json.loads(body)
    assert first["next_cursor"] and len(first["memories"]) < COUNT
    assert len(json.dumps(body.decode())) < LAMBDA_RESPONSE_BYTES
    everything = sum(len(json.dumps(json.dumps(m))) for m in first["memories"]) * COUNT / len(first["memories"])
    assert everything > LAMBDA_RESPONSE_BYTES  # the unbounded page would have been refused
    print(
        f"\nlist limit 500: {len(first['memories'])} of {COUNT} on the first page, "
        f"{len(json.dumps(body.decode())) / 2**20:.2f} MiB in Lambda's result; unbounded ~{everything / 2**20:.2f} MiB"
    )
    seen = [m["id"] for m in first["memories"]]
    cursor = first["next_cursor"]
    while cursor:
        status, body = _get(f"{served}/memories?user_id={USER}&limit=500&cursor={cursor}")
        assert status == 200 and len(json.dumps(body.decode())) < LAMBDA_RESPONSE_BYTES
        page = json.loads(body)
        seen += [m["id"] for m in page["memories"]]
        cursor = page["next_cursor"]
    assert len(seen) == len(set(seen)) == COUNT

    status, body = _get(f"{served}/memories/export?user_id={USER}&limit=500&history=true")
    assert status == 200 and len(json.dumps(body.decode())) < LAMBDA_RESPONSE_BYTES
    assert json.loads(body)["next_cursor"]
    with MemoryClient(served) as client:
        lines = list(client.pages(client.export, user_id=USER, history=True, limit=500))
    assert len({line.id for line in lines}) == COUNT


def test_serve_refuses_an_answer_over_6_mb_as_lambda_does(served: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the byte bound (as before), the same page is over the limit: serve answers 502."""
    from rushmem.service import pages

    with MemoryClient(served) as client:
        for start in range(0, COUNT, 20):
            client.add([_large(i) for i in range(start, start + 20)], user_id=USER)
    monkeypatch.setattr(pages, "fitting", lambda items, budget=0: len(items))
    status, _ = _get(f"{served}/memories?user_id={USER}&limit=500")
    assert status == 502


EDITS = 300


def test_a_memory_history_of_hundreds_of_metadata_edits_comes_in_pages_under_6_mb(
    served: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each metadata edit keeps the previous metadata in its 'updated' event: 300 edits of a memory
    with large (allowed) metadata are over 6 MB of history. Paged by bytes, every page is under it
    and the cursor reaches the last event; unpaged (the byte bound taken away) serve answers 502,
    as Lambda would have refused the answer."""
    from rushmem.service import pages

    with MemoryClient(served) as client:
        memory_id = client.add([_large(0)], user_id=USER).ids[0]
        for i in range(1, EDITS + 1):
            client.update(memory_id, metadata=_large(i)["metadata"], user_id=USER)
        status, body = _get(f"{served}/memories/{memory_id}/history?user_id={USER}")
        assert status == 200, body[:200]
        first = json.loads(body)
        assert first["next_cursor"] and len(first["events"]) < EDITS + 1
        sizes = [len(json.dumps(body.decode()))]
        events = [e["at"] for e in first["events"]]
        cursor = first["next_cursor"]
        while cursor:
            status, body = _get(f"{served}/memories/{memory_id}/history?user_id={USER}&cursor={cursor}")
            assert status == 200, body[:200]
            page = json.loads(body)
            sizes.append(len(json.dumps(body.decode())))
            events += [e["at"] for e in page["events"]]
            cursor = page["next_cursor"]
        assert len(events) == EDITS + 1 and events == sorted(events)  # created, then every edit, once each
        assert max(sizes) < LAMBDA_RESPONSE_BYTES
        assert sum(sizes) > LAMBDA_RESPONSE_BYTES  # the whole history in one answer would not fit
        assert len(list(client.pages(client.history, memory_id, user_id=USER))) == EDITS + 1  # cursor followed
        print(
            f"\nhistory of {EDITS + 1} events: {len(sizes)} pages, largest {max(sizes) / 2**20:.2f} MiB, "
            f"all {sum(sizes) / 2**20:.2f} MiB in Lambda's results"
        )
    monkeypatch.setattr(pages, "fitting", lambda items, budget=0: len(items))
    status, _ = _get(f"{served}/memories/{memory_id}/history?user_id={USER}")
    assert status == 502


CHANGES = 400
CONTENT_CHARS = 2_000  # the default longest content (AGENT_MEMORY_MAX_MEMORY_CHARS)


def test_the_largest_memory_changed_hundreds_of_times_still_exports_with_its_history(
    served: str, database_url: str
) -> None:
    """A memory at the write limits (2,000 characters of content, 4,000 of metadata) whose metadata
    was changed 400 times has ~7 MB of history in Lambda's result (each 'updated' event answers the
    content and the whole previous metadata; a content change keeps the previous version as a
    memory of its own). Its export line carries its history from the
    first event up to EXPORT_HISTORY_BYTES and the cursor of the rest, which the history pages
    give to the last event: every answer under Lambda's 6 MB (unbounded, the export answered 502).
    Stored, an event keeps only the key that changed (a whole copy every 32nd)."""
    import psycopg

    from rushmem_contract.models import EXPORT_HISTORY_BYTES, MAX_METADATA_CHARS

    def content(i: int) -> str:
        return (f'Version {i}: "quoted" ' * 2_000)[:CONTENT_CHARS].strip()

    def metadata(i: int) -> dict[str, object]:
        # Forty notes, one of which changes each time; as JSON just under the limit.
        notes: dict[str, object] = {f"n{j:02d}": f"note {j} " * 12 for j in range(40)}
        notes["n00"] = f"v{i} " * 20
        while metadata_chars(notes) > MAX_METADATA_CHARS - 20:
            notes.popitem()
        return notes

    with MemoryClient(served) as client:
        memory_id = client.add([{"content": content(0), "metadata": metadata(0)}], user_id=USER).ids[0]
        for i in range(1, CHANGES + 1):
            client.update(memory_id, metadata=metadata(i), user_id=USER)
        status, body = _get(f"{served}/memories/export?user_id={USER}&history=true&limit=1")
        assert status == 200, body[:200]
        assert len(json.dumps(body.decode())) < LAMBDA_RESPONSE_BYTES
        (line,) = json.loads(body)["lines"]
        assert line["id"] == str(memory_id) and line["metadata"] == metadata(CHANGES)
        kept = line["history"]
        assert kept[0]["event"] == "created" and 1 < len(kept) < CHANGES + 1
        assert sum(len(e["content"]) + len(json.dumps(e["detail"])) for e in kept) <= EXPORT_HISTORY_BYTES
        # The rest: the history pages from the line's cursor, to the last change.
        rest, cursor = [], line["history_cursor"]
        while cursor is not None:
            page = client.history(memory_id, user_id=USER, cursor=cursor)
            rest += page.events
            cursor = page.next_cursor
        events = [e["at"] for e in kept] + [e.at.isoformat() for e in rest]
        assert len(events) == CHANGES + 1 and len(set(events)) == CHANGES + 1
        assert rest[-1].detail["previous"]["metadata"] == metadata(CHANGES - 1)
        assert [e["detail"]["previous"]["metadata"] for e in kept[1:]] == [metadata(i) for i in range(len(kept) - 1)]
        # Without history the same line has none and no cursor.
        status, body = _get(f"{served}/memories/export?user_id={USER}&limit=1")
        (plain,) = json.loads(body)["lines"]
        assert plain.get("history") is None and plain.get("history_cursor") is None
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT sum(octet_length(detail::text)) FROM memory_events WHERE memory_id = %s", [memory_id]
        ).fetchone()
    stored = int(row[0]) if row else 0
    answered = sum(len(json.dumps(e["detail"])) for e in kept) + sum(len(json.dumps(e.detail)) for e in rest)
    print(f"{CHANGES} metadata edits: {stored} bytes of detail stored, {answered} answered")
    assert stored * 5 < answered  # each whole copy was stored: as many bytes as answered

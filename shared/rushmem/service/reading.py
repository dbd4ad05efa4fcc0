"""Reads: pages of memories, one memory, export, history; on the reader endpoint when one is
configured (see :mod:`rushmem.store.engine.readers`)."""

from __future__ import annotations

import uuid

from rushmem.service import pages
from rushmem.service.base import Collaborators
from rushmem.service.context import Context
from rushmem.store.memories import catalog, edits
from rushmem.store.memories.scope import Scope
from rushmem_contract.errors import NotFound
from rushmem_contract.models import (
    ExportPage,
    MemoryEvent,
    MemoryPage,
    MemoryRecord,
    export_line,
)
from rushmem_contract.schemas import ExportRequest, GetRequest, HistoryRequest, ListRequest, MemoryHistory


def list_memories(parts: Collaborators, request: ListRequest, ctx: Context) -> MemoryPage:
    """A page of the user's memories (those matching the filters), newest first, and the cursor
    of the next page; with ``as_of``, those true then (valid time)."""
    user_id, limit = ctx.user, request.limit
    after = pages.decode_cursor(request.cursor) if request.cursor else None
    scope = Scope(
        user_id,
        request.project_id,
        include_inactive=request.include_inactive,
        filters=request.filters,
        as_of=request.as_of,
    )
    found = parts.reads.run(
        lambda conn: catalog.list_memories(conn, scope, limit=limit + 1, after=after),
        consistency=request.consistency,
        user_id=user_id,
    )
    # Bounded by bytes too (Lambda's 6 MB answer): a page of large memories ends early and its
    # cursor carries on from its last memory.
    kept = pages.fitting(found[:limit])
    more = len(found) > kept
    next_cursor = pages.encode_cursor(found[kept - 1]) if more else None
    return MemoryPage(memories=found[:kept], next_cursor=next_cursor)


def get(parts: Collaborators, request: GetRequest, ctx: Context) -> MemoryRecord:
    """The user's memory with this id, live or not; NotFound when the user has none (another
    user's id looks the same as no memory at all)."""
    user_id = ctx.user
    found: MemoryRecord | None = parts.reads.run(
        lambda conn: edits.get_memory(conn, user_id, request.memory_id),
        consistency=request.consistency,
        user_id=user_id,
    )
    if found is None:
        raise NotFound("no memory with this id for this user")
    return found


def export(parts: Collaborators, request: ExportRequest, ctx: Context) -> ExportPage:
    """A page of everything the user has (superseded and expired memories too), newest first,
    as import lines (an import restores them: same ids, timestamps and recall); with ``history``,
    each line carries its memory's recorded changes. With ``as_of``, only the memories true then."""
    user_id = ctx.user
    # A listing of the request's page: every memory, or those true at as_of.
    listing = ListRequest.model_validate(
        {**request.model_dump(exclude={"history"}), "user_id": user_id, "include_inactive": request.as_of is None}
    )
    page = list_memories(parts, listing, ctx)
    events: dict[uuid.UUID, list[MemoryEvent]] = {}
    if request.history and page.memories:
        ids = [m.id for m in page.memories]
        found: list[MemoryEvent] = parts.reads.run(
            lambda conn: edits.histories(conn, user_id, ids), consistency=request.consistency, user_id=user_id
        )
        for event in found:
            events.setdefault(event.memory_id, []).append(event)
    lines = [export_line(m, events.get(m.id, []) if request.history else None) for m in page.memories]
    # Each memory's history makes its line larger than the memory: bounded again, by the lines.
    kept = pages.fitting(lines)
    if kept < len(lines):
        return ExportPage(lines=lines[:kept], next_cursor=pages.encode_cursor(page.memories[kept - 1]))
    return ExportPage(lines=lines, next_cursor=page.next_cursor)


def history(parts: Collaborators, request: HistoryRequest, ctx: Context) -> MemoryHistory:
    """A page of the recorded changes of one memory (or of all the user's), oldest first: at most
    ``limit`` events and MAX_PAGE_BYTES of them, as a Lambda answer holds them (a few hundred
    metadata edits of one memory pass 6 MB), ``next_cursor`` carrying on. NotFound for a memory
    with no history for this user (another user's memory and none at all answer the same)."""
    user_id, limit = ctx.user, request.limit
    after = pages.decode_history_cursor(request.cursor) if request.cursor is not None else None
    rows: list[tuple[int, MemoryEvent]] = parts.reads.run(
        lambda conn: catalog.history_page(conn, user_id, request.memory_id, limit=limit + 1, after=after),
        consistency=request.consistency,
        user_id=user_id,
    )
    if not rows and request.cursor is None and request.memory_id is not None:
        raise NotFound("no history for this memory and user")
    events = [event for _, event in rows[:limit]]
    kept = pages.fitting(events)
    if kept < len(rows):
        last_id, last = rows[kept - 1]
        return MemoryHistory(events=events[:kept], next_cursor=pages.encode_history_cursor(last.at, last_id))
    return MemoryHistory(events=events, next_cursor=None)

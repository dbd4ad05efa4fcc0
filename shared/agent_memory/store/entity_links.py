"""Linking the memories stored before migration 0007 to the entities they name.

SQL cannot run the extractor, so this is a Python pass as the owner (in the maintenance role):
batches of memories in id order, each batch's links and the position reached written in one
transaction (``entity_links_after`` in agent_memory_meta), so an interrupted run resumes where it
stopped. Memories written since 0007 are linked when written; linking one again changes nothing.
A run with ``restart`` walks every memory again (after the extraction rules changed, or when
writers without links ran during a deploy); it adds links, never removes one.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence

from pydantic import BaseModel

from agent_memory.config import Settings
from agent_memory.store.connection import Connection, Database
from agent_memory.store.migrate import read_meta, register_types
from agent_memory.store.transactions import maintenance_transaction
from agent_memory_contract.errors import InvalidInput, SchemaMismatch

logger = logging.getLogger(__name__)

META_KEY = "entity_links_after"
DONE = "done"

_NEXT = (
    "SELECT id, user_id, content FROM user_memories WHERE (%(after)s::uuid IS NULL OR id > %(after)s) "
    "ORDER BY id LIMIT %(limit)s"
)
_LINK = """
INSERT INTO memory_entities (user_id, entity_key, memory_id)
SELECT * FROM unnest(%(users)s::text[], %(keys)s::text[], %(ids)s::uuid[])
ON CONFLICT DO NOTHING
"""
_MARK = "UPDATE agent_memory_meta SET value = %(value)s WHERE key = %(key)s"


class EntityLinkResult(BaseModel):
    """What a run did: memories read, links written (new ones only), and whether every memory
    has been read (False: stopped by ``max_seconds``; the next run resumes)."""

    memories: int
    links: int
    done: bool


def link_batch(
    conn: Connection, *, after: uuid.UUID | None, limit: int, extract: Callable[[str], Sequence[str]]
) -> tuple[int, int, uuid.UUID | None]:
    """Link the next ``limit`` memories after ``after`` to the keys ``extract`` finds in each, and
    record the position, in one transaction: (memories read, links added, last id or None when none were left)."""
    with maintenance_transaction(conn, source="link-entities"):
        rows = conn.execute(_NEXT, {"after": after, "limit": limit}).fetchall()
        users: list[str] = []
        keys: list[str] = []
        ids: list[uuid.UUID] = []
        for memory_id, user_id, content in rows:
            for key in extract(content):
                users.append(user_id)
                keys.append(key)
                ids.append(memory_id)
        added = conn.execute(_LINK, {"users": users, "keys": keys, "ids": ids}).rowcount if ids else 0
        last = rows[-1][0] if rows else None
        finished = len(rows) < limit
        conn.execute(_MARK, {"key": META_KEY, "value": DONE if finished else str(last)})
    return len(rows), max(added, 0), last if not finished else None


def link_entities(
    settings: Settings,
    *,
    extract: Callable[[str], Sequence[str]],
    batch_size: int = 500,
    restart: bool = False,
    max_seconds: float | None = None,
    progress: Callable[[int], None] | None = None,
) -> EntityLinkResult:
    """Link the memories not linked yet (see the module's docstring); stops after ``max_seconds``
    (between batches) with ``done`` False."""
    if not 1 <= batch_size <= 10_000:
        raise InvalidInput(f"batch size must be between 1 and 10000, got {batch_size}", field="batch_size")
    admin = Database(settings, setup=register_types)
    deadline = None if max_seconds is None else time.monotonic() + max_seconds
    memories = links = 0
    try:
        conn = admin.connection()
        state = read_meta(conn).get(META_KEY)
        if state is None:
            raise SchemaMismatch("the store has no entity links yet: run `agent-memory migrate` first")
        if restart:
            with maintenance_transaction(conn, source="link-entities"):
                conn.execute(_MARK, {"key": META_KEY, "value": ""})
            state = ""
        after = uuid.UUID(state) if state not in ("", DONE) else None
        done = state == DONE
        while not done and (deadline is None or time.monotonic() < deadline):
            read, added, after = link_batch(conn, after=after, limit=batch_size, extract=extract)
            memories, links = memories + read, links + added
            done = after is None
            if progress:
                progress(memories)
    finally:
        admin.close()
    logger.info("entity links", extra={"memories": memories, "links": links, "done": done})
    return EntityLinkResult(memories=memories, links=links, done=done)

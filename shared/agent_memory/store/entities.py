"""The entity links' SQL (table memory_entities, migration 0007): which entity keys each memory
names. Written in the caller's transaction, with the memory itself."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from agent_memory.store.connection import Connection

# Nothing is fetched: in a pipelined transaction it travels with the next statement, no round
# trip of its own. An existing link stays as it is.
_LINK = """
INSERT INTO memory_entities (user_id, memory_id, entity_key)
SELECT %(user_id)s, t.memory_id, t.entity_key
FROM unnest(%(ids)s::uuid[], %(keys)s::text[]) AS t(memory_id, entity_key)
ON CONFLICT DO NOTHING
"""

_UNLINK = "DELETE FROM memory_entities WHERE user_id = %(user_id)s AND memory_id = %(id)s"


def link_entities(conn: Connection, user_id: str, links: Sequence[tuple[uuid.UUID, Sequence[str]]]) -> None:
    """Link each memory (id) to the entity keys it names, for one user."""
    pairs = [(memory_id, key) for memory_id, keys in links for key in keys]
    if pairs:
        conn.execute(_LINK, {"user_id": user_id, "ids": [p[0] for p in pairs], "keys": [p[1] for p in pairs]})


def relink_entities(conn: Connection, user_id: str, memory_id: uuid.UUID, keys: Sequence[str]) -> None:
    """Replace a memory's links (its content changed)."""
    conn.execute(_UNLINK, {"user_id": user_id, "id": memory_id})
    link_entities(conn, user_id, [(memory_id, keys)])

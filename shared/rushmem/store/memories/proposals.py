"""The SQL of consolidation's proposals (migration 0021): with review on, a run proposes its merges
and retirements here instead of applying them; a person approves (the change is applied in the
decision's transaction, once both memories are as proposed) or rejects (nothing changes, and the
pair is never proposed again). A proposal holds ids and content hashes, never text: the listing
reads the memories' current texts."""

from __future__ import annotations

import enum
import uuid
from collections.abc import Sequence
from typing import Any, Literal

from rushmem.store.engine.session import Session, oldest_first
from rushmem.store.engine.transactions import user_transaction
from rushmem.store.memories.consolidation import MERGE_SIMPLE, REFRESH_KEPT
from rushmem.store.memories.writes import supersede_memories

Action = Literal["merge", "retire"]

# Both memories live and unchanged (their hashes), and the pair neither waiting nor rejected already:
# a run that finds the same pair again proposes it once, and never after a rejection.
_PROPOSE = """
INSERT INTO consolidation_proposals
    (user_id, project_id, action, memory_id, other_id, memory_hash, other_hash, write_id)
SELECT %(user_id)s, m.project_id, %(action)s, m.id, o.id, m.content_hash, o.content_hash, %(write_id)s
FROM unnest(%(memories)s::uuid[], %(others)s::uuid[]) AS t(memory_id, other_id)
JOIN user_memories m ON m.id = t.memory_id AND m.user_id = %(user_id)s AND m.superseded_at IS NULL
JOIN user_memories o ON o.id = t.other_id AND o.user_id = %(user_id)s AND o.superseded_at IS NULL
WHERE t.memory_id <> t.other_id AND NOT EXISTS (
    SELECT 1 FROM consolidation_proposals p
    WHERE p.user_id = %(user_id)s AND p.action = %(action)s AND p.memory_id = t.memory_id
      AND p.other_id = t.other_id AND (p.decision IS NULL OR p.decision = 'rejected'))
RETURNING memory_id
"""


def propose(
    conn: Session,
    user_id: str,
    action: Action,
    pairs: Sequence[tuple[uuid.UUID, uuid.UUID]],
    *,
    write_id: uuid.UUID,
) -> int:
    """Propose each (memory, other) pair (merge the memory into the other, or retire it, superseded
    by the other) in one transaction of the user; how many are new proposals."""
    if not pairs:
        return 0
    with user_transaction(conn, user_id, source="consolidate", lock=True, write_id=write_id):
        params = {
            "user_id": user_id,
            "action": action,
            "memories": [p[0] for p in pairs],
            "others": [p[1] for p in pairs],
            "write_id": write_id,
        }
        return len(conn.execute(_PROPOSE, params).fetchall())


def rejected(conn: Session, user_id: str) -> dict[Action, set[tuple[uuid.UUID, uuid.UUID]]]:
    """The user's rejected pairs, by action: a run plans without them (another pair may stand instead)."""
    found: dict[Action, set[tuple[uuid.UUID, uuid.UUID]]] = {"merge": set(), "retire": set()}
    with user_transaction(conn, user_id):
        rows = conn.execute(
            "SELECT action, memory_id, other_id FROM consolidation_proposals "
            "WHERE user_id = %s AND decision = 'rejected'",
            [user_id],
        ).fetchall()
    for action, memory_id, other_id in rows:
        found[action].add((memory_id, other_id))
    return found


_COLUMNS = (
    "id, user_id, project_id, action, memory_id, other_id, memory_content, other_content, category, "
    "still_applies, created_at, write_id"
)
_WAITING = """
SELECT p.id, p.user_id, p.project_id, p.action, p.memory_id, p.other_id, m.content AS memory_content,
       o.content AS other_content, m.category,
       (m.superseded_at IS NULL AND o.superseded_at IS NULL AND m.content_hash = p.memory_hash
        AND o.content_hash = p.other_hash) AS still_applies,
       p.created_at, p.write_id
FROM consolidation_proposals p
JOIN user_memories m ON m.id = p.memory_id
JOIN user_memories o ON o.id = p.other_id
WHERE p.user_id = %(user_id)s AND p.decision IS NULL
  AND (%(project_id)s::text IS NULL OR p.project_id = %(project_id)s OR p.project_id IS NULL)
  AND (%(after_at)s::timestamptz IS NULL OR (p.created_at, p.id) > (%(after_at)s, %(after_id)s))
ORDER BY p.created_at, p.id LIMIT %(limit)s
"""


def list_waiting(conn: Session, user_id: str, *, project_id: str | None, limit: int) -> list[dict[str, Any]]:
    """The user's proposals waiting for a decision (with a project: its own and the user-wide),
    oldest first, with both memories' current texts and whether they are still as proposed; read
    in statements of at most a Data API answer each, as the held writes are."""
    with user_transaction(conn, user_id):
        return oldest_first(conn, _WAITING, _COLUMNS, {"user_id": user_id, "project_id": project_id}, limit=limit)


def is_proposal(conn: Session, user_id: str, proposal_id: uuid.UUID) -> bool:
    """Whether the user has a proposal with this id (waiting or decided)."""
    with user_transaction(conn, user_id):
        row = conn.execute(
            "SELECT 1 FROM consolidation_proposals WHERE user_id = %s AND id = %s", [user_id, proposal_id]
        ).fetchone()
    return row is not None


class Decided(enum.Enum):
    """What a decision on a proposal did."""

    APPLIED = "applied"  # approved: the merge or retirement is done
    REJECTED = "rejected"  # nothing changed; the pair is not proposed again
    STALE = "stale"  # approved, but a memory changed or ended since: withdrawn, nothing changed


_TAKE = """
SELECT p.action, p.memory_id, p.other_id, p.decision,
       (m.superseded_at IS NULL AND o.superseded_at IS NULL AND m.content_hash = p.memory_hash
        AND o.content_hash = p.other_hash) AS still_applies
FROM consolidation_proposals p
JOIN user_memories m ON m.id = p.memory_id
JOIN user_memories o ON o.id = p.other_id
WHERE p.user_id = %(user_id)s AND p.id = %(id)s
FOR UPDATE OF p
"""

_CLOSE = """
UPDATE consolidation_proposals SET decision = %(decision)s, decided_at = now(), decided_by = %(source)s
WHERE user_id = %(user_id)s AND id = %(id)s
"""


def decide(
    conn: Session,
    user_id: str,
    proposal_id: uuid.UUID,
    *,
    approve: bool,
    source: str | None,
    write_id: uuid.UUID,
) -> tuple[Decided | str, uuid.UUID | None]:
    """Decide a proposal in one transaction of the user (their writers wait): approved, the merge
    or retirement is applied in it when both memories are still live and unchanged (else the
    proposal is withdrawn and nothing changes); rejected, only the decision is recorded. Returns
    what happened and the memory kept (the other one); a proposal decided before returns its
    decision ('approved', 'rejected', 'withdrawn') and nothing changes; ("", None): no such proposal."""
    with user_transaction(conn, user_id, source=source, lock=True, write_id=write_id):
        row = conn.execute_dicts(_TAKE, {"user_id": user_id, "id": proposal_id}).fetchone()
        if row is None:
            return "", None
        if row["decision"] is not None:
            return str(row["decision"]), None
        kept: uuid.UUID = row["other_id"]
        close = {"user_id": user_id, "id": proposal_id, "source": source}
        if not approve:
            conn.execute(_CLOSE, close | {"decision": "rejected"})
            return Decided.REJECTED, None
        if not row["still_applies"]:
            conn.execute(_CLOSE, close | {"decision": "withdrawn"})
            return Decided.STALE, None
        pair = {"user_id": user_id, "dups": [row["memory_id"]], "keeps": [kept]}
        if row["action"] == "merge":
            # In the history as consolidation's own merge ('merged'); a retirement is 'superseded'.
            conn.execute("SELECT set_config('agent_memory.change_reason', 'merged', true)")
            conn.execute(MERGE_SIMPLE, pair).fetchall()
            conn.execute(REFRESH_KEPT, pair)
        else:
            supersede_memories(conn, user_id, [(row["memory_id"], kept)])
        conn.execute(_CLOSE, close | {"decision": "approved"})
    return Decided.APPLIED, kept

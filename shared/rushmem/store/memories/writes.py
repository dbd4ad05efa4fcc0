"""The write path's SQL: upserts with duplicate folding, near-duplicate refreshes and supersession
(one ingest message's write, with its receipt, is :mod:`rushmem.store.memories.messages`).

Every write runs in the user's locked transaction (:func:`rushmem.store.engine.transactions.user_transaction`):
the near-duplicate check reads before it writes, so one user's writers take turns.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from rushmem.records import DependsOn, MemoryRow, Neighbour, NeighbourRule, WriteOutcome
from rushmem.store.accounts.usage import add_usage
from rushmem.store.engine.session import Rows, Session, bounded, cut
from rushmem.store.engine.transactions import user_transaction
from rushmem.usage import UsageRow
from rushmem_contract.errors import InvalidInput, SchemaMismatch

# Arrays of vectors travel in binary (%(...)b): as text, ten 384-d vectors take ~6 ms to
# format and parse (float by float), more than all the rest of writing them.
UPSERT = """
INSERT INTO user_memories AS m (user_id, project_id, content, content_hash, category, source,
                                is_evergreen, embedding, created_at, updated_at, expires_at, metadata, injection,
                                valid_from)
SELECT t.user_id, t.project_id, t.content, t.content_hash, t.category, t.source, t.is_evergreen,
       t.embedding, COALESCE(t.created_at, t.observed_at, now()), COALESCE(t.observed_at, t.created_at, now()),
       t.expires_at, t.metadata, string_to_array(t.injection, ','),
       COALESCE(t.valid_from, t.created_at, t.observed_at, now())
FROM unnest(%(user_ids)s::text[], %(project_ids)s::text[], %(contents)s::text[], %(hashes)s::bytea[],
            %(categories)s::text[], %(sources)s::text[], %(evergreen)s::boolean[], %(embeddings)b::vector[],
            %(created)s::timestamptz[], %(observed)s::timestamptz[], %(expires)s::timestamptz[],
            %(metadata)s::jsonb[], %(injection)s::text[], %(valid_from)s::timestamptz[])
     AS t(user_id, project_id, content, content_hash, category, source, is_evergreen, embedding,
          created_at, observed_at, expires_at, metadata, injection, valid_from)
ON CONFLICT ON CONSTRAINT user_memories_fact_key DO UPDATE SET
    -- The marks of the text as read now (the same text: the same marks, unless detection changed).
    injection     = EXCLUDED.injection,
    -- A restated fact is fresh again; a redelivered one (same time) changes nothing.
    updated_at    = GREATEST(m.updated_at, EXCLUDED.updated_at),
    is_evergreen  = m.is_evergreen OR EXCLUDED.is_evergreen,
    metadata      = m.metadata || EXCLUDED.metadata,
    -- A fact that had ended (superseded or expired) and is stated again lives again, with the
    -- new expiry; a live fact keeps its expiry unless the restatement brings one.
    expires_at    = CASE WHEN m.superseded_at IS NOT NULL OR m.expires_at <= now() THEN EXCLUDED.expires_at
                         ELSE COALESCE(EXCLUDED.expires_at, m.expires_at) END,
    -- ... and is true again from the restatement's time.
    valid_from    = CASE WHEN m.superseded_at IS NOT NULL THEN EXCLUDED.valid_from ELSE m.valid_from END,
    valid_until   = NULL,
    superseded_at = NULL,
    superseded_by = NULL,
    -- The same fact stated again holds again, whatever it followed from (0023).
    stale_at      = NULL,
    stale_because = NULL,
    stale_reason  = NULL
RETURNING m.id, m.user_id, m.project_id, m.content_hash, (m.xmax = 0) AS inserted
"""
UPSERT_RESULT = ("uuid", "text", "text", "bytea", "boolean")  # its columns' types

# The few nearest live memories in the same scope (for a user-wide row, in every project: a
# user-wide correction is one for every project), with their text and scope: the ingest step's rule
# (rushmem.records.NeighbourRule) decides which one (if any) the new row restates or updates.
NEAREST_EXISTING = """
SELECT i.ord, n.id, n.content, n.valid_from, 1 - n.distance AS similarity, n.project_id
FROM unnest(%(embeddings)b::vector[], %(project_ids)s::text[], %(hashes)s::bytea[])
     WITH ORDINALITY AS i(embedding, project_id, content_hash, ord)
CROSS JOIN LATERAL (
    -- A dense user's nearest through their partition's HNSW index (migration 0013), anyone
    -- else's exactly; the other branch is skipped by its one-time filter. A project's row meets its
    -- project's and the user-wide memories (the rule says which it may end); a user-wide row every
    -- project's. One more than wanted: the live exact duplicate, if near, is left out below.
    SELECT c.id, u.content, u.valid_from, c.distance, u.project_id FROM (
        (SELECT m.id, m.embedding <=> i.embedding AS distance
         FROM dense_memories m
         WHERE m.user_id = %(user_id)s
           AND (m.project_id IS NOT DISTINCT FROM i.project_id OR i.project_id IS NULL OR m.project_id IS NULL)
           AND m.superseded_at IS NULL
           AND EXISTS (SELECT FROM agent_memory_dense_users d WHERE d.user_id = %(user_id)s AND d.ready)
         ORDER BY m.embedding <=> i.embedding
         LIMIT %(neighbours)s + 1)
        UNION ALL
        (SELECT m.id, m.embedding <=> i.embedding AS distance
         FROM user_memories m
         WHERE m.user_id = %(user_id)s
           AND (m.project_id IS NOT DISTINCT FROM i.project_id OR i.project_id IS NULL OR m.project_id IS NULL)
           AND m.superseded_at IS NULL
           AND NOT EXISTS (SELECT FROM agent_memory_dense_users d WHERE d.user_id = %(user_id)s AND d.ready)
         ORDER BY m.embedding <=> i.embedding
         LIMIT %(neighbours)s + 1)
    ) c
    JOIN user_memories u ON u.user_id = %(user_id)s AND u.id = c.id
    WHERE u.content_hash <> i.content_hash
    ORDER BY c.distance
    LIMIT %(neighbours)s
) n
WHERE 1 - n.distance >= %(threshold)s
  -- A live exact duplicate is the upsert's (it keeps its own bookkeeping); a superseded one is
  -- revived by the upsert, and may then supersede what replaced it.
  AND NOT EXISTS (
      SELECT 1 FROM user_memories e
      WHERE e.user_id = %(user_id)s AND e.content_hash = i.content_hash
        AND e.project_id IS NOT DISTINCT FROM i.project_id AND e.superseded_at IS NULL
  )
ORDER BY i.ord, n.distance
"""
# Neighbours read per new row: a handful is enough (the same fact or slot scores near the top).
NEIGHBOURS = 8

# A restatement (near duplicate, or what the LLM marked as one): fresher, and it may bring an
# expiry (as the upsert's conflict branch does for exact duplicates).
_REFRESH = """
UPDATE user_memories AS m SET
    updated_at = GREATEST(m.updated_at, COALESCE(t.observed_at, now())),
    metadata   = m.metadata || t.metadata,
    expires_at = COALESCE(t.expires_at, m.expires_at),
    stale_at = NULL, stale_because = NULL, stale_reason = NULL
FROM unnest(%(ids)s::uuid[], %(observed)s::timestamptz[], %(metadata)s::jsonb[], %(expires)s::timestamptz[])
     AS t(id, observed_at, metadata, expires_at)
WHERE m.id = t.id AND m.user_id = %(user_id)s
"""

# The old version stops being true when the new one starts (never before it started itself).
_SUPERSEDE = """
UPDATE user_memories AS m SET superseded_at = now(), superseded_by = t.new_id,
                              valid_until = GREATEST(m.valid_from, n.valid_from)
FROM unnest(%(old)s::uuid[], %(new)s::uuid[]) AS t(old_id, new_id)
JOIN user_memories n ON n.id = t.new_id AND n.user_id = %(user_id)s
WHERE m.id = t.old_id AND m.user_id = %(user_id)s AND m.superseded_at IS NULL AND t.old_id <> t.new_id
RETURNING m.id, t.new_id
"""

# What the written memories follow from, added to what they named before (in order, once each).
_LINK = """
UPDATE user_memories AS m
SET depends_on = ARRAY(SELECT d FROM unnest(m.depends_on || string_to_array(t.deps, ',')::uuid[])
                                      WITH ORDINALITY AS u(d, o)
                       WHERE d <> m.id GROUP BY d ORDER BY min(o))
FROM unnest(%(ids)s::uuid[], %(deps)s::text[]) AS t(id, deps)
WHERE m.id = t.id AND m.user_id = %(user_id)s
"""

# The targets a caller names in ``supersedes`` (any state), locked until commit.
_NAMED_TARGETS = """
SELECT id, project_id, superseded_by FROM user_memories
WHERE user_id = %(user_id)s AND id = ANY(%(ids)s)
ORDER BY id
FOR UPDATE
"""


def row_params(rows: Sequence[MemoryRow]) -> dict[str, Any]:
    """The rows as the arrays the write statements unnest, one per column."""
    return {
        "user_ids": [r.user_id for r in rows],
        "project_ids": [r.project_id for r in rows],
        "contents": [r.content for r in rows],
        "hashes": [r.content_hash for r in rows],
        "categories": [r.category for r in rows],
        "sources": [r.source for r in rows],
        "evergreen": [r.is_evergreen for r in rows],
        "embeddings": [r.embedding for r in rows],
        "created": [r.created_at for r in rows],
        "observed": [r.observed_at for r in rows],
        "expires": [r.expires_at for r in rows],
        "metadata": [Jsonb(r.metadata) for r in rows],
        # One string per row ("" = none): unnest cannot take an array of arrays of different lengths.
        "injection": [",".join(r.injection) for r in rows],
        "valid_from": [r.valid_from for r in rows],
    }


def upsert_memories(
    conn: Session,
    rows: Sequence[MemoryRow],
    *,
    neighbours: NeighbourRule | None = None,
    exact_only: Collection[int] = (),
    usage: Mapping[str, Sequence[UsageRow]] | None = None,
    write_id: uuid.UUID | None = None,
    supersedes: Mapping[int, Sequence[tuple[uuid.UUID, str]]] | None = None,
    commit_with: Callable[[Session, list[WriteOutcome]], None] | None = None,
    depends_on: DependsOn | None = None,
) -> list[WriteOutcome]:
    """Store rows in one transaction; outcomes in input order.

    ``usage``: per user, the counts the write adds to the user's usage, in the same transaction.
    ``write_id``: the write, recorded with every row it creates or refreshes and every history event.

    Exact duplicates (same user, project and normalised content) refresh the existing row.
    With a ``neighbours`` rule, each row's nearest live memories in its scope are read and the rule
    says which one the row restates (that one is refreshed instead) and which ones it gives a new
    value (the row's memory supersedes them), except for the rows in ``exact_only`` (a fact that
    replaces a memory must not fold into it). ``supersedes``: per row index, the
    memories the caller says it replaces, each with the request field that named it (InvalidInput
    naming that field when the user has no such memory in the row's scope, or another memory
    already replaced it). Callers pass rows already de-duplicated by hash. ``commit_with``: the
    caller's own statements, last in each user's transaction (given that user's outcomes): they
    commit with the rows, and an exception from them rolls the rows back (a review decision).
    ``depends_on``: what the rows follow from (InvalidInput naming the field when a named memory is
    not the user's current memory in the row's scope); added to what the stored memories named before.
    """
    if not rows:
        return []
    check_writable(conn)
    outcomes: dict[int, WriteOutcome] = {}
    by_user: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        by_user.setdefault(row.user_id, []).append(i)
    # One transaction per user: row-level security admits one user at a time. The
    # write path sends one user per call, so there it is one transaction per message.
    for user_id, indexes in by_user.items():
        sources = {rows[i].source for i in indexes}
        source = sources.pop() if len(sources) == 1 else None
        named = {i: list((supersedes or {}).get(i, ())) for i in indexes if (supersedes or {}).get(i)}
        with user_transaction(conn, user_id, source=source, lock=True, vectors=True, write_id=write_id):
            _check_named_targets(conn, user_id, rows, named)
            mine = _depends_of(depends_on, indexes)
            _check_dependencies(conn, user_id, rows, mine.named)
            _write_rows(conn, user_id, rows, indexes, outcomes, neighbours, {*exact_only, *named})
            if named:
                _supersede_named(conn, user_id, named, outcomes)
            if mine:
                link_dependencies(conn, user_id, mine, outcomes)
            add_usage(conn, user_id, (usage or {}).get(user_id, ()))
            if commit_with is not None:
                commit_with(conn, [outcomes[i] for i in indexes])
    return [outcomes[i] for i in range(len(rows))]


def check_writable(conn: Session) -> None:
    schema = conn.vector_schema
    if schema is not None and not schema.writable:
        raise SchemaMismatch(
            f"the store now embeds with {schema.current_model}; this process uses {schema.fingerprint} and "
            "may only read until it is redeployed with the new model (writes are refused so that nothing "
            "is stored with the wrong model; queued messages are retried)"
        )


def _check_named_targets(
    conn: Session, user_id: str, rows: Sequence[MemoryRow], named: Mapping[int, Sequence[tuple[uuid.UUID, str]]]
) -> None:
    """The memories a caller says rows supersede: the user's, visible from each row's scope."""
    if not named:
        return
    ids = sorted({target for targets in named.values() for target, _ in targets})
    found = {r[0]: r[1] for r in conn.execute(_NAMED_TARGETS, {"user_id": user_id, "ids": ids}).fetchall()}
    for i, targets in named.items():
        for target, field in targets:
            if target not in found or found[target] not in (None, rows[i].project_id):
                raise InvalidInput(f"no memory {target} for this user in this scope", field=field)


def _depends_of(depends_on: DependsOn | None, indexes: Sequence[int]) -> DependsOn:
    """The part of ``depends_on`` that concerns these rows (one user's)."""
    if not depends_on:
        return DependsOn()
    wanted = set(indexes)
    return DependsOn(
        named={i: v for i, v in depends_on.named.items() if i in wanted and v},
        within={i: v for i, v in depends_on.within.items() if i in wanted and v},
    )


def _check_dependencies(
    conn: Session, user_id: str, rows: Sequence[MemoryRow], named: Mapping[int, Sequence[tuple[uuid.UUID, str]]]
) -> None:
    """What rows follow from: the user's current memories, visible from each row's scope; InvalidInput
    naming the field otherwise (another user's memory reads as none: nothing leaks)."""
    if not named:
        return
    ids = sorted({target for targets in named.values() for target, _ in targets})
    found = {
        r[0]: (r[1], r[2])
        for r in conn.execute(
            "SELECT id, project_id, superseded_by FROM user_memories WHERE user_id = %(user_id)s AND id = ANY(%(ids)s)",
            {"user_id": user_id, "ids": ids},
        ).fetchall()
    }
    for i, targets in named.items():
        for target, field in targets:
            if target not in found or found[target][0] not in (None, rows[i].project_id):
                raise InvalidInput(f"no memory {target} for this user in this scope", field=field)
            if found[target][1] is not None:
                raise InvalidInput(
                    f"memory {target} was superseded by {found[target][1]}: name the current version", field=field
                )


def link_dependencies(conn: Session, user_id: str, depends_on: DependsOn, outcomes: Mapping[int, WriteOutcome]) -> None:
    """Record what the written memories follow from (named memories, and earlier rows' memories)."""
    deps: dict[uuid.UUID, list[uuid.UUID]] = {}
    for i, targets in depends_on.named.items():
        deps.setdefault(outcomes[i].id, []).extend(t for t, _ in targets)
    for i, earlier in depends_on.within.items():
        deps.setdefault(outcomes[i].id, []).extend(outcomes[j].id for j in earlier if j in outcomes)
    deps = {memory_id: found for memory_id, found in deps.items() if found}
    if deps:
        conn.execute(
            _LINK,
            {"ids": list(deps), "deps": [",".join(map(str, d)) for d in deps.values()], "user_id": user_id},
        )


def _supersede_named(
    conn: Session,
    user_id: str,
    named: Mapping[int, Sequence[tuple[uuid.UUID, str]]],
    outcomes: dict[int, WriteOutcome],
) -> None:
    """Close the named targets with the rows' memories; InvalidInput when one was already replaced
    by another memory (a retry of the same write, which replaced it already, is fine)."""
    pairs = [(target, outcomes[i].id) for i, targets in named.items() for target, _ in targets]
    done = set(supersede_memories(conn, user_id, pairs))
    fields = {(target, outcomes[i].id): field for i, targets in named.items() for target, field in targets}
    missed = [pair for pair in pairs if pair not in done and pair[0] != pair[1]]
    if missed:
        current = {
            r[0]: r[1]
            for r in conn.execute(
                "SELECT id, superseded_by FROM user_memories WHERE user_id = %s AND id = ANY(%s)",
                [user_id, [old for old, _ in missed]],
            ).fetchall()
        }
        for old, new in missed:
            if current.get(old) != new:
                raise InvalidInput(
                    f"memory {old} was already superseded by {current.get(old)}: name the current version",
                    field=fields[(old, new)],
                )
    for i, targets in named.items():
        ids = tuple(t for t, _ in targets if (t, outcomes[i].id) in done)
        outcomes[i] = dataclasses.replace(outcomes[i], superseded=(*outcomes[i].superseded, *ids))


def _write_rows(
    conn: Session,
    user_id: str,
    rows: Sequence[MemoryRow],
    indexes: list[int],
    outcomes: dict[int, WriteOutcome],
    neighbours: NeighbourRule | None,
    exact_only: Collection[int],
) -> None:
    """Store one user's rows (``indexes`` into ``rows``) inside that user's locked transaction,
    recording each row's outcome by index. A new value supersedes the old; a value that was true
    before the stored one (an older statement arriving late) is stored already superseded by it,
    as history."""
    near = [i for i in indexes if i not in exact_only]
    nearest = send_nearest(conn, user_id, rows, near, neighbours)
    updates = apply_nearest(conn, user_id, rows, nearest, near, outcomes)
    PendingUpsert(conn, rows, [i for i in indexes if i not in outcomes]).take(outcomes)
    record_updated(supersede_memories(conn, user_id, updated_pairs(rows, updates, outcomes)), updates, outcomes)


class PendingUpsert:
    """The upsert of a user's rows, sent; its RETURNING read when the ids are needed (in
    pipeline mode that may be after COMMIT, which then travels in the same round trip)."""

    def __init__(self, conn: Session, rows: Sequence[MemoryRow], indexes: list[int]) -> None:
        batch = [rows[i] for i in indexes]
        self._by_key = {(r.project_id, r.content_hash): i for i, r in zip(indexes, batch, strict=True)}
        self._cursor = conn.execute(UPSERT, row_params(batch)) if batch else None

    def take(self, outcomes: dict[int, WriteOutcome]) -> None:
        """Record each row's outcome by index (once)."""
        if self._cursor is None:
            return
        for rec in self._cursor.fetchall():
            outcomes[self._by_key[(rec[2], bytes(rec[3]))]] = WriteOutcome(rec[0], "created" if rec[4] else "refreshed")
        self._cursor = None


def updated_pairs(
    rows: Sequence[MemoryRow], updates: Mapping[int, Sequence[Neighbour]], outcomes: Mapping[int, WriteOutcome]
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """The (old, new) supersessions of updated values (see :func:`_write_rows`), the late ones reversed."""
    pairs: list[tuple[uuid.UUID, uuid.UUID]] = []
    for i, olds in updates.items():
        new_id, started = outcomes[i].id, rows[i].true_from
        for old in olds:
            late = started is not None and started < old.valid_from
            if late and rows[i].project_id is None and old.project_id is not None:
                # A user-wide statement arriving late is kept live: a project's value of the user's
                # own state ends a user-wide one only when it is the later word (the rule's judgement).
                continue
            pairs.append((new_id, old.id) if late else (old.id, new_id))
    return pairs


def record_updated(
    done: Sequence[tuple[uuid.UUID, uuid.UUID]],
    updates: Mapping[int, Sequence[Neighbour]],
    outcomes: dict[int, WriteOutcome],
) -> None:
    by_new: dict[uuid.UUID, list[uuid.UUID]] = {}
    closed_by: dict[uuid.UUID, uuid.UUID] = {}
    for closed, by in done:
        by_new.setdefault(by, []).append(closed)
        closed_by[closed] = by
    for i in updates:
        outcome = outcomes[i]
        outcomes[i] = dataclasses.replace(
            outcome,
            superseded=(*outcome.superseded, *by_new.get(outcome.id, ())),
            superseded_by=closed_by.get(outcome.id),
        )


def supersede_memories(
    conn: Session, user_id: str, pairs: Sequence[tuple[uuid.UUID, uuid.UUID]]
) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """Mark live memories (old) as replaced by new ones; the (old, new) pairs actually marked."""
    return superseded_pairs(send_supersede(conn, user_id, pairs))


def send_supersede(conn: Session, user_id: str, pairs: Sequence[tuple[uuid.UUID, uuid.UUID]]) -> Rows | None:
    """The supersession of ``pairs``, sent (its RETURNING read by :func:`superseded_pairs`); None for none."""
    if not pairs:
        return None
    return conn.execute(_SUPERSEDE, {"old": [p[0] for p in pairs], "new": [p[1] for p in pairs], "user_id": user_id})


def superseded_pairs(cursor: Rows | None) -> list[tuple[uuid.UUID, uuid.UUID]]:
    return [] if cursor is None else [(r[0], r[1]) for r in cursor.fetchall()]


@dataclasses.dataclass(frozen=True)
class Nearest:
    """The near-neighbour read, sent: its cursor, the rows it asked about, the rule to apply."""

    cursor: Rows | list[tuple[Any, ...]]  # a list: read already, in parts (_nearest_bounded)
    indexes: list[int]
    rule: NeighbourRule


def send_nearest(
    conn: Session, user_id: str, rows: Sequence[MemoryRow], indexes: list[int], rule: NeighbourRule | None
) -> Nearest | None:
    """Send the read of each row's nearest live memories in its scope (nothing fetched: in
    pipeline mode it travels with the next statement whose result is needed); None when no
    rule applies or there are no rows."""
    if rule is None or rule.floor is None or not indexes:
        return None

    def params(part: Sequence[int]) -> dict[str, Any]:
        return {
            "embeddings": [rows[i].embedding for i in part],
            "project_ids": [rows[i].project_id for i in part],
            "hashes": [rows[i].content_hash for i in part],
            "user_id": user_id,
            "threshold": rule.floor,
            "neighbours": NEIGHBOURS,
        }

    if conn.single_statement_reads:
        return Nearest(_nearest_bounded(conn, params, indexes), list(indexes), rule)
    # Never prepared: a generic plan could not prune dense_memories to the user's partition (it would
    # plan and lock every dense user's); an unnamed statement is planned with its values.
    cursor = conn.execute(NEAREST_EXISTING, params(indexes), prepare=False)
    return Nearest(cursor, list(indexes), rule)


_NEAREST_COLUMNS = "ord, id, content, valid_from, similarity, project_id"


def _nearest_bounded(
    conn: Session, params: Callable[[Sequence[int]], dict[str, Any]], indexes: list[int]
) -> list[tuple[Any, ...]]:
    """The neighbours of many rows (8 of up to 5,000 characters each: megabytes for a batch of
    large memories) in statements of at most a Data API answer (:func:`bounded`); a statement cut
    inside a row's neighbours is followed by one from that row on. One statement in the common case."""
    found: list[tuple[Any, ...]] = []
    start = 0
    query = bounded(sql.SQL(NEAREST_EXISTING), _NEAREST_COLUMNS, "ord, similarity DESC")
    while start < len(indexes):
        got = conn.execute_dicts(query, params(indexes[start:]), prepare=False).fetchall()
        more = cut(got)
        if more and int(got[-1]["ord"]) > 1:
            last = int(got[-1]["ord"])  # its neighbours may continue in the next statement: read again
            got = [r for r in got if int(r["ord"]) < last]
        else:
            last = max((int(r["ord"]) for r in got), default=0) + 1
        found += [(int(r["ord"]) + start, *list(r.values())[1:]) for r in got]
        if not more:
            break
        start += last - 1
    return found


def apply_nearest(
    conn: Session,
    user_id: str,
    rows: Sequence[MemoryRow],
    nearest: Nearest | None,
    only: Collection[int],
    outcomes: dict[int, WriteOutcome],
    *,
    judged: Collection[int] = (),
) -> dict[int, list[Neighbour]]:
    """Carry out the rule on the rows' neighbours: refresh the memories rows restate (recorded as
    their outcomes); per row left to insert, the memories whose value it updates (to supersede once
    it is stored). Only the rows in ``only`` are considered (the read may have asked about more)."""
    if nearest is None:
        return {}
    near: dict[int, list[Neighbour]] = {}
    for ordinal, memory_id, content, valid_from, similarity, project_id in (
        nearest.cursor if isinstance(nearest.cursor, list) else nearest.cursor.fetchall()
    ):
        i = nearest.indexes[int(ordinal) - 1]
        if i in only:
            near.setdefault(i, []).append(Neighbour(memory_id, content, valid_from, similarity, project_id))
    matches = nearest.rule.judge(rows, near, judged=judged)
    refresh(conn, user_id, [(memory_id, rows[i]) for i, memory_id in matches.restates.items()])
    for i, memory_id in matches.restates.items():
        outcomes[i] = WriteOutcome(memory_id, "near_duplicate")
    return matches.updates


def refresh(conn: Session, user_id: str, restated: Sequence[tuple[uuid.UUID, MemoryRow]]) -> None:
    """Refresh existing memories (id) with what a restating row brings: its time, metadata, expiry."""
    if not restated:
        return
    conn.execute(
        _REFRESH,
        {
            "ids": [memory_id for memory_id, _ in restated],
            "observed": [row.observed_at for _, row in restated],
            "metadata": [Jsonb(row.metadata) for _, row in restated],
            "expires": [row.expires_at for _, row in restated],
            "user_id": user_id,
        },
    )

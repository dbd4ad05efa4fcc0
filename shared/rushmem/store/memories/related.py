"""The memories an LLM extractor is shown: the user's live memories most similar to the new facts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from psycopg import sql

from rushmem.records import ExistingMemory
from rushmem.store.engine.session import Session, vector_column
from rushmem.store.engine.transactions import read_as_user
from rushmem.store.memories.scope import Scope, scope_filter, scope_params


def related_memories(conn: Session, scope: Scope, vectors: Sequence[np.ndarray], *, limit: int) -> list[ExistingMemory]:
    """The user's live memories in scope most similar to any of ``vectors`` (best first, under
    handles m1, m2, ...), with their embeddings: what an LLM extractor is shown.

    Exact, over the user's rows only: an index scan filtered to one user can come back short. One
    round trip (read on every conversation an LLM extractor reads).
    """
    if not vectors or limit <= 0:
        return []
    query = sql.SQL(_RELATED).format(scope=scope_filter(scope), vec=sql.Identifier(vector_column(conn)))
    params: dict[str, Any] = {**scope_params(scope), "vectors": list(vectors), "limit": limit}
    rows = read_as_user(conn, scope.user_id, query, params, vectors=True)
    return [
        ExistingMemory(
            handle=f"m{i}",
            id=row["id"],
            content=row["content"],
            category=row["category"],
            project_id=row["project_id"],
            embedding=np.asarray(row["embedding"].to_numpy(), dtype=np.float32),
        )
        for i, row in enumerate(rows, start=1)
    ]


_RELATED = """
WITH scoped AS MATERIALIZED (
    SELECT id, project_id, content, category, {vec} AS embedding FROM user_memories WHERE {scope}
), best AS (
    SELECT s.id, max(1 - (s.embedding <=> q.v)) AS similarity
    FROM scoped s CROSS JOIN unnest(%(vectors)s::vector[]) AS q(v)
    GROUP BY s.id
    ORDER BY similarity DESC, s.id
    LIMIT %(limit)s
)
SELECT s.id, s.project_id, s.content, s.category, s.embedding, b.similarity
FROM best b JOIN scoped s USING (id)
ORDER BY b.similarity DESC, s.id
"""

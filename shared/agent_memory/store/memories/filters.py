"""Filters on a user's memories (category, metadata containment, creation window), as a WHERE
clause composed once per shape, like the scope it narrows."""

from __future__ import annotations

import functools
from typing import Any

from psycopg.types.json import Jsonb

from agent_memory_contract.models import MemoryFilters

# Which conditions a filter has: the shape a statement is composed for.
FilterShape = tuple[bool, bool, bool, bool]
NO_FILTERS: FilterShape = (False, False, False, False)


def filter_shape(filters: MemoryFilters | None) -> FilterShape:
    if filters is None:
        return NO_FILTERS
    return (
        filters.categories is not None,
        filters.metadata is not None,
        filters.created_after is not None,
        filters.created_before is not None,
    )


@functools.lru_cache(maxsize=32)
def filters_sql(shape: FilterShape) -> str:
    """`` AND ...`` for each condition of the shape (empty without filters)."""
    categories, metadata, after, before = shape
    parts = []
    if categories:
        parts.append("category = ANY(%(f_categories)s::text[])")
    if metadata:
        # GIN-indexed (jsonb_path_ops, migration 0006): measured there.
        parts.append("metadata @> %(f_metadata)s")
    if after:
        parts.append("created_at >= %(f_created_after)s")
    if before:
        parts.append("created_at < %(f_created_before)s")
    return "".join(f" AND {p}" for p in parts)


def filter_params(filters: MemoryFilters | None) -> dict[str, Any]:
    """The values :func:`filters_sql`'s conditions bind (all keys, None where a condition is absent)."""
    f = filters or MemoryFilters()
    return {
        "f_categories": f.categories,
        "f_metadata": Jsonb(f.metadata) if f.metadata is not None else None,
        "f_created_after": f.created_after,
        "f_created_before": f.created_before,
    }

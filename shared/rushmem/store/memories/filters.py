"""Filters on a user's memories, as data: one row per filter (:data:`FILTERS`), from which every
statement that narrows a scope composes its conditions (:func:`filters_sql`), and a dense user's
text leg receives them as one jsonb (:func:`dense_filters_sql`, migration 0014).

A new filter is a field of :class:`~rushmem_contract.models.MemoryFilters` and one row here:
its condition compares one column that ``user_memories`` and ``dense_memories`` both have (the
copy of 0013) with the value, written ``{}``. No migration: the dense text leg applies whatever
rows it is given, once it has checked each is that shape (a column, an operator, the value).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from psycopg.types.json import Jsonb

from rushmem_contract.models import MemoryFilters


@dataclasses.dataclass(frozen=True, slots=True)
class Filter:
    """One filter: the :class:`MemoryFilters` field it reads, the SQL type its value binds as, and
    its condition on a row, ``{}`` standing for the value (no other ``%`` or ``{}``)."""

    name: str
    type: str
    condition: str

    @property
    def param(self) -> str:
        """The statement parameter its value binds to."""
        return f"f_{self.name}"

    def sql(self) -> str:
        """The condition with its parameter, as the application's statements bind it."""
        return self.condition.replace("{}", f"%({self.param})s::{self.type}")


FILTERS: tuple[Filter, ...] = (
    Filter("categories", "text[]", "category = ANY({})"),
    # GIN-indexed (jsonb_path_ops, migration 0006): measured there.
    Filter("metadata", "jsonb", "metadata @> {}"),
    Filter("created_after", "timestamptz", "created_at >= {}"),
    Filter("created_before", "timestamptz", "created_at < {}"),
)

# Which filters a statement has (in FILTERS' order): the shape it is composed for.
FilterShape = tuple[Filter, ...]
NO_FILTERS: FilterShape = ()


def filter_shape(filters: MemoryFilters | None) -> FilterShape:
    if filters is None:
        return NO_FILTERS
    return tuple(f for f in FILTERS if getattr(filters, f.name) is not None)


@functools.lru_cache(maxsize=32)
def filters_sql(shape: FilterShape) -> str:
    """`` AND ...`` for each filter of the shape (empty without filters)."""
    return "".join(f" AND {f.sql()}" for f in shape)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@functools.lru_cache(maxsize=32)
def dense_filters_sql(shape: FilterShape) -> str:
    """The filters of the shape as one jsonb array for the dense text leg (migration 0014): per
    filter its condition, its type and its value in that type's text form (PostgreSQL's own
    output, so the function reads it back exactly with the same type)."""
    if not shape:
        return "'[]'::jsonb"
    rows = ", ".join(
        f"jsonb_build_object('condition', {_literal(f.condition)}, 'type', {_literal(f.type)}, "
        f"'value', %({f.param})s::{f.type}::text)"
        for f in shape
    )
    return f"jsonb_build_array({rows})"


def filter_params(filters: MemoryFilters | None) -> dict[str, Any]:
    """The values the filters' conditions bind (every filter's key, None where it is absent)."""
    values = {}
    for f in FILTERS:
        value = None if filters is None else getattr(filters, f.name)
        values[f.param] = Jsonb(value) if value is not None and f.type == "jsonb" else value
    return values

"""Whose memories a statement may see, as a WHERE clause composed once per shape."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from typing import Any

from psycopg import sql

from agent_memory.store.memories.filters import filter_params, filter_shape, filters_sql
from agent_memory_contract.models import MemoryFilters


@dataclasses.dataclass(frozen=True)
class Scope:
    """Whose memories a query may see. With a project: that project's plus the user-wide ones."""

    user_id: str
    project_id: str | None = None
    now: dt.datetime | None = None  # "as of": hides memories created later and those expired by then
    include_inactive: bool = False  # superseded and expired memories too (debugging)
    filters: MemoryFilters | None = None  # narrows the scope (categories, metadata, creation window)
    # Valid time: the memories true at this time (superseded versions included while they held),
    # instead of the current ones.
    as_of: dt.datetime | None = None


def scope_filter(scope: Scope) -> sql.Composable:
    """The WHERE clause that limits a statement to the scope (parameters user_id, project_id, now,
    and the filters' f_*)."""
    where = scope_sql(
        scope.project_id is not None, scope.include_inactive, scope.now is not None, scope.as_of is not None
    )
    return sql.SQL(where + filters_sql(filter_shape(scope.filters)))


@functools.lru_cache(maxsize=16)
def scope_sql(has_project: bool, include_inactive: bool, as_of: bool, valid_at: bool = False) -> str:
    """The WHERE clause of a user's scope, composed once per shape. ``valid_at``: what was true at
    %(valid_at)s rather than what is current."""
    parts = ["user_id = %(user_id)s"]
    if has_project:
        parts.append("(project_id = %(project_id)s OR project_id IS NULL)")
    if valid_at and not include_inactive:
        parts.append("valid_from <= %(valid_at)s")
        parts.append("(valid_until IS NULL OR valid_until > %(valid_at)s)")
        parts.append("(expires_at IS NULL OR expires_at > %(valid_at)s)")
    elif not include_inactive:
        # As of a time (``now``): also what a later correction superseded, while it was still true.
        parts.append("(superseded_at IS NULL OR valid_until > %(now)s)" if as_of else "superseded_at IS NULL")
        parts.append(f"(expires_at IS NULL OR expires_at > {'%(now)s' if as_of else 'now()'})")
    if as_of:
        parts.append("created_at <= %(now)s")
    return " AND ".join(parts)


def scope_params(scope: Scope) -> dict[str, Any]:
    """The values :func:`scope_filter`'s clause binds."""
    return {
        "user_id": scope.user_id,
        "project_id": scope.project_id,
        "now": scope.now,
        "valid_at": scope.as_of,
        **filter_params(scope.filters),
    }

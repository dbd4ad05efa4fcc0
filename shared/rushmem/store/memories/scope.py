"""Whose memories a statement may see, as a WHERE clause composed once per shape."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from typing import Any

from psycopg import sql

from rushmem.store.memories.filters import NO_FILTERS, FilterShape, filter_params, filter_shape, filters_sql
from rushmem_contract.models import MemoryFilters


@dataclasses.dataclass(frozen=True, slots=True)
class ScopeShape:
    """Which WHERE clause a scope is (its values are bound apart): what a statement is composed for."""

    project: bool = False  # the project's memories and the user-wide ones
    include_inactive: bool = False
    now: bool = False  # evaluated at %(now)s rather than at the present
    as_of: bool = False  # valid time: what was true at %(as_of)s
    filters: FilterShape = NO_FILTERS

    @property
    def timed(self) -> bool:
        """At another time than the present, by either clock."""
        return self.now or self.as_of


@dataclasses.dataclass(frozen=True)
class Scope:
    """Whose memories a query may see. With a project: that project's plus the user-wide ones.

    Two clocks, one name each from the doors (``now``, ``as_of``) down to the SQL parameters: ``now``
    is when the query is evaluated (None: the present, the database's ``now()``); ``as_of`` is valid
    time, which facts held then (None: the current ones)."""

    user_id: str
    project_id: str | None = None
    # Evaluation time: hides memories created later and those expired or superseded by then.
    now: dt.datetime | None = None
    include_inactive: bool = False  # superseded and expired memories too (debugging)
    filters: MemoryFilters | None = None  # narrows the scope (rushmem.store.memories.filters)
    # Valid time: the memories true at this time (superseded versions included while they held),
    # instead of the current ones; with include_inactive, every memory true by then, those that had
    # ended too, never one true only later.
    as_of: dt.datetime | None = None

    def shape(self) -> ScopeShape:
        return ScopeShape(
            project=self.project_id is not None,
            include_inactive=self.include_inactive,
            now=self.now is not None,
            as_of=self.as_of is not None,
            filters=filter_shape(self.filters),
        )


def scope_filter(scope: Scope) -> sql.Composable:
    """The WHERE clause that limits a statement to the scope (the parameters of :func:`scope_params`)."""
    return sql.SQL(scope_sql(scope.shape()))


@functools.lru_cache(maxsize=64)
def scope_sql(shape: ScopeShape) -> str:
    """The WHERE clause of a scope's shape, composed once per shape, its filters included."""
    parts = ["user_id = %(user_id)s"]
    if shape.project:
        parts.append("(project_id = %(project_id)s OR project_id IS NULL)")
    if shape.as_of:
        # Only what existed then: true by as_of (a later memory, or an edit's new text, is not),
        # whether it still held then or had ended (superseded or expired) with include_inactive.
        parts.append("valid_from <= %(as_of)s")
        if not shape.include_inactive:
            parts.append("(valid_until IS NULL OR valid_until > %(as_of)s)")
            parts.append("(expires_at IS NULL OR expires_at > %(as_of)s)")
    elif not shape.include_inactive:
        # Current means valid now (at %(now)s, else the present): a version replaced by one that
        # becomes true later is current until then, and that one is not current before it, so the
        # answer without as_of is the answer at as_of = now. NULL-tolerant: a dense user's copy made
        # before migration 0019 has no valid times (then: valid from its start, ended once superseded).
        at = "%(now)s" if shape.now else "now()"
        parts.append(f"(superseded_at IS NULL OR valid_until > {at})")
        parts.append(f"(valid_from IS NULL OR valid_from <= {at})")
        parts.append(f"(expires_at IS NULL OR expires_at > {at})")
    if shape.now:
        parts.append("created_at <= %(now)s")
    return " AND ".join(parts) + filters_sql(shape.filters)


def scope_params(scope: Scope) -> dict[str, Any]:
    """The values :func:`scope_filter`'s clause binds."""
    return {
        "user_id": scope.user_id,
        "project_id": scope.project_id,
        "now": scope.now,
        "as_of": scope.as_of,
        **filter_params(scope.filters),
    }

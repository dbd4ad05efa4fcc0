"""Usage read back with its cost: one user's days (``GET /usage``), every user's totals (operators);
the users and their counts (``GET /users``).

What the work used is metered by :mod:`rushmem.usage` and stored by
:mod:`rushmem.store.accounts.usage`; prices are :mod:`rushmem.prices`."""

from __future__ import annotations

import datetime as dt
from typing import Any

from rushmem import prices
from rushmem.service.base import Collaborators, utcnow
from rushmem.service.cells import Cells
from rushmem.service.context import Context
from rushmem.store.accounts.usage import user_usage
from rushmem.store.memories import catalog
from rushmem_contract.errors import ConfigurationError, Forbidden, InvalidInput
from rushmem_contract.models import UserCount, UserList
from rushmem_contract.schemas import TenantUsage, UsageLine, UsageReport, UsageRequest, UsersRequest, usage_totals

# GET /usage: the default period (days, today included) and the longest one asked at once.
USAGE_DEFAULT_DAYS = 30
USAGE_MAX_DAYS = 366


def row_cost(row: dict[str, Any]) -> float:
    """One usage row at the price table's prices (see :func:`rushmem.prices.usage_cost`)."""
    return round(
        prices.usage_cost(
            row["kind"],
            row["model"],
            calls=int(row["calls"]),
            input_tokens=int(row["input_tokens"]),
            output_tokens=int(row["output_tokens"]),
            characters=int(row["characters"]),
            items=int(row["items"]),
        ),
        6,
    )


def usage_period(start: dt.date | None, end: dt.date | None) -> tuple[dt.date, dt.date]:
    """From ``start`` to ``end``, UTC days, both included; by default the last 30."""
    end = end or utcnow().date()
    if start is None:
        try:
            start = end - dt.timedelta(days=USAGE_DEFAULT_DAYS - 1)
        except OverflowError:  # an end in the first days of year 1
            start = dt.date.min
    if start > end:
        raise InvalidInput(f"start ({start}) is after end ({end})", field="start")
    if (end - start).days >= USAGE_MAX_DAYS:
        raise InvalidInput(f"at most {USAGE_MAX_DAYS} days at once", field="start")
    return start, end


def tenant_totals(rows: list[dict[str, Any]]) -> list[TenantUsage]:
    """Every user's totals from the rows of :func:`rushmem.store.accounts.usage.all_usage`,
    most expensive first."""
    tenants: dict[str, TenantUsage] = {}
    for row in rows:
        user = row.pop("user_id")
        tenant = tenants.setdefault(
            user, TenantUsage(user_id=user, calls={}, input_tokens=0, output_tokens=0, estimated_usd=0.0)
        )
        tenant.calls[row["kind"]] = tenant.calls.get(row["kind"], 0) + int(row["calls"])
        tenant.input_tokens += int(row["input_tokens"])
        tenant.output_tokens += int(row["output_tokens"])
        tenant.estimated_usd = round(tenant.estimated_usd + row_cost(row), 6)
    return sorted(tenants.values(), key=lambda t: (-t.estimated_usd, t.user_id))


def usage(parts: Collaborators, request: UsageRequest, ctx: Context) -> UsageReport:
    """The user's usage per day, kind and model over the period (see :func:`usage_period`),
    with its cost at the price table's prices."""
    user_id = ctx.user
    start, end = usage_period(request.start, request.end)
    parts.flush_waiting_usage()
    found = parts.db.run(lambda conn: user_usage(conn, user_id, start, end))
    lines = [UsageLine(**row, estimated_usd=row_cost(row)) for row in found]
    return UsageReport(
        user_id=user_id,
        start=start,
        end=end,
        lines=lines,
        totals=usage_totals(lines),
        estimated_usd=round(sum(line.estimated_usd for line in lines), 6),
        prices=f"{prices.DEFAULT_PRICES.region} list prices of {prices.DEFAULT_PRICES.as_of}",
    )


def users(cells: Cells, request: UsersRequest, ctx: Context) -> UserList:
    """Every user (by id, up to ``limit``) with their counts of memories and pending writes, from
    every cell; for operators (the page's user picker under `rushmem serve`, an IAM caller)."""
    found: list[UserCount] = []
    for parts in cells.each():
        try:
            found += parts.db.run(lambda conn: catalog.user_counts(conn, limit=request.limit))
        except ConfigurationError as exc:
            # The stack's function connects as agent_memory_app, one user at a time: no listing there.
            raise Forbidden(
                "listing users needs a database connection in agent_memory_maintenance (the owner's, as "
                "`rushmem serve` and `rushmem users` have); this deployment's has not"
            ) from exc
    return UserList(users=sorted(found, key=lambda u: u.user_id)[: request.limit])

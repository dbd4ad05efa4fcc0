"""Usage read back with its cost, and the change-event outbox."""

from __future__ import annotations

import datetime as dt
from typing import Any

from agent_memory import prices
from agent_memory.service.base import ServiceBase, utcnow
from agent_memory.service.drain import DrainResult, OutboxStatus, drain_outbox, outbox_status
from agent_memory.store import usage_reports as usage_queries
from agent_memory_contract.errors import ConfigurationError, InvalidInput
from agent_memory_contract.schemas import TenantUsage, UsageLine, UsageReport, usage_totals

# GET /usage: the default period (days, today included) and the longest one asked at once.
USAGE_DEFAULT_DAYS = 30
USAGE_MAX_DAYS = 366


def _cost(row: dict[str, Any]) -> float:
    """One usage row at the price table's prices (see :func:`agent_memory.prices.usage_cost`)."""
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


class Accounting(ServiceBase):
    """Usage per user and per day, and the outbox of change events."""

    def usage(self, user_id: str, *, start: dt.date | None = None, end: dt.date | None = None) -> UsageReport:
        """The user's usage per day, kind and model from ``start`` to ``end`` (UTC days, both
        included; default the last 30), with its cost at the price table's prices."""
        start, end = self._usage_period(start, end)
        found = self.db.run(lambda conn: usage_queries.user_usage(conn, user_id, start, end))
        lines = [UsageLine(**row, estimated_usd=_cost(row)) for row in found]
        return UsageReport(
            user_id=user_id,
            start=start,
            end=end,
            lines=lines,
            totals=usage_totals(lines),
            estimated_usd=round(sum(line.estimated_usd for line in lines), 6),
            prices=f"{prices.DEFAULT_PRICES.region} list prices of {prices.DEFAULT_PRICES.as_of}",
        )

    def usage_by_user(self, *, start: dt.date | None = None, end: dt.date | None = None) -> list[TenantUsage]:
        """Every user's totals over the period, most expensive first (maintenance role: the owner's
        credentials, like purge)."""
        start, end = self._usage_period(start, end)
        found = self.db.run(lambda conn: usage_queries.all_usage(conn, start, end))
        tenants: dict[str, TenantUsage] = {}
        for row in found:
            user = row.pop("user_id")
            tenant = tenants.setdefault(
                user, TenantUsage(user_id=user, calls={}, input_tokens=0, output_tokens=0, estimated_usd=0.0)
            )
            tenant.calls[row["kind"]] = tenant.calls.get(row["kind"], 0) + int(row["calls"])
            tenant.input_tokens += int(row["input_tokens"])
            tenant.output_tokens += int(row["output_tokens"])
            tenant.estimated_usd = round(tenant.estimated_usd + _cost(row), 6)
        return sorted(tenants.values(), key=lambda t: (-t.estimated_usd, t.user_id))

    @staticmethod
    def _usage_period(start: dt.date | None, end: dt.date | None) -> tuple[dt.date, dt.date]:
        end = end or utcnow().date()
        if start is None:
            try:
                start = end - dt.timedelta(days=USAGE_DEFAULT_DAYS - 1)
            except OverflowError:  # an end in the first days of year 1
                start = dt.date.min
        if start > end:
            raise InvalidInput(f"from ({start}) is after to ({end})", field="from")
        if (end - start).days >= USAGE_MAX_DAYS:
            raise InvalidInput(f"at most {USAGE_MAX_DAYS} days at once", field="from")
        return start, end

    def drain_events(self, *, user_id: str | None = None, max_batches: int = 100) -> DrainResult:
        """Publish the change events waiting in the outbox (everyone's by default): the scheduled drain."""
        if not self.settings.event_bus:
            raise ConfigurationError("no change events: AGENT_MEMORY_EVENT_BUS is not set")
        return drain_outbox(self.db, self.publisher, user_id=user_id, max_batches=max_batches)

    def events_status(self, *, user_id: str | None = None) -> OutboxStatus:
        """How many change events wait in the outbox, since when, and the latest publish error."""
        return outbox_status(self.db, user_id=user_id)

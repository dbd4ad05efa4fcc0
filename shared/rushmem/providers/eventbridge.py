"""Amazon EventBridge ``PutEvents``: how change events leave the service.

No retries here: an event the bus did not take stays in the outbox, which the next drain (after
the next write, or the scheduled one) sends again. The timeouts are short, because the first
drain runs right after a write's commit, in the request. boto3 is imported when a bus is used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rushmem.config import Settings
from rushmem.providers.aws import aws_client

# PutEvents takes at most 10 entries and 256 KB a request.
MAX_ENTRIES = 10
MAX_REQUEST_BYTES = 256 * 1024


class EventBridgePublisher:
    """Puts (detail type, detail JSON) entries on ``bus`` with ``source``; per entry, None when the
    bus took it, else why not."""

    def __init__(self, client: Any = None, *, bus: str, source: str, region: str | None = None) -> None:
        self._client = client
        self.bus = bus
        self.source = source
        self.region = region

    @classmethod
    def from_settings(cls, settings: Settings, client: Any = None) -> EventBridgePublisher:
        if not settings.event_bus:
            raise ValueError("no RUSHMEM_EVENT_BUS configured")
        return cls(client, bus=settings.event_bus, source=settings.event_source)

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = aws_client(
                "events",
                self.region,
                connect_timeout=2,
                read_timeout=5,
                attempts=2,
                region_setting="AWS_DEFAULT_REGION",
            )
        return self._client

    def publish(self, entries: Sequence[tuple[str, str]]) -> list[str | None]:
        results: list[str | None] = []
        for batch in _batches(entries):
            results.extend(self._put(batch))
        return results

    def _put(self, batch: Sequence[tuple[str, str]]) -> list[str | None]:
        from botocore.exceptions import BotoCoreError, ClientError

        request = [
            {"Source": self.source, "DetailType": kind, "Detail": detail, "EventBusName": self.bus}
            for kind, detail in batch
        ]
        try:
            answer = self.client.put_events(Entries=request)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            reason = f"{error.get('Code', 'Error')}: {error.get('Message', '')}".rstrip(": ")
            return [reason] * len(batch)
        except BotoCoreError as exc:
            return [str(exc)] * len(batch)
        entries = answer.get("Entries") or []
        if len(entries) != len(batch):
            return [f"the bus answered {len(entries)} results for {len(batch)} entries"] * len(batch)
        return [
            None
            if entry.get("EventId") and not entry.get("ErrorCode")
            else f"{entry.get('ErrorCode', 'Error')}: {entry.get('ErrorMessage', '')}".rstrip(": ")
            for entry in entries
        ]


def _batches(entries: Sequence[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """At most MAX_ENTRIES entries and MAX_REQUEST_BYTES (as AWS counts them) a request."""
    batches: list[list[tuple[str, str]]] = []
    current: list[tuple[str, str]] = []
    size = 0
    for kind, detail in entries:
        entry_size = len(kind.encode()) + len(detail.encode()) + 64  # Source, bus name: a little room
        if current and (len(current) == MAX_ENTRIES or size + entry_size > MAX_REQUEST_BYTES):
            batches.append(current)
            current, size = [], 0
        current.append((kind, detail))
        size += entry_size
    if current:
        batches.append(current)
    return batches

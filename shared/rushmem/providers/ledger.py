"""The erasure ledger: every erasure recorded outside the database, so that a database restored
from a snapshot or a point in time (which holds the erased rows again) can be made to forget them
again before it serves (see :func:`rushmem.service.editing.reapply_erasures`).

An entry is the receipt's identity and nothing personal: the receipt id, the subject (the keyed
hash of the user id the receipts hold), the time, who asked, and which database erased (the
fingerprint of that database's erasure key: with cells, each database has its own key and its own
entries). It is written *before* the database deletes (a crash in between leaves an entry the next
migrate completes, never an erasure without an entry), and re-applying one is idempotent.

Two places: a JSON Lines file (locally, beside the embedded server's data folder), or an S3 object
per entry (the stack's versioned ledger bucket with Object Lock), whose key alone holds what a
restore needs, so a listing reads the whole ledger. boto3 is imported when S3 is used.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import uuid
from pathlib import Path
from typing import Any, Protocol

from rushmem.providers.aws import aws_client
from rushmem_contract.errors import ConfigurationError, ServiceUnavailable


@dataclasses.dataclass(frozen=True)
class LedgerEntry:
    """One erasure as the ledger keeps it: no user id, only the receipt's keyed hash."""

    receipt_id: uuid.UUID
    subject: str  # hex HMAC-SHA256 of the user id under the database's erasure key
    store: str  # which database: a fingerprint of its erasure key
    erased_at: dt.datetime
    requested_by: str = ""

    def to_json(self) -> str:
        return json.dumps(
            {
                "receipt_id": str(self.receipt_id),
                "subject": self.subject,
                "store": self.store,
                "erased_at": self.erased_at.isoformat(),
                "requested_by": self.requested_by,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> LedgerEntry:
        data = json.loads(text)
        return cls(
            receipt_id=uuid.UUID(data["receipt_id"]),
            subject=str(data["subject"]),
            store=str(data["store"]),
            erased_at=dt.datetime.fromisoformat(data["erased_at"]),
            requested_by=str(data.get("requested_by", "")),
        )


class ErasureLedger(Protocol):
    def record(self, entry: LedgerEntry) -> None:
        """Keep the entry durably (or raise: the erasure does not go ahead unrecorded)."""

    def entries(self, store: str) -> list[LedgerEntry]:
        """Every entry of this database, oldest first."""

    def complete(self, entry: LedgerEntry) -> LedgerEntry:
        """The entry with everything it was recorded with (a listing may give less)."""

    def describe(self) -> str: ...


class FileLedger:
    """A JSON Lines file, one entry a line, appended and fsynced before the erasure proceeds."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def describe(self) -> str:
        return str(self.path)

    def complete(self, entry: LedgerEntry) -> LedgerEntry:
        return entry

    def record(self, entry: LedgerEntry) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as out:
                out.write(entry.to_json() + "\n")
                out.flush()
                os.fsync(out.fileno())
        except OSError as exc:
            raise ServiceUnavailable(f"the erasure ledger {self.path} cannot be written: {exc.strerror}") from exc

    def entries(self, store: str) -> list[LedgerEntry]:
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        except OSError as exc:  # never served as "no erasures": the restore check must not pass unread
            raise ServiceUnavailable(f"the erasure ledger {self.path} cannot be read: {exc.strerror}") from exc
        # A line cut short by a crash mid-write was never followed by its erasure: skipped.
        found = []
        for line in lines:
            try:
                found.append(LedgerEntry.from_json(line))
            except (ValueError, KeyError):
                continue
        return sorted((e for e in found if e.store == store), key=lambda e: (e.erased_at, str(e.receipt_id)))


# The key: <prefix><store>/<erased_at, sortable>_<receipt id>_<subject>.json (ListObjectsV2 returns
# keys in UTF-8 binary order, so the ledger lists oldest first; keys stay far under S3's 1,024 bytes).
_STAMP = "%Y%m%dT%H%M%S.%fZ"


class S3Ledger:
    """An object per entry in a versioned bucket (Object Lock keeps each entry from being deleted
    or overwritten for the bucket's default retention); the body is the entry as JSON."""

    def __init__(self, bucket: str, prefix: str, client: Any = None, region: str | None = None) -> None:
        self.bucket = bucket
        self.prefix = prefix
        self._client = client
        self.region = region

    def describe(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = aws_client(
                "s3", self.region, connect_timeout=2, read_timeout=5, attempts=3, region_setting="AWS_DEFAULT_REGION"
            )
        return self._client

    def key(self, entry: LedgerEntry) -> str:
        stamp = entry.erased_at.astimezone(dt.UTC).strftime(_STAMP)
        return f"{self.prefix}{entry.store}/{stamp}_{entry.receipt_id}_{entry.subject}.json"

    def record(self, entry: LedgerEntry) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.put_object(
                Bucket=self.bucket,
                Key=self.key(entry),
                Body=entry.to_json().encode(),
                ContentType="application/json",
            )
        except (BotoCoreError, ClientError) as exc:
            raise ServiceUnavailable(f"the erasure ledger {self.describe()} cannot be written: {exc}") from exc

    def entries(self, store: str) -> list[LedgerEntry]:
        found = []
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=f"{self.prefix}{store}/"):
            for item in page.get("Contents", []):
                entry = self._parse(item["Key"], store)
                if entry is not None:
                    found.append(entry)
        return found

    def complete(self, entry: LedgerEntry) -> LedgerEntry:
        """Who asked is in the body only (it may be any text, so not in the key)."""
        body = self.client.get_object(Bucket=self.bucket, Key=self.key(entry))["Body"].read()
        return LedgerEntry.from_json(body.decode())

    def _parse(self, key: str, store: str) -> LedgerEntry | None:
        name = key.rsplit("/", 1)[-1].removesuffix(".json")
        parts = name.split("_")
        if len(parts) != 3:
            return None  # not an entry (someone else's object under the prefix)
        try:
            erased_at = dt.datetime.strptime(parts[0], _STAMP).replace(tzinfo=dt.UTC)
            return LedgerEntry(receipt_id=uuid.UUID(parts[1]), subject=parts[2], store=store, erased_at=erased_at)
        except ValueError:
            return None


def open_ledger(where: str | None, client: Any = None) -> ErasureLedger | None:
    """The ledger at ``where`` (RUSHMEM_ERASURE_LEDGER, resolved): s3://bucket/prefix or a file path."""
    if not where:
        return None
    if where.startswith("s3://"):
        bucket, _, prefix = where.removeprefix("s3://").partition("/")
        if not bucket:
            raise ConfigurationError(f"RUSHMEM_ERASURE_LEDGER={where!r} names no bucket (s3://bucket/prefix/)")
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        return S3Ledger(bucket, prefix, client)
    if "://" in where:
        raise ConfigurationError(f"RUSHMEM_ERASURE_LEDGER={where!r}: an s3:// URL or a file path")
    return FileLedger(Path(where).expanduser())

"""The erasure ledger's two places (a JSON Lines file, S3 through botocore's Stubber with the
service's documented shapes), where it is by default, and the receipt's backup horizon."""

from __future__ import annotations

import datetime as dt
import io
import uuid
from pathlib import Path

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

from rushmem.config import Settings
from rushmem.providers.ledger import FileLedger, LedgerEntry, S3Ledger, open_ledger
from rushmem.service.editing import with_horizon
from rushmem_contract.errors import ConfigurationError
from rushmem_contract.schemas import ErasureReceipt

STORE = "5f0c" * 8
SUBJECT = "ab" * 32  # a SHA-256 HMAC in hex
JSON = "application/json"
AT = dt.datetime(2026, 3, 1, 12, 30, 5, 123456, tzinfo=dt.UTC)


def entry(minutes: int = 0, requested_by: str = "dpo ticket #42") -> LedgerEntry:
    return LedgerEntry(uuid.uuid4(), SUBJECT, STORE, AT + dt.timedelta(minutes=minutes), requested_by)


def test_the_file_ledger_keeps_each_store_s_entries_oldest_first_and_skips_a_cut_line(tmp_path: Path) -> None:
    ledger = FileLedger(tmp_path / "sub" / "ledger.jsonl")
    later, earlier = entry(5), entry(0)
    other = LedgerEntry(uuid.uuid4(), SUBJECT, "another-cell", AT, "cli")
    for e in (later, other, earlier):
        ledger.record(e)
    with ledger.path.open("a") as out:
        out.write('{"receipt_id": "cut sho')  # a crash mid-write: its erasure never ran
    assert ledger.entries(STORE) == [earlier, later]
    assert ledger.entries("another-cell") == [other]
    assert FileLedger(tmp_path / "none.jsonl").entries(STORE) == []


def s3_client() -> object:
    return boto3.client("s3", region_name="eu-west-1", aws_access_key_id="k", aws_secret_access_key="s")


def test_the_s3_ledger_puts_one_object_per_entry_whose_key_a_listing_reads_back() -> None:
    client = s3_client()
    ledger = open_ledger("s3://ledger-bucket/erasures", client)
    assert isinstance(ledger, S3Ledger) and ledger.prefix == "erasures/"
    first, second = entry(0), entry(1, requested_by="arn:aws:iam::123456789012:role/dpo")
    keys = [ledger.key(first), ledger.key(second)]
    assert keys[0] == f"erasures/{STORE}/20260301T123005.123456Z_{first.receipt_id}_{SUBJECT}.json"
    assert all(len(k.encode()) <= 1024 for k in keys)  # S3's limit on a key
    with Stubber(client) as stub:  # type: ignore[arg-type]
        for e, key in zip((first, second), keys, strict=True):
            stub.add_response(
                "put_object",
                {"ETag": '"e"'},
                {"Bucket": "ledger-bucket", "Key": key, "Body": e.to_json().encode(), "ContentType": JSON},
            )
            ledger.record(e)
        # ListObjectsV2 answers at most 1,000 keys a page: two pages here, one key each.
        stub.add_response(
            "list_objects_v2",
            {"Contents": [{"Key": keys[0]}], "IsTruncated": True, "NextContinuationToken": "t"},
            {"Bucket": "ledger-bucket", "Prefix": f"erasures/{STORE}/"},
        )
        stub.add_response(
            "list_objects_v2",
            {"Contents": [{"Key": keys[1]}, {"Key": f"erasures/{STORE}/README.txt"}], "IsTruncated": False},
            {"Bucket": "ledger-bucket", "Prefix": f"erasures/{STORE}/", "ContinuationToken": "t"},
        )
        listed = ledger.entries(STORE)
        # The key holds all a restore needs but who asked, which the body holds.
        assert [(e.receipt_id, e.subject, e.erased_at) for e in listed] == [
            (e.receipt_id, e.subject, e.erased_at) for e in (first, second)
        ]
        stub.add_response(
            "get_object",
            {"Body": StreamingBody(io.BytesIO(second.to_json().encode()), len(second.to_json()))},
            {"Bucket": "ledger-bucket", "Key": keys[1]},
        )
        assert ledger.complete(listed[1]) == second


@pytest.mark.parametrize("where", ["s3:///prefix", "https://example.com/ledger"])
def test_a_ledger_setting_that_names_no_place_is_refused(where: str) -> None:
    with pytest.raises(ConfigurationError, match="RUSHMEM_ERASURE_LEDGER"):
        open_ledger(where)


def test_the_ledger_is_beside_the_embedded_server_s_data_folder_by_default(tmp_path: Path) -> None:
    embedded = Settings(data_dir=tmp_path / "pg")
    assert embedded.resolved_erasure_ledger() == str(tmp_path / "pg.erasures.jsonl")
    assert Settings(database_url="postgresql://db/x").resolved_erasure_ledger() is None
    given = Settings(database_url="postgresql://db/x", erasure_ledger="s3://b/p/")
    assert given.resolved_erasure_ledger() == "s3://b/p/"


def test_the_horizon_is_the_erasure_plus_the_backup_retention() -> None:
    receipt = ErasureReceipt.model_validate(
        {
            "id": uuid.uuid4(),
            "subject": SUBJECT,
            "requested_by": "cli",
            "erased_at": AT,
            "deleted": {"memories": 1, "history": 1, "ingest_receipts": 0, "usage_rows": 0},
        }
    )
    assert with_horizon(receipt, Settings(backup_retention_days=7)).backup_horizon == AT + dt.timedelta(days=7)
    assert with_horizon(receipt, Settings()).backup_horizon is None  # no automated backups declared
    with pytest.raises(ValueError):
        Settings(backup_retention_days=36)  # Aurora keeps automated backups 1 to 35 days

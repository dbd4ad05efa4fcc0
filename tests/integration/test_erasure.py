"""Forgetting a user returns and stores a receipt: what went, when, at whose request, with the user
only as a keyed hash; readable later by id (HTTP, CLI, client)."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid

import psycopg
import pytest

from rushmem.service import Memory
from rushmem_client import MemoryClient
from rushmem_contract.errors import NotFound
from rushmem_contract.models import ConversationEnded, NewMemory
from tests.support.recall import as_jwt, body_of, event, invoke, token, with_body, with_request

# The same behaviour on a connection and through the RDS Data API (tests/support/data_api.py).
pytestmark = pytest.mark.both_backends

USER = "ana.lima@example.com"  # ids are often personal data themselves


def _key(database_url: str) -> bytes:
    with psycopg.connect(database_url) as owner:
        row = owner.execute("SELECT value FROM agent_memory_meta WHERE key = 'erasure_key'").fetchone()
    assert row is not None
    return bytes.fromhex(row[0])


def test_the_receipt_counts_what_went_and_holds_no_personal_data(service: Memory, database_url: str) -> None:
    service.add([NewMemory(content="Prefers tea"), NewMemory(content="Lives in Porto")], user_id=USER)
    service.ingest_conversation(
        ConversationEnded.model_validate(
            {"user_id": USER, "conversation_id": "c1", "messages": [{"role": "user", "content": "I prefer Vim."}]}
        )
    )
    service.recall("tea", user_id=USER)
    service.add([NewMemory(content="Prefers coffee")], user_id="someone-else")
    receipt = service.forget_user(USER, requested_by="dpo-ticket-42")
    assert receipt.deleted.memories == 3
    assert receipt.deleted.history == 3  # one 'created' each
    assert receipt.deleted.ingest_receipts == 1
    assert receipt.deleted.usage_rows >= 3  # write, conversation, recall, embedding
    assert receipt.deleted.entity_links == 0  # no links are stored (migration 0010)
    assert receipt.requested_by == "dpo-ticket-42"
    # The subject is HMAC-SHA256 under the deployment's key: no id, no plain hash of it.
    assert receipt.subject == hmac.new(_key(database_url), USER.encode(), hashlib.sha256).hexdigest()
    assert receipt.subject != hashlib.sha256(USER.encode()).hexdigest()
    assert USER not in receipt.model_dump_json() and "ana" not in receipt.model_dump_json()
    # Everything of the user went, nothing of anyone else's.
    with psycopg.connect(database_url) as owner:
        for table in ("user_memories", "memory_events", "ingested_messages", "usage_daily"):
            left = owner.execute(f"SELECT count(*) FROM {table} WHERE user_id = %s", [USER]).fetchone()
            assert left == (0,), table
        others = owner.execute("SELECT count(*) FROM user_memories WHERE user_id = 'someone-else'").fetchone()
        stored = owner.execute("SELECT deleted::text, requested_by FROM erasure_receipts").fetchall()
    assert others == (1,)
    assert len(stored) == 1 and USER not in json.dumps(stored)
    # Retrievable later, by id, and by the user id (matched through the key).
    assert service.erasure(receipt.id) == receipt
    assert service.erasures(USER).receipts == [receipt]
    assert service.erasures("someone-else").receipts == []
    with pytest.raises(NotFound):
        service.erasure(uuid.uuid4())


def test_a_user_reads_only_their_own_receipt(service: Memory) -> None:
    service.add([NewMemory(content="Alice likes tea")], user_id="alice")
    receipt = service.forget_user("alice")
    assert service.erasure(receipt.id, user_id="alice") == receipt
    with pytest.raises(NotFound):
        service.erasure(receipt.id, user_id="bob")


def test_receipts_are_not_listable_without_naming_one(service: Memory) -> None:
    service.add([NewMemory(content="Alice likes tea")], user_id="alice")
    service.forget_user("alice")
    conn = service.admin.db.connection()
    with conn.transaction():
        assert conn.execute("SELECT count(*) FROM erasure_receipts").fetchone() == (0,)


def test_delete_all_over_http_returns_the_receipt_and_get_erasures_reads_it(lambda_env: str) -> None:
    add = with_body("http-memories-add.json", {"user_id": "user-123", "memories": [{"content": "Likes tea"}]})
    assert invoke(add)["statusCode"] == 201
    erased = invoke("http-memories-delete-all.json")
    assert erased["statusCode"] == 200
    receipt = body_of(erased)
    assert receipt["deleted"]["memories"] == 1 and "user-123" not in json.dumps(receipt)
    read = invoke(with_request(event("http-erasure.json"), "GET", f"/erasures/{receipt['id']}"))
    assert read["statusCode"] == 200 and body_of(read) == receipt
    # A token reads its own user's receipts only; the same 404 as for no receipt at all.
    own = as_jwt(with_request(event("http-erasure.json"), "GET", f"/erasures/{receipt['id']}"), "user-123")
    assert invoke(own)["statusCode"] == 200
    other = as_jwt(with_request(event("http-erasure.json"), "GET", f"/erasures/{receipt['id']}"), "user-456")
    assert invoke(other)["statusCode"] == 404
    mine = as_jwt(with_request(event("http-memories-delete-all.json"), "DELETE", "/memories", {"user_id": "u7"}), "u7")
    assert body_of(invoke(mine))["requested_by"] == "user"


def test_the_client_gets_and_reads_receipts_and_usage(served: str) -> None:
    with MemoryClient(served, auth="none", timeout=30) as client:
        client.add(["Prefers pnpm"], user_id="u1")
        client.recall("pnpm", user_id="u1")
        usage = client.usage(user_id="u1")
        assert usage.totals["recall"] == 1 and usage.estimated_usd > 0
        receipt = client.forget_user("u1")
        assert receipt.deleted.memories == 1 and receipt.requested_by == "api"
        assert client.erasure(receipt.id) == receipt
        with pytest.raises(NotFound):
            client.erasure(uuid.uuid4())
    alice = MemoryClient(served, auth="jwt", token=token("alice"))
    alice.add(["Alice uses Vim"])
    assert alice.usage().user_id == "alice"
    assert alice.forget_user("alice").requested_by == "user"

"""Personal data is taken out of memories before they are embedded and stored (AGENT_MEMORY_PII),
on every write path: API writes, the SQS message's memories, extracted facts, import."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from botocore.stub import Stubber

from rushmem.config import Settings
from rushmem.ingest.importing import ImportReport
from rushmem.ingest.redaction import REDACTED_KEY, Redactor
from rushmem.privacy import PiiPolicy, RegexDetector
from rushmem.providers.comprehend import ComprehendPiiDetector
from rushmem.service import Memory
from rushmem_contract.models import ConversationEnded, MemoryChanges, NewMemory

CARD = "4111 1111 1111 1111"
EMAIL = "ana.lima@example.com"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
SECRETS = (CARD, EMAIL, AWS_KEY, "4111111111111111")
FACT = (
    f"The user pays for the espresso machine subscription with card {CARD}, gets receipts at {EMAIL} "
    f"and deploys with key {AWS_KEY}"
)


@pytest.fixture
def redacting(settings: Settings) -> Iterator[Memory]:
    service = Memory(settings.model_copy(update={"pii": PiiPolicy.parse("redact")}))
    yield service
    service.close()


def _stored(database_url: str) -> list[dict[str, Any]]:
    """Every row of the store as the owner sees it (no row-level security)."""
    with psycopg.connect(database_url) as conn:
        cur = conn.execute("SELECT content, metadata, embedding::text FROM user_memories")
        rows = [{"content": c, "metadata": m, "embedding": e} for c, m, e in cur.fetchall()]
        history = [r[0] for r in conn.execute("SELECT content FROM memory_events").fetchall()]
    return rows + [{"content": h, "metadata": {}, "embedding": ""} for h in history]


def test_a_memory_is_stored_without_its_card_email_and_key_and_is_still_recalled(
    redacting: Memory, database_url: str
) -> None:
    stored = redacting.add([NewMemory(content=FACT), NewMemory(content="The user drinks oat milk")], user_id="u1")
    assert stored.pii_redacted == 1 and stored.pii_dropped == [] and len(stored.ids) == 2
    (memory,) = [m for m in redacting.list(user_id="u1").memories if m.id == stored.ids[0]]
    assert memory.content == (
        "The user pays for the espresso machine subscription with card [PAYMENT_CARD], gets receipts at [EMAIL] "
        "and deploys with key [CREDENTIAL]"
    )
    # The record says what was removed: types and counts, never the values.
    assert memory.metadata[REDACTED_KEY] == {"aws_access_key_id": 1, "email": 1, "payment_card": 1}
    # Recall still finds it by its other words.
    recalled = redacting.recall("espresso machine subscription", user_id="u1", limit=1)
    assert [m.id for m in recalled.memories] == [stored.ids[0]]
    # Nothing of the values anywhere: the row, its metadata, its history.
    for row in _stored(database_url):
        assert not any(secret in row["content"] or secret in str(row["metadata"]) for secret in SECRETS)
    # The vector is the redacted text's, not the original's.
    with psycopg.connect(database_url) as conn:
        from pgvector.psycopg import register_vector

        register_vector(conn)
        found = conn.execute("SELECT embedding FROM user_memories WHERE id = %s", [stored.ids[0]]).fetchone()
    assert found is not None
    vector = np.asarray(found[0].to_numpy())
    assert np.allclose(vector, redacting.admin.embedder.embed([memory.content])[0], atol=1e-6)
    assert not np.allclose(vector, redacting.admin.embedder.embed([FACT])[0], atol=1e-3)


def test_by_default_credentials_are_redacted_on_every_write_path_and_personal_data_kept(
    service: Memory, database_url: str
) -> None:
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    stored = service.add([NewMemory(content=FACT)], user_id="u1")
    assert stored.pii_redacted == 1
    (memory,) = service.list(user_id="u1").memories
    # The card and the e-mail are personal data: kept unless AGENT_MEMORY_PII says otherwise.
    assert memory.content == FACT.replace(AWS_KEY, "[CREDENTIAL]")
    assert memory.metadata == {REDACTED_KEY: {"aws_access_key_id": 1}}
    # An edit, the SQS message's memories, the extracted facts, an imported line.
    service.update(memory.id, MemoryChanges(content=f"The user deploys with token {token}"), user_id="u1")
    message = ConversationEnded.model_validate(
        {
            "user_id": "u2",
            "memories": [{"content": f"The CI deploy key is {AWS_KEY}"}],
            "messages": [{"role": "user", "content": f"I prefer deploying with the token {token} on Fridays."}],
        }
    )
    assert service.ingest_conversation(message).status == "stored"
    line = json.dumps({"user_id": "u3", "content": f"The API token is {token}"})
    report = service.admin.import_jsonl([(1, line)], ImportReport())
    assert report.taken == 1
    for row in _stored(database_url):
        assert AWS_KEY not in row["content"] and token not in row["content"], row["content"]
    assert [m.content for m in service.list(user_id="u3").memories] == ["The API token is [CREDENTIAL]"]


def test_credentials_are_stored_only_when_the_setting_says_credential_off(settings: Settings) -> None:
    service = Memory(settings.model_copy(update={"pii": PiiPolicy.parse("off,credential=off")}))
    try:
        assert service.add([NewMemory(content=FACT)], user_id="u1").pii_redacted == 0
        assert service.list(user_id="u1").memories[0].content == FACT
    finally:
        service.close()


def test_drop_mode_keeps_the_memory_out_and_says_which_input_it_was(settings: Settings) -> None:
    service = Memory(settings.model_copy(update={"pii": PiiPolicy.parse("redact,credential=drop")}))
    try:
        stored = service.add(
            [
                NewMemory(content="The user likes tea"),
                NewMemory(content=f"The deploy key is {AWS_KEY}"),
                NewMemory(content=f"The user's e-mail is {EMAIL}"),
            ],
            user_id="u1",
        )
        assert stored.pii_dropped == [1] and stored.pii_redacted == 1 and len(stored.ids) == 2
        contents = sorted(m.content for m in service.list(user_id="u1").memories)
        assert contents == ["The user likes tea", "The user's e-mail is [EMAIL]"]
    finally:
        service.close()


def test_a_client_cannot_claim_its_own_redaction_record(redacting: Memory) -> None:
    redacting.add(
        [NewMemory(content="The user likes tea", metadata={REDACTED_KEY: {"email": 9}, "k": 1})], user_id="u1"
    )
    assert redacting.list(user_id="u1").memories[0].metadata == {"k": 1}


def test_the_sqs_messages_memories_and_the_extracted_facts_are_redacted(redacting: Memory, database_url: str) -> None:
    message = ConversationEnded.model_validate(
        {
            "user_id": "u1",
            "conversation_id": "c1",
            "memories": [{"content": f"The user's backup e-mail is {EMAIL}"}],
            "messages": [{"role": "user", "content": f"I prefer paying with my card {CARD} for the coffee plan."}],
        }
    )
    outcome = redacting.ingest_conversation(message)
    assert outcome.status == "stored" and outcome.pii_redacted >= 2
    contents = [m.content for m in redacting.list(user_id="u1").memories]
    assert any("[EMAIL]" in c for c in contents) and any("[PAYMENT_CARD]" in c for c in contents)
    for row in _stored(database_url):
        assert not any(secret in row["content"] for secret in SECRETS)


def test_imported_lines_are_redacted(redacting: Memory) -> None:
    lines = [
        (1, '{"user_id": "u1", "content": "Server 203.0.113.7 hosts the staging site"}'),
        (2, '{"user_id": "u2", "content": "Likes hiking"}'),
    ]
    report = redacting.admin.import_jsonl(lines, ImportReport())
    assert report.taken == 2
    assert [m.content for m in redacting.list(user_id="u1").memories] == ["Server [IP_ADDRESS] hosts the staging site"]


def test_names_and_addresses_go_through_comprehend_in_one_request_per_write(
    redacting: Memory, comprehend_stub: tuple[Any, Stubber]
) -> None:
    client, stubber = comprehend_stub
    facts = ["Maria Garcia lives at 742 Evergreen Terrace, Springfield", "The user prefers dark roast coffee"]
    joined = "\n\n".join(facts)
    name, address = "Maria Garcia", "742 Evergreen Terrace, Springfield"
    stubber.add_response(
        "detect_pii_entities",
        {
            "Entities": [
                {"Type": "NAME", "Score": 0.99, "BeginOffset": 0, "EndOffset": len(name)},
                {
                    "Type": "ADDRESS",
                    "Score": 0.98,
                    "BeginOffset": joined.index(address),
                    "EndOffset": joined.index(address) + len(address),
                },
            ]
        },
        expected_params={"Text": joined, "LanguageCode": "en"},
    )
    redacting.cells.parts[""].redactor = Redactor(
        redacting.settings.pii, [RegexDetector(), ComprehendPiiDetector(client)]
    )
    stored = redacting.add([NewMemory(content=f) for f in facts], user_id="u1")
    assert stored.pii_redacted == 1
    contents = sorted(m.content for m in redacting.list(user_id="u1").memories)
    assert contents == ["The user prefers dark roast coffee", "[NAME] lives at [ADDRESS]"]
    # Comprehend's request is billed to the user's usage.
    pii = [line for line in redacting.usage("u1").lines if line.kind == "pii"]
    assert [(line.calls, line.characters) for line in pii] == [(1, len(joined))]


def redactor_for(settings: Settings) -> Redactor:
    """The write path's redactor as the service builds it (nothing connects until a write)."""
    redactor: Redactor = Memory(settings).cells.parts[""].redactor
    return redactor


def test_the_comprehend_detector_is_built_only_when_asked(settings: Settings) -> None:
    plain = redactor_for(settings.model_copy(update={"pii": PiiPolicy.parse("redact")}))
    assert [type(d).__name__ for d in plain.detectors] == ["RegexDetector"]
    with_names = redactor_for(settings.model_copy(update={"pii": PiiPolicy.parse("redact"), "pii_comprehend": True}))
    assert [type(d).__name__ for d in with_names.detectors] == ["RegexDetector", "ComprehendPiiDetector"]
    # The default policy acts on credentials only, which the regex engine finds: no Comprehend bill.
    default = redactor_for(settings.model_copy(update={"pii_comprehend": True}))
    assert default.enabled and [type(d).__name__ for d in default.detectors] == ["RegexDetector"]
    off = redactor_for(settings.model_copy(update={"pii": PiiPolicy(), "pii_comprehend": True}))
    assert not off.enabled and [type(d).__name__ for d in off.detectors] == ["RegexDetector"]


def test_a_changed_content_is_redacted_like_any_write(redacting: Memory, database_url: str) -> None:
    from rushmem_contract.errors import InvalidInput
    from rushmem_contract.models import MemoryChanges

    (memory_id,) = redacting.add([NewMemory(content="The user drinks oat milk", metadata={"a": 1})], user_id="u1").ids
    updated = redacting.update(memory_id, MemoryChanges(content=f"The user gets receipts at {EMAIL}"), user_id="u1")
    assert updated.content == "The user gets receipts at [EMAIL]"
    assert updated.metadata == {"a": 1, REDACTED_KEY: {"email": 1}}
    assert not any(s in str(row) for row in _stored(database_url) for s in SECRETS)
    dropping = Memory(redacting.settings.model_copy(update={"pii": PiiPolicy.parse("redact,credential=drop")}))
    try:
        with pytest.raises(InvalidInput) as refused:
            dropping.update(memory_id, MemoryChanges(content=f"The user deploys with {AWS_KEY}"), user_id="u1")
        assert refused.value.field == "content"
    finally:
        dropping.close()


# ---- what a reader sees is what redaction reads; the whole memory (issue 23) ---------------

# Each value disguised by one character a reader does not see, or sees as the plain one.
DISGUISED = {
    "email": "ana.lima\u200b@example.com",  # a zero-width space
    "card": "\uff14111 1111 1111 1111",  # a fullwidth digit
    "card_digits": " ".join(["\u0664\u0661\u0661\u0661"] + ["\u0661" * 4] * 3),  # Arabic-Indic digits
    "key": "\u0410KIAIOSFODNN7EXAMPLE",  # a Cyrillic A
}
VISIBLE_SECRETS = ("ana.lima", "@example.com", "4111", "1111", "\u0661\u0661\u0661\u0661", "IOSFODNN7EXAMPLE")


def _nothing_stored_a_reader_could_read(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        rows = conn.execute("SELECT content, metadata::text FROM user_memories").fetchall()
        # An 'updated' event that left the text as it was keeps none (it stores what changed).
        rows += conn.execute("SELECT coalesce(content, ''), detail::text FROM memory_events").fetchall()
    for content, metadata in rows:
        for secret in VISIBLE_SECRETS:
            assert secret not in content and secret not in metadata, (content, metadata)


def test_a_disguised_value_in_content_or_metadata_is_redacted_through_the_http_api(
    monkeypatch: pytest.MonkeyPatch, lambda_env: str
) -> None:
    from tests.support.recall import body_of, invoke, with_body, with_request

    monkeypatch.setenv("AGENT_MEMORY_PII", "redact")
    memories = [
        {"content": f"Receipts go to {DISGUISED['email']}", "metadata": {"contact": DISGUISED["email"]}},
        {"content": f"Pays with {DISGUISED['card']}", "metadata": {"cards": [DISGUISED["card_digits"], "visa"]}},
        {"content": f"Deploys with {DISGUISED['key']}", "metadata": {"deploy": {"key": DISGUISED["key"], "n": 2}}},
    ]
    stored = invoke(with_body("http-memories-add.json", {"user_id": "u-pii", "memories": memories}))
    assert stored["statusCode"] == 201, stored
    assert body_of(stored)["pii_redacted"] == 3
    listed = body_of(invoke(with_request("http-memories-list.json", "GET", "/memories", {"user_id": "u-pii"})))
    by_content = {m["content"]: m["metadata"] for m in listed["memories"]}
    assert by_content == {
        "Receipts go to [EMAIL]": {"contact": "[EMAIL]", REDACTED_KEY: {"email": 2}},
        "Pays with [PAYMENT_CARD]": {"cards": ["[PAYMENT_CARD]", "visa"], REDACTED_KEY: {"payment_card": 2}},
        "Deploys with [CREDENTIAL]": {
            "deploy": {"key": "[CREDENTIAL]", "n": 2},
            REDACTED_KEY: {"aws_access_key_id": 2},
        },
    }
    _nothing_stored_a_reader_could_read(lambda_env)


def test_the_sqs_message_redacts_disguised_values_in_content_and_metadata(
    monkeypatch: pytest.MonkeyPatch, lambda_env: str
) -> None:
    from rushmem_tools.local import runtime
    from tests.support.ingest import TEMPLATE, failures, sqs_event, sqs_record

    monkeypatch.setenv("AGENT_MEMORY_PII", "redact")
    body = {
        "user_id": "u-pii",
        "conversation_id": "c1",
        "memories": [{"content": f"Backup mail {DISGUISED['email']}", "metadata": {"card": DISGUISED["card"]}}],
    }
    assert failures(runtime.invoke(TEMPLATE, "IngestFunction", sqs_event(sqs_record(body)))) == []
    _nothing_stored_a_reader_could_read(lambda_env)


def test_metadata_values_are_redacted_on_every_write_path(redacting: Memory, database_url: str) -> None:
    from rushmem_contract.models import MemoryChanges

    (memory_id,) = redacting.add([NewMemory(content="Likes tea", metadata={"mail": EMAIL})], user_id="u1").ids
    memory = redacting.get(memory_id, user_id="u1")
    assert memory.content == "Likes tea" and memory.metadata == {"mail": "[EMAIL]", REDACTED_KEY: {"email": 1}}
    # A change of the metadata alone is redacted too.
    changed = redacting.update(memory_id, MemoryChanges(metadata={"card": DISGUISED["card"], "k": "v"}), user_id="u1")
    assert changed.metadata == {"card": "[PAYMENT_CARD]", "k": "v", REDACTED_KEY: {"payment_card": 1}}
    line = f'{{"user_id": "u2", "content": "Likes coffee", "metadata": {{"key": "{AWS_KEY}"}}}}'
    assert redacting.admin.import_jsonl([(1, line)], ImportReport()).taken == 1
    assert redacting.list(user_id="u2").memories[0].metadata["key"] == "[CREDENTIAL]"
    _nothing_stored_a_reader_could_read(database_url)


def test_in_drop_mode_personal_data_in_metadata_drops_the_memory_or_refuses_the_change(
    settings: Settings, database_url: str
) -> None:
    from rushmem_contract.errors import InvalidInput
    from rushmem_contract.models import MemoryChanges

    dropping = Memory(settings.model_copy(update={"pii": PiiPolicy.parse("redact,credential=drop")}))
    try:
        stored = dropping.add([NewMemory(content="Deploys daily", metadata={"k": [1, {"s": AWS_KEY}]})], user_id="u1")
        assert stored.ids == [] and stored.pii_dropped == [0]
        (memory_id,) = dropping.add([NewMemory(content="Deploys weekly")], user_id="u1").ids
        with pytest.raises(InvalidInput) as refused:
            dropping.update(memory_id, MemoryChanges(metadata={"deploy": {"key": DISGUISED["key"]}}), user_id="u1")
        assert refused.value.field == "metadata.deploy.key"
        assert dropping.get(memory_id, user_id="u1").metadata == {}
    finally:
        dropping.close()
    _nothing_stored_a_reader_could_read(database_url)

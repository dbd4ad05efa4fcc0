"""The Amazon Comprehend PII provider against botocore's Stubber: merging, limits, throttling, errors."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.stub import Stubber

from rushmem.privacy import RegexDetector, redact, redact_many
from rushmem.providers.comprehend import ComprehendPiiDetector, chunks
from rushmem.providers.retry import RetryPolicy
from rushmem.usage import metering
from rushmem_contract.errors import ConfigurationError, ProviderError


def _entity(text: str, value: str, kind: str, score: float = 0.99) -> dict[str, Any]:
    start = text.index(value)
    return {"Type": kind, "Score": score, "BeginOffset": start, "EndOffset": start + len(value)}


def _respond(stubber: Stubber, text: str, entities: list[dict[str, Any]], language: str = "en") -> None:
    stubber.add_response(
        "detect_pii_entities", {"Entities": entities}, expected_params={"Text": text, "LanguageCode": language}
    )


def test_names_and_addresses_merge_with_the_regex_findings(comprehend_stub: tuple[Any, Stubber]) -> None:
    client, stubber = comprehend_stub
    text = "Maria Garcia lives at 742 Evergreen Terrace, Springfield and mails maria@example.com on 2024-05-01"
    _respond(
        stubber,
        text,
        [
            _entity(text, "Maria Garcia", "NAME"),
            _entity(text, "742 Evergreen Terrace, Springfield", "ADDRESS", 0.97),
            _entity(text, "maria@example.com", "EMAIL"),
            _entity(text, "2024-05-01", "DATE_TIME"),  # not a type kept by default: dates stay in memories
        ],
    )
    result = redact(text, "redact", detectors=[RegexDetector(), ComprehendPiiDetector(client)])
    assert result.text == "[NAME] lives at [ADDRESS] and mails [EMAIL] on 2024-05-01"
    assert result.removed == {"address": 1, "email": 1, "name": 1}


def test_a_category_mode_applies_to_comprehend_findings(comprehend_stub: tuple[Any, Stubber]) -> None:
    client, stubber = comprehend_stub
    text = "Tom Baker moved to 10 Downing Street, London"
    _respond(stubber, text, [_entity(text, "Tom Baker", "NAME"), _entity(text, "10 Downing Street, London", "ADDRESS")])
    result = redact(text, "redact,name=off", detectors=[ComprehendPiiDetector(client)])
    assert result.text == "Tom Baker moved to [ADDRESS]"
    assert result.removed == {"address": 1}


def test_low_scores_and_unrequested_types_are_ignored(comprehend_stub: tuple[Any, Stubber]) -> None:
    client, stubber = comprehend_stub
    text = "Paris Hilton stayed in Paris"
    _respond(stubber, text, [_entity(text, "Paris Hilton", "NAME", 0.55), _entity(text, "Paris", "ADDRESS", 0.95)])
    found = ComprehendPiiDetector(client, entity_types={"NAME"}, min_score=0.8).detect(text)
    assert found == []


def test_all_types_when_asked_mapped_to_categories(comprehend_stub: tuple[Any, Stubber]) -> None:
    client, stubber = comprehend_stub
    text = "passport X1234567 and password hunter2"
    _respond(stubber, text, [_entity(text, "X1234567", "PASSPORT_NUMBER"), _entity(text, "hunter2", "PASSWORD")])
    found = ComprehendPiiDetector(client, entity_types=None).detect(text)
    assert [(f.type, f.category, f.source) for f in found] == [
        ("passport_number", "government_id", "comprehend"),
        ("password", "credential", "comprehend"),
    ]


def test_throttling_is_retried_with_backoff_then_succeeds(comprehend_stub: tuple[Any, Stubber]) -> None:
    client, stubber = comprehend_stub
    text = "Call Ana Lima"
    for _ in range(2):
        stubber.add_client_error("detect_pii_entities", "ThrottlingException", "Rate exceeded", 400)
    _respond(stubber, text, [_entity(text, "Ana Lima", "NAME")])
    sleeps: list[float] = []
    retry = RetryPolicy(max_retries=3, base_delay_s=0.1, sleep=sleeps.append, jitter=lambda _low, high: high)
    found = ComprehendPiiDetector(client, retry=retry).detect(text)
    assert [text[f.start : f.end] for f in found] == ["Ana Lima"]
    assert sleeps == [0.1, 0.2]  # the shared policy's backoff


def test_throttling_gives_up_after_the_bounded_attempts(comprehend_stub: tuple[Any, Stubber]) -> None:
    client, stubber = comprehend_stub
    for _ in range(3):
        stubber.add_client_error("detect_pii_entities", "ThrottlingException", "Rate exceeded", 400)
    detector = ComprehendPiiDetector(client, retry=RetryPolicy(max_retries=2, sleep=lambda _s: None))
    with pytest.raises(ProviderError) as err:
        detector.detect("Call Ana Lima")
    assert err.value.provider == "comprehend"
    assert "ThrottlingException" in str(err.value) and "3 attempts" in str(err.value)


def test_server_errors_are_retried(comprehend_stub: tuple[Any, Stubber]) -> None:
    client, stubber = comprehend_stub
    stubber.add_client_error("detect_pii_entities", "InternalServerException", "oops", 500)
    _respond(stubber, "Ana Lima", [])
    assert ComprehendPiiDetector(client, retry=RetryPolicy(sleep=lambda _s: None)).detect("Ana Lima") == []


def test_a_rejected_request_is_not_retried(comprehend_stub: tuple[Any, Stubber]) -> None:
    client, stubber = comprehend_stub
    stubber.add_client_error("detect_pii_entities", "AccessDeniedException", "not allowed", 400)
    no_retry = RetryPolicy(sleep=lambda _s: pytest.fail("no retry expected"))
    with pytest.raises(ProviderError, match=r"^comprehend: AccessDeniedException: not allowed"):
        ComprehendPiiDetector(client, retry=no_retry).detect("Ana Lima")


def test_long_texts_are_split_under_the_size_limit_and_offsets_shifted(comprehend_stub: tuple[Any, Stubber]) -> None:
    client, stubber = comprehend_stub
    text = "José Álvarez wrote first. Zoë Ng replied about the café. They met on Rua Augusta in Lisboa."
    pieces = list(chunks(text, 30))
    assert [piece for _, piece in pieces][:2] == ["José Álvarez wrote first. ", "Zoë Ng replied about the"]
    assert all(len(piece.encode()) <= 30 for _, piece in pieces)
    assert "".join(piece for _, piece in pieces) == text
    for _, piece in pieces:
        entities = [_entity(piece, name, "NAME") for name in ("José Álvarez", "Zoë Ng") if name in piece]
        _respond(stubber, piece, entities)
    found = ComprehendPiiDetector(client, max_text_bytes=30).detect(text)
    assert [text[f.start : f.end] for f in found] == ["José Álvarez", "Zoë Ng"]


def test_a_size_error_splits_the_request(comprehend_stub: tuple[Any, Stubber]) -> None:
    client, stubber = comprehend_stub
    text = "Ana Lima and Rui Costa"
    stubber.add_client_error("detect_pii_entities", "TextSizeLimitExceededException", "too big", 400)
    _respond(stubber, "Ana Lima", [_entity("Ana Lima", "Ana Lima", "NAME")])
    _respond(stubber, " and Rui Costa", [_entity(" and Rui Costa", "Rui Costa", "NAME")])
    found = ComprehendPiiDetector(client).detect(text)
    assert [text[f.start : f.end] for f in found] == ["Ana Lima", "Rui Costa"]


def test_several_memories_share_one_request(comprehend_stub: tuple[Any, Stubber]) -> None:
    client, stubber = comprehend_stub
    memories = ["Ana Lima likes tea", "nothing here", "Rui Costa lives at 5 Elm Road, Leeds"]
    joined = "\n\n".join(memories)
    _respond(
        stubber,
        joined,
        [
            _entity(joined, "Ana Lima", "NAME"),
            _entity(joined, "Rui Costa", "NAME"),
            _entity(joined, "5 Elm Road, Leeds", "ADDRESS"),
        ],
    )
    per_memory = ComprehendPiiDetector(client).detect_many(memories)
    assert [[m[f.start : f.end] for f in found] for m, found in zip(memories, per_memory, strict=True)] == [
        ["Ana Lima"],
        [],
        ["Rui Costa", "5 Elm Road, Leeds"],
    ]


def test_spanish_is_passed_through_and_blank_text_is_not_sent(comprehend_stub: tuple[Any, Stubber]) -> None:
    client, stubber = comprehend_stub
    text = "Lucía Pérez vive en Calle Mayor 3, Madrid"
    _respond(stubber, text, [_entity(text, "Lucía Pérez", "NAME")], language="es")
    detector = ComprehendPiiDetector(client, language="es")
    assert detector.detect("   ") == []
    assert [text[f.start : f.end] for f in detector.detect(text)] == ["Lucía Pérez"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"language": "fr"}, "supports languages en, es"),
        ({"entity_types": {"NAME", "SHOE_SIZE"}}, "SHOE_SIZE"),
    ],
)
def test_bad_configuration_is_refused_up_front(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        ComprehendPiiDetector(object(), **kwargs)


def test_no_client_is_built_until_the_first_call() -> None:
    detector = ComprehendPiiDetector(region="us-east-1")
    assert detector._client is None
    assert detector.detect("") == []
    assert detector._client is None


def test_one_conversations_facts_go_to_comprehend_in_one_request(comprehend_stub: tuple[Any, Stubber]) -> None:
    client, stubber = comprehend_stub
    facts = ["Ana Lima's e-mail is ana@example.com", "Ana Lima prefers tea", "The project is due in May"]
    joined = "\n\n".join(facts)
    start = joined.index("Ana Lima prefers")
    _respond(
        stubber,
        joined,
        [
            _entity(joined, "Ana Lima", "NAME"),
            {"Type": "NAME", "Score": 0.99, "BeginOffset": start, "EndOffset": start + 8},
        ],
    )
    results = redact_many(facts, "redact,email=drop", detectors=[RegexDetector(), ComprehendPiiDetector(client)])
    assert [(r.action, r.text, r.removed) for r in results] == [
        ("dropped", "", {"email": 1, "name": 1}),
        ("redacted", "[NAME] prefers tea", {"name": 1}),
        ("kept", "The project is due in May", {}),
    ]


def test_each_request_is_counted_in_the_usage_with_its_characters(comprehend_stub: tuple[Any, Stubber]) -> None:
    client, stubber = comprehend_stub
    memories = ["Ana Lima likes tea", "Rui Costa lives in Leeds"]
    stubber.add_client_error("detect_pii_entities", "ThrottlingException", "Rate exceeded", 400)
    _respond(stubber, "\n\n".join(memories), [])
    with metering() as meter:
        ComprehendPiiDetector(client, retry=RetryPolicy(sleep=lambda _s: None)).detect_many(memories)
    # One billed request (the throttled attempt is not billed), its characters as sent.
    [row] = meter.rows()
    assert (row.kind, row.model, row.count.calls, row.count.characters) == ("pii", "comprehend", 1, 44)


def test_a_lookalike_letter_does_not_hide_a_name_from_comprehend(comprehend_stub: tuple[Any, Stubber]) -> None:
    """Comprehend reads the Latin form (a Cyrillic "а" in "Mаria" as "a"); accents of Latin letters
    stay as written; the redaction replaces the characters the reader sees."""
    client, stubber = comprehend_stub
    text = "M\u0430ria Garc\u00eda likes tea"  # a Cyrillic a, a Latin i with an accent
    seen = "Maria Garc\u00eda likes tea"
    _respond(stubber, seen, [_entity(seen, "Maria Garc\u00eda", "NAME")])
    result = redact(text, "redact", detectors=[ComprehendPiiDetector(client)])
    assert result.text == "[NAME] likes tea"

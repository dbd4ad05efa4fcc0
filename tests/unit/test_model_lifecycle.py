"""The Bedrock model lifecycle check (providers.lifecycle), against botocore's Stubber with the
request and response shapes of GetInferenceProfile and GetFoundationModel."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from botocore.stub import Stubber

from rushmem.config import Settings
from rushmem.providers import lifecycle
from tests.support.bedrock import bedrock_client, model_answer, profile_answer

NOW = datetime(2026, 12, 4, 12, tzinfo=UTC)
NOVA_2_LITE = "us.amazon.nova-2-lite-v1:0"
HAIKU_45 = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
TITAN = "amazon.titan-embed-text-v2:0"


def test_the_defaults_are_the_checked_ones() -> None:
    settings = Settings(llm_provider="bedrock", embedding_provider="bedrock", rerank_provider="bedrock")
    assert lifecycle.configured_models(settings) == [
        ("extraction", NOVA_2_LITE),
        ("embeddings", TITAN),
        ("rerank", "amazon.rerank-v1:0"),
    ]
    assert lifecycle.configured_models(Settings(llm_provider="rules", embedding_provider="hash")) == []


@pytest.mark.parametrize(
    ("model_id", "profile"),
    [
        (NOVA_2_LITE, True),
        ("global.amazon.nova-2-lite-v1:0", True),
        ("eu.amazon.nova-2-lite-v1:0", True),
        ("amazon.nova-2-lite-v1:0", False),
        (TITAN, False),
    ],
)
def test_profile_ids_are_told_from_model_ids(model_id: str, profile: bool) -> None:
    assert lifecycle.is_inference_profile(model_id) is profile


def test_an_active_profile_and_an_active_model_pass() -> None:
    client = bedrock_client()
    with Stubber(client) as stub:
        stub.add_response(
            "get_inference_profile",
            profile_answer(NOVA_2_LITE, "amazon.nova-2-lite-v1:0"),
            {"inferenceProfileIdentifier": NOVA_2_LITE},
        )
        stub.add_response(
            "get_foundation_model",
            model_answer("amazon.nova-2-lite-v1:0", "ACTIVE"),
            {"modelIdentifier": "amazon.nova-2-lite-v1:0"},
        )
        stub.add_response("get_foundation_model", model_answer(TITAN, "ACTIVE"), {"modelIdentifier": TITAN})
        checks = lifecycle.check_models(client, [("extraction", NOVA_2_LITE), ("embeddings", TITAN)], now=NOW)
        stub.assert_no_pending_responses()
    assert [(c.status, c.foundation_model, c.ok, c.warning) for c in checks] == [
        ("ACTIVE", "amazon.nova-2-lite-v1:0", True, False),
        ("ACTIVE", TITAN, True, False),
    ]


def test_a_legacy_model_warns_with_its_end_of_life_date() -> None:
    client = bedrock_client()
    eol = NOW + timedelta(days=90)
    with Stubber(client) as stub:
        stub.add_response(
            "get_inference_profile",
            profile_answer(HAIKU_45, "anthropic.claude-haiku-4-5-20251001-v1:0"),
            {"inferenceProfileIdentifier": HAIKU_45},
        )
        stub.add_response(
            "get_foundation_model",
            model_answer("anthropic.claude-haiku-4-5-20251001-v1:0", "LEGACY", end_of_life=eol),
            {"modelIdentifier": "anthropic.claude-haiku-4-5-20251001-v1:0"},
        )
        [check] = lifecycle.check_models(client, [("extraction", HAIKU_45)], now=NOW)
    assert check.ok and check.warning
    message = check.message()
    assert "LEGACY" in message and eol.date().isoformat() in message
    assert HAIKU_45 in message and "LlmModel" in message and NOVA_2_LITE in message


def test_a_model_past_its_end_of_life_fails_naming_it_and_what_to_set() -> None:
    client = bedrock_client()
    old = "anthropic.claude-3-haiku-20240307-v1:0"
    with Stubber(client) as stub:
        stub.add_response(
            "get_foundation_model",
            model_answer(old, "LEGACY", end_of_life=datetime(2026, 9, 10, tzinfo=UTC)),
            {"modelIdentifier": old},
        )
        [check] = lifecycle.check_models(client, [("extraction", old)], now=NOW)
    assert check.status == "EOL" and not check.ok
    assert old in check.message() and "2026-09-10" in check.message()
    assert f"LlmModel (AGENT_MEMORY_LLM_MODEL) to an Active model, e.g. {NOVA_2_LITE}" in check.message()


def test_a_model_bedrock_no_longer_knows_fails() -> None:
    client = bedrock_client()
    old = "anthropic.claude-3-haiku-20240307-v1:0"
    with Stubber(client) as stub:
        stub.add_client_error(
            "get_foundation_model",
            "ResourceNotFoundException",
            "This model version has reached the end of its life.",
            404,
            expected_params={"modelIdentifier": old},
        )
        [check] = lifecycle.check_models(client, [("extraction", old)], now=NOW)
    assert check.status == "MISSING" and not check.ok
    assert old in check.message() and "ResourceNotFoundException" in check.message()


def test_a_profile_not_offered_in_the_region_fails() -> None:
    client = bedrock_client()
    with Stubber(client) as stub:
        stub.add_client_error(
            "get_inference_profile",
            "ResourceNotFoundException",
            "not found",
            404,
            expected_params={"inferenceProfileIdentifier": "jp.amazon.nova-2-lite-v1:0"},
        )
        [check] = lifecycle.check_models(client, [("extraction", "jp.amazon.nova-2-lite-v1:0")], now=NOW)
    assert check.status == "MISSING"


def test_access_denied_is_not_mistaken_for_a_retired_model() -> None:
    from botocore.exceptions import ClientError

    client = bedrock_client()
    with Stubber(client) as stub:
        stub.add_client_error("get_foundation_model", "AccessDeniedException", "no", 403)
        with pytest.raises(ClientError):
            lifecycle.check_models(client, [("embeddings", TITAN)], now=NOW)

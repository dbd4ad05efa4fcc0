"""botocore Stubber answers of Bedrock's control plane, in the shapes its service model gives:
GetInferenceProfile for a cross-Region profile id and GetFoundationModel's modelLifecycle."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

REGION = "us-east-1"
ACCOUNT = "123456789012"
# The US profile's destination Regions, as GetInferenceProfile lists them.
US_REGIONS = ("us-east-1", "us-east-2", "us-west-2")


def bedrock_client() -> Any:
    import boto3

    return boto3.client("bedrock", region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing")


def profile_answer(profile_id: str, foundation_model: str, regions: tuple[str, ...] = US_REGIONS) -> dict[str, Any]:
    return {
        "inferenceProfileName": f"US {foundation_model}",
        "inferenceProfileArn": f"arn:aws:bedrock:{REGION}:{ACCOUNT}:inference-profile/{profile_id}",
        "inferenceProfileId": profile_id,
        "models": [{"modelArn": f"arn:aws:bedrock:{r}::foundation-model/{foundation_model}"} for r in regions],
        "status": "ACTIVE",
        "type": "SYSTEM_DEFINED",
        "createdAt": datetime(2026, 10, 7, tzinfo=UTC),
        "updatedAt": datetime(2026, 10, 7, tzinfo=UTC),
    }


def model_answer(model_id: str, status: str, *, end_of_life: datetime | None = None) -> dict[str, Any]:
    lifecycle: dict[str, Any] = {"status": status, "startOfLifeTime": datetime(2025, 10, 16, tzinfo=UTC)}
    if end_of_life is not None:
        lifecycle["legacyTime"] = datetime(2026, 4, 1, tzinfo=UTC)
        lifecycle["endOfLifeTime"] = end_of_life
    return {
        "modelDetails": {
            "modelArn": f"arn:aws:bedrock:{REGION}::foundation-model/{model_id}",
            "modelId": model_id,
            "modelName": model_id,
            "providerName": model_id.split(".", 1)[0].capitalize(),
            "inputModalities": ["TEXT"],
            "outputModalities": ["TEXT"],
            "inferenceTypesSupported": ["INFERENCE_PROFILE"],
            "modelLifecycle": lifecycle,
        }
    }

"""The bedrock-runtime client both Bedrock providers use (Titan embeddings, Converse extraction).

boto3 is imported lazily: nothing here runs unless a Bedrock provider is configured.
"""

from __future__ import annotations

from typing import Any

from agent_memory.config import Settings


def bedrock_runtime_client(settings: Settings) -> Any:
    """A bedrock-runtime client with explicit timeouts and bounded retries (botocore standard mode)."""
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=min(settings.http_timeout_s, 10),
        read_timeout=settings.http_timeout_s,
        # total_max_attempts counts the first call; botocore's max_attempts would count retries only.
        retries={"total_max_attempts": settings.max_retries + 1, "mode": "standard"},
    )
    return boto3.client("bedrock-runtime", region_name=settings.bedrock_region, config=config)


def describe_client_error(exc: Exception) -> tuple[str, bool]:
    """(message, retryable) for a botocore error, without request details."""
    from botocore.exceptions import BotoCoreError, ClientError

    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        code = str(err.get("Code", "Error"))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        retryable = code in {"ThrottlingException", "ServiceUnavailableException", "ModelNotReadyException"} or (
            status >= 500
        )
        return f"{code}: {err.get('Message', '')}", retryable
    if isinstance(exc, BotoCoreError):
        return str(exc), True
    return repr(exc), False

"""The bedrock-runtime client both Bedrock providers use (Titan embeddings, Converse extraction),
the bedrock-agent-runtime client of the Rerank API, and how one call goes through the shared
retry policy.

botocore's own retries are off: its standard mode honours only a number of attempts, not the
backoff delay nor the retry budget, so every retry is :mod:`.retry`'s, as for HTTP providers.
boto3 is imported lazily: nothing here runs unless a Bedrock provider is configured.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from rushmem.config import Settings
from rushmem.providers.aws import aws_client
from rushmem.providers.retry import Retryable, RetryPolicy, parse_retry_after
from rushmem_contract.errors import ConfigurationError, ProviderError
from rushmem_contract.retry import PROVIDER_RETRY_STATUSES

T = TypeVar("T")

# Error codes worth another try whatever their status (Bedrock's and botocore's throttling family).
RETRYABLE_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "TooManyRequestsException",
        "ServiceUnavailableException",
        "InternalServerException",
        "ModelNotReadyException",
        "ModelTimeoutException",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)


def bedrock_runtime_client(settings: Settings) -> Any:
    """A bedrock-runtime client with explicit timeouts and a single attempt per call (call_bedrock retries)."""
    return aws_client(
        "bedrock-runtime",
        settings.bedrock_region,
        connect_timeout=min(settings.http_timeout_s, 10),
        read_timeout=settings.http_timeout_s,
    )


def bedrock_agent_runtime_client(settings: Settings, *, timeout_s: float) -> Any:
    """A bedrock-agent-runtime client (the Rerank API) with a short timeout and a single attempt
    per call: a reranker sits on recall's path, so it answers quickly or not at all."""
    return aws_client(
        "bedrock-agent-runtime", settings.bedrock_region, connect_timeout=timeout_s, read_timeout=timeout_s
    )


# Answers that no retry changes and a person fixes in the configuration: the model id is unknown in
# this Region (ResourceNotFoundException), or the caller may not use it (AccessDeniedException: the
# model's access not granted, or the role's policy).
CONFIGURATION_CODES = frozenset({"ResourceNotFoundException", "AccessDeniedException"})


def call_bedrock(
    retry: RetryPolicy,
    provider: str,
    model: str,
    request: Callable[[], T],
    *,
    deadline: float | None = None,
    model_setting: str = "the model's setting",
) -> T:
    """``request()`` (one Bedrock call, reading its answer) under the retry policy.

    Throttling, 5xx, timeouts and connection errors are retried; other botocore errors (validation)
    fail at once. Either way the error is a :class:`ProviderError` naming ``provider`` and ``model``,
    without request details; an unknown or refused model and missing credentials are a
    :class:`ConfigurationError` naming what to set (``model_setting``, the Region, the credentials).
    """
    from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError, NoCredentialsError
    from botocore.exceptions import ConnectionError as BotoConnectionError

    def attempt() -> T:
        try:
            return request()
        except ClientError as exc:
            err = exc.response.get("Error", {})
            code = str(err.get("Code", "Error"))
            meta = exc.response.get("ResponseMetadata", {})
            status = int(meta.get("HTTPStatusCode", 0) or 0)
            message = f"{model}: {code}: {err.get('Message', '')}"
            if code in RETRYABLE_CODES or status in PROVIDER_RETRY_STATUSES:
                headers = meta.get("HTTPHeaders") or {}
                raise Retryable(message, parse_retry_after(headers.get("retry-after"))) from exc
            if code in CONFIGURATION_CODES:
                raise ConfigurationError(
                    f"{provider}: {message}: check {model_setting} and RUSHMEM_BEDROCK_REGION, and that the "
                    "model's access is granted there"
                ) from None
            raise ProviderError(provider, message) from exc
        except NoCredentialsError:
            raise ConfigurationError(
                f"{provider}: no AWS credentials: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                "(in AWS, the function's role)"
            ) from None
        except (BotoConnectionError, HTTPClientError) as exc:  # timeouts, refused, reset, cut streams
            raise Retryable(f"{model}: {exc}") from exc
        except BotoCoreError as exc:
            raise ProviderError(provider, f"{model}: {exc}") from exc

    return retry.call(provider, attempt, deadline=deadline)

"""The boto3 clients every AWS provider builds, and the few AWS calls the package makes outside
the providers: secrets and RDS IAM tokens.

boto3 is imported lazily: locally none of this runs. Settings name the secrets; the values
are fetched here, on first use, never when settings are read.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rushmem_contract.errors import ConfigurationError

if TYPE_CHECKING:
    from pydantic import SecretStr

    from rushmem.config import Settings


def aws_client(
    service: str,
    region: str | None,
    *,
    attempts: int = 1,
    endpoint_url: str | None = None,
    region_setting: str = "RUSHMEM_BEDROCK_REGION (or AWS_DEFAULT_REGION)",
    **config: Any,
) -> Any:
    """A boto3 client with botocore's ``config`` (the timeouts); ``attempts`` counts the first call
    (1: botocore never retries, the retries are the caller's: :mod:`.retry`'s policy, or none).
    No Region anywhere (setting, environment, profile) is a ConfigurationError naming ``region_setting``."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import NoRegionError

    retries: Any = {"total_max_attempts": attempts, "mode": "standard"}
    client: Callable[..., Any] = boto3.client  # its stubs type it per literal service name
    try:
        return client(service, region_name=region, endpoint_url=endpoint_url, config=Config(retries=retries, **config))
    except NoRegionError:
        raise ConfigurationError(f"{service}: no AWS Region: set {region_setting}") from None


def get_secret_value(secret_arn: str, *, force: bool = False) -> str:
    """A Secrets Manager secret, cached per container by Powertools (refreshed every 5 minutes;
    ``force``: fetched now, for a value known to have changed)."""
    from aws_lambda_powertools.utilities import parameters

    try:
        value = parameters.get_secret(secret_arn, max_age=300, force_fetch=force)
    except parameters.exceptions.GetParameterError as exc:
        raise ConfigurationError(f"cannot read secret {secret_arn}: {exc}") from exc
    return value if isinstance(value, str) else value.decode()


def clear_secret_cache() -> None:
    """Forget every secret fetched so far (the next read fetches it again)."""
    if "aws_lambda_powertools.utilities.parameters" not in sys.modules:
        return  # nothing was ever fetched: importing the module would only cost time
    from aws_lambda_powertools.utilities import parameters

    parameters.clear_caches()  # type: ignore[no-untyped-call]


def get_api_key(secret_arn: str) -> str:
    """An API key stored either as the plain secret string or as JSON {"api_key": ...}."""
    raw = get_secret_value(secret_arn)
    try:
        data = json.loads(raw)
    except ValueError:
        return raw.strip()
    if isinstance(data, dict):
        for key in ("api_key", "apiKey", "key"):
            if isinstance(data.get(key), str):
                return str(data[key])
        raise ConfigurationError(f"secret {secret_arn} is JSON without an 'api_key' field")
    return raw.strip()


def get_db_credentials(secret_arn: str) -> dict[str, Any]:
    """username/password (and optionally host, port, dbname) from an RDS-style secret."""
    try:
        data = json.loads(get_secret_value(secret_arn))
    except ValueError as exc:
        raise ConfigurationError(f"secret {secret_arn} is not JSON with username and password") from exc
    if not isinstance(data, dict) or "username" not in data or "password" not in data:
        raise ConfigurationError(f"secret {secret_arn} has no username/password fields")
    return data


def rds_iam_token(host: str, port: int, user: str, region: str | None = None) -> str:
    """A 15-minute IAM authentication token for RDS/Aurora/RDS Proxy (rds-db:connect)."""
    import boto3

    client = boto3.client("rds", region_name=region)
    return str(client.generate_db_auth_token(DBHostname=host, Port=port, DBUsername=user))


def _api_key(value: SecretStr | None, secret_arn: str | None) -> str | None:
    """A key from the environment, else from Secrets Manager; None when neither is configured."""
    if value is not None:
        return value.get_secret_value()
    return get_api_key(secret_arn) if secret_arn else None


def openai_api_key(settings: Settings) -> str | None:
    """The OpenAI-compatible API key."""
    return _api_key(settings.openai_api_key, settings.openai_api_key_secret_arn)


def llm_api_key(settings: Settings) -> str | None:
    """The chat API key: llm_api_key, its secret, else the OpenAI-compatible key (embeddings')."""
    key = _api_key(settings.llm_api_key, settings.llm_api_key_secret_arn)
    return key if key is not None else openai_api_key(settings)


def rerank_api_key(settings: Settings) -> str | None:
    """The cohere rerank provider's API key."""
    return _api_key(settings.rerank_api_key, settings.rerank_api_key_secret_arn)


def app_db_credentials(settings: Settings) -> tuple[str, str] | None:
    """(username, password) from app_db_secret_arn, or None when no secret is configured."""
    if not settings.app_db_secret_arn:
        return None
    creds = get_db_credentials(settings.app_db_secret_arn)
    return str(creds["username"]), str(creds["password"])

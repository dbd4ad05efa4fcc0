"""The few AWS calls the package makes outside the Bedrock providers: secrets and RDS IAM tokens.

boto3 is imported lazily: locally none of this runs.
"""

from __future__ import annotations

import json
from typing import Any

from agent_memory.errors import ConfigurationError


def get_secret_value(secret_arn: str) -> str:
    """A Secrets Manager secret, cached per container by Powertools (refreshed every 5 minutes)."""
    from aws_lambda_powertools.utilities import parameters

    try:
        value = parameters.get_secret(secret_arn, max_age=300)
    except parameters.exceptions.GetParameterError as exc:
        raise ConfigurationError(f"cannot read secret {secret_arn}: {exc}") from exc
    return value if isinstance(value, str) else value.decode()


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

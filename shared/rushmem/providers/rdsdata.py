"""The RDS Data API (``rds-data``): SQL over HTTPS with IAM, for an Aurora cluster reached without
a connection (RUSHMEM_DB_CLUSTER_ARN). Only the calls and their errors live here; what the
statements say and how values travel is the store's (:mod:`rushmem.store.engine.dataapi`).

botocore retries nothing here: a retried ExecuteStatement could run a statement twice. The one
retry is for a cluster resuming from auto-pause (DatabaseResumingException: nothing ran), and
only within ``resume_wait_s``.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rushmem.providers.aws import aws_client
from rushmem_contract.errors import ConfigurationError, DatabaseResuming, DatabaseUnavailable, StatementTimeout

logger = logging.getLogger(__name__)

# A PostgreSQL error reaches the caller as BadRequestException whose message ends with the
# statement's SQLSTATE ("...; SQLState: 23505"): the only place the protocol carries the code.
_SQLSTATE = re.compile(r"SQLState: ([0-9A-Z]{5})")

# AWS states that a paused Aurora Serverless v2 cluster resumes in about 15 seconds.
RESUME_SECONDS = 15


class StatementFailed(Exception):
    """The database refused a statement (BadRequestException): its message and SQLSTATE, when the
    message names one (None: the Data API itself refused the request, e.g. a parameter type)."""

    def __init__(self, message: str, sqlstate: str | None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class ResponseTooLarge(StatementFailed):
    """The statement ran, but its answer is over the Data API's 1 MiB ("Database response exceeded
    size limit"): the rows must be read in smaller parts (the store reads them through a cursor)."""


# AWS's troubleshooting page names the error "Database response exceeded size limit"; the service's
# message has also read "Database returned more than the allowed response size limit".
_TOO_LARGE = re.compile(r"response (exceeded|size) (size )?limit", re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class DataApiTarget:
    resource_arn: str  # the Aurora cluster
    secret_arn: str  # the database login the Data API uses
    database: str
    endpoint_url: str | None = None  # a local stand-in instead of rds-data.<region>.amazonaws.com
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 50.0  # the Data API ends a statement at 45 s
    resume_wait_s: float = 0.0  # how long a call waits for a paused cluster before DatabaseResuming

    @property
    def region(self) -> str:
        parts = self.resource_arn.split(":")
        return parts[3] if len(parts) > 3 and parts[3] else "us-east-1"


@functools.lru_cache(maxsize=8)
def _client(region: str, endpoint_url: str | None, connect_timeout_s: float, read_timeout_s: float) -> Any:
    return aws_client(
        "rds-data",
        region,
        connect_timeout=connect_timeout_s,
        read_timeout=read_timeout_s,
        endpoint_url=endpoint_url,
        tcp_keepalive=True,
    )


class DataApi:
    """The five calls the store makes, with errors as the package's types."""

    def __init__(self, target: DataApiTarget, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.target = target
        self._sleep = sleep

    @property
    def client(self) -> Any:
        t = self.target
        return _client(t.region, t.endpoint_url, t.connect_timeout_s, t.read_timeout_s)

    def _base(self) -> dict[str, str]:
        return {"resourceArn": self.target.resource_arn, "secretArn": self.target.secret_arn}

    def execute(
        self, sql: str, parameters: Sequence[Mapping[str, Any]], transaction_id: str | None = None
    ) -> dict[str, Any]:
        request: dict[str, Any] = {
            **self._base(),
            "database": self.target.database,
            "sql": sql,
            "parameters": list(parameters),
            "includeResultMetadata": True,
        }
        if transaction_id is not None:
            request["transactionId"] = transaction_id
        return self._call("execute_statement", request)

    def batch_execute(
        self, sql: str, parameter_sets: Sequence[Sequence[Mapping[str, Any]]], transaction_id: str | None = None
    ) -> dict[str, Any]:
        request: dict[str, Any] = {
            **self._base(),
            "database": self.target.database,
            "sql": sql,
            "parameterSets": [list(p) for p in parameter_sets],
        }
        if transaction_id is not None:
            request["transactionId"] = transaction_id
        return self._call("batch_execute_statement", request)

    def begin(self) -> str:
        return str(self._call("begin_transaction", {**self._base(), "database": self.target.database})["transactionId"])

    def commit(self, transaction_id: str) -> None:
        self._call("commit_transaction", {**self._base(), "transactionId": transaction_id})

    def rollback(self, transaction_id: str) -> None:
        self._call("rollback_transaction", {**self._base(), "transactionId": transaction_id})

    def _call(self, operation: str, request: dict[str, Any]) -> dict[str, Any]:
        from botocore.exceptions import BotoCoreError, ClientError

        deadline = time.monotonic() + self.target.resume_wait_s
        delay = 1.0
        while True:
            try:
                response: dict[str, Any] = getattr(self.client, operation)(**request)
                return response
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                message = str(exc.response.get("Error", {}).get("Message", "")) or str(exc)
                if code == "DatabaseResumingException":
                    left = deadline - time.monotonic()
                    if left > 0:
                        logger.info("the database is resuming; waiting", extra={"wait_s": min(delay, left)})
                        self._sleep(min(delay, left))
                        delay = min(delay * 2, 5.0)
                        continue
                    raise DatabaseResuming(
                        f"the Aurora cluster is resuming from auto-pause (about {RESUME_SECONDS} s)"
                    ) from exc
                raise _translate(code, message) from exc
            except BotoCoreError as exc:
                raise DatabaseUnavailable(f"the RDS Data API could not be reached: {exc}") from exc


_UNAVAILABLE = frozenset(
    {
        "DatabaseUnavailableException",
        "InternalServerErrorException",
        "InvalidResourceStateException",
        "ServiceUnavailableError",
        "ThrottlingException",
        "TransactionNotFoundException",
    }
)


def _translate(code: str, message: str) -> Exception:
    if code in ("BadRequestException", "DatabaseErrorException"):
        if _TOO_LARGE.search(message) and not _SQLSTATE.search(message):
            return ResponseTooLarge(message, None)
        found = _SQLSTATE.search(message)
        return StatementFailed(message, found.group(1) if found else None)
    if code == "StatementTimeoutException":
        return StatementTimeout(f"the RDS Data API ended the statement: {message}")
    if code in _UNAVAILABLE:
        # TransactionNotFoundException: the transaction ended (3 minutes idle, or an earlier error).
        return DatabaseUnavailable(f"the RDS Data API failed: {code}: {message}")
    # AccessDeniedException, ForbiddenException, SecretsErrorException, HttpEndpointNotEnabledException,
    # InvalidSecretException, ...: the deployment is wrong, retrying would not help.
    return ConfigurationError(f"the RDS Data API refused the request: {code}: {message}")

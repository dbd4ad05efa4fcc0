"""Every error type and the HTTP answer it becomes: the one table where error types meet status
codes. The server answers from it (:mod:`.handlers`); the client decodes answers back with it
(:mod:`agent_memory_client.errors`). No web framework is imported here.
"""

from __future__ import annotations

import dataclasses

from agent_memory_contract.errors import (
    AgentMemoryError,
    ConfigurationError,
    Conflict,
    DatabaseResuming,
    DatabaseUnavailable,
    Forbidden,
    InputTooLarge,
    InvalidInput,
    NotFound,
    ProviderError,
    StatementTimeout,
)


@dataclasses.dataclass(frozen=True)
class ErrorKind:
    error: type[AgentMemoryError]
    status: int
    code: str
    # None: the exception's own message (it is about the request). Otherwise this fixed text,
    # because the real message names hosts, settings or providers (logged, never returned).
    public_message: str | None = None


# Most specific first: the first kind the exception is an instance of wins.
ERROR_KINDS: tuple[ErrorKind, ...] = (
    ErrorKind(InputTooLarge, 413, "input_too_large"),
    ErrorKind(Conflict, 409, "conflict"),
    ErrorKind(InvalidInput, 400, "invalid_input"),
    ErrorKind(Forbidden, 403, "forbidden"),
    ErrorKind(NotFound, 404, "not_found"),
    ErrorKind(StatementTimeout, 503, "statement_timeout", "the database took too long to answer; try again"),
    ErrorKind(DatabaseResuming, 503, "database_resuming", "the database is resuming from a pause; try again in 15 s"),
    ErrorKind(DatabaseUnavailable, 503, "database_unavailable", "the database is unavailable; try again shortly"),
    ErrorKind(ProviderError, 502, "provider_error", "the embedding provider failed; try again"),
    ErrorKind(ConfigurationError, 500, "configuration_error", "the service is misconfigured (see its logs)"),
    ErrorKind(AgentMemoryError, 500, "internal_error", "internal error (see the service logs)"),
)
INTERNAL = ErrorKind(AgentMemoryError, 500, "internal_error", "internal error (see the service logs)")
RETRY_AFTER_S = 1


def error_kind(exc: BaseException) -> ErrorKind:
    for kind in ERROR_KINDS:
        if isinstance(exc, kind.error):
            return kind
    return INTERNAL

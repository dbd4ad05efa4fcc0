"""Every error type and what each door makes of it: the one table where error types meet HTTP
statuses, error codes, public messages, CLI exit codes and whether a retry may help.

The HTTP API answers from it (:mod:`rushmem.http.errors`), the MCP tools word their errors
with it (:mod:`rushmem.mcp.tools`), the CLI exits with its codes
(:mod:`rushmem_tools.cli.main`) and the client decodes answers back into the same exception
types with it (:mod:`rushmem_client.errors`). No web framework is imported here.
"""

from __future__ import annotations

import dataclasses

from rushmem_contract.errors import (
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
    ServiceUnavailable,
    StatementTimeout,
)
from rushmem_contract.retry import is_retryable_status

# The CLI's exit codes (docs/cli.md): 0 done, 1 any other failure, 2 bad input, 3 configuration,
# 4 database unavailable, 5 provider failure, 6 partly done (an import that skipped lines it could
# not take, after taking the rest: a script tells it from a whole import and from a failure).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_CONFIG = 3
EXIT_DATABASE = 4
EXIT_PROVIDER = 5
EXIT_PARTIAL = 6


@dataclasses.dataclass(frozen=True)
class ErrorKind:
    error: type[AgentMemoryError]
    status: int
    code: str
    exit_code: int
    # None: the exception's own message (it is about the request). Otherwise this fixed text,
    # because the real message names hosts, settings or providers (logged, never returned).
    public_message: str | None = None

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed later (the one retry policy's statuses)."""
        return is_retryable_status(self.status)

    def message(self, exc: BaseException) -> str:
        """What a caller is told about ``exc``."""
        return self.public_message or str(exc)


INTERNAL = ErrorKind(AgentMemoryError, 500, "internal_error", EXIT_ERROR, "internal error (see the service logs)")

# Most specific first: the first kind the exception is an instance of wins.
ERROR_KINDS: tuple[ErrorKind, ...] = (
    ErrorKind(InputTooLarge, 413, "input_too_large", EXIT_USAGE),
    ErrorKind(Conflict, 409, "conflict", EXIT_USAGE),
    ErrorKind(InvalidInput, 400, "invalid_input", EXIT_USAGE),
    ErrorKind(Forbidden, 403, "forbidden", EXIT_ERROR),
    ErrorKind(NotFound, 404, "not_found", EXIT_ERROR),
    ErrorKind(
        StatementTimeout, 503, "statement_timeout", EXIT_DATABASE, "the database took too long to answer; try again"
    ),
    ErrorKind(
        DatabaseResuming,
        503,
        "database_resuming",
        EXIT_DATABASE,
        "the database is resuming from a pause; try again in 15 s",
    ),
    ErrorKind(
        DatabaseUnavailable,
        503,
        "database_unavailable",
        EXIT_DATABASE,
        "the database is unavailable; try again shortly",
    ),
    ErrorKind(ProviderError, 502, "provider_error", EXIT_PROVIDER, "the embedding provider failed; try again"),
    ErrorKind(
        ConfigurationError, 500, "configuration_error", EXIT_CONFIG, "the service is misconfigured (see its logs)"
    ),
    # Raised by the client only (the API unreachable, throttled or failing after the retries).
    ErrorKind(ServiceUnavailable, 503, "service_unavailable", EXIT_ERROR, "the memory API is unavailable; try again"),
    INTERNAL,
)


def error_kind(exc: BaseException) -> ErrorKind:
    for kind in ERROR_KINDS:
        if isinstance(exc, kind.error):
            return kind
    return INTERNAL


def kind_of_code(code: object) -> ErrorKind | None:
    """The kind an error answer's ``code`` names (None: not one of this table's)."""
    return next((kind for kind in ERROR_KINDS if kind.code == code), None)

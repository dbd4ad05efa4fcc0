"""Typed errors. Callers (CLI, handlers) map the type to an exit code or HTTP status in one place."""

from __future__ import annotations


class AgentMemoryError(Exception):
    """Base class: the message is safe to show to the caller."""


class InvalidInput(AgentMemoryError):
    """The request itself is wrong (names the field when there is one). The message begins with
    the field it names, so that every door shows the same line, whether it also carries the
    field apart (HTTP, the clients) or not (an MCP tool's error, the CLI's)."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        if field and not message.startswith(field):
            message = f"{field}: {message}"
        super().__init__(message)
        self.field = field


class InputTooLarge(InvalidInput):
    """A query, memory or message exceeds a configured limit."""


class Conflict(InvalidInput):
    """The change clashes with what is stored: it would make the memory state what another memory
    of the same scope already states (names the field, and the other memory in the message), or
    it decides a held write another decision ended first (names that decision)."""


class NotFound(AgentMemoryError):
    """The memory does not exist for this user."""


class Forbidden(AgentMemoryError):
    """The caller may not act for that user."""


class ConfigurationError(AgentMemoryError):
    """The service is configured in a way that cannot work."""


class SchemaMismatch(ConfigurationError):
    """The stored schema does not fit the configured embedder (dimension or model)."""


class DatabaseUnavailable(AgentMemoryError):
    """PostgreSQL could not be reached or the connection broke."""


class ProviderError(AgentMemoryError):
    """An embedding or LLM provider failed after its retries."""

    def __init__(self, provider: str, message: str) -> None:
        super().__init__(f"{provider}: {message}")
        self.provider = provider


class StatementTimeout(DatabaseUnavailable):
    """A query ran past its statement_timeout (the database is overloaded or the scope is huge)."""


class DatabaseResuming(DatabaseUnavailable):
    """The Aurora cluster is resuming from auto-pause (about 15 s): nothing ran; try again shortly."""


class SchemaChanged(SchemaMismatch):
    """The store moved to another embedding model while this connection was open (reembed switch):
    reconnect and resolve the schema again."""


class ServiceUnavailable(AgentMemoryError):
    """(Client side) the memory API could not be reached, timed out, throttled or failed (429/5xx)."""

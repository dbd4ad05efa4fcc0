"""The public API: :class:`Memory`, the verbs every door calls (the HTTP API, the queue consumer,
MCP, the CLI) and in-process Python code too; its :attr:`~Memory.admin` operates the store.

Memory's verbs are defined in a module per kind of work (:mod:`.writing` and :mod:`.reviewing`, :mod:`.reading`,
:mod:`.editing`, :mod:`.accounting`), its base classes, so each verb's parameters are written once.
What they work with is one object they share, composed rather than inherited: the settings and the
collaborators, built on first use (:class:`.base.Collaborators`); :class:`.operating.Admin` works on
that same object. Names follow mem0's where a verb exists there (add, get, update, delete, history).
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

from rushmem.config import Settings, get_settings
from rushmem.embeddings import Embedder
from rushmem.extraction import Extractor
from rushmem.rerank import Reranker
from rushmem.service.accounting import Accounting
from rushmem.service.base import Collaborators
from rushmem.service.drain import Publish
from rushmem.service.editing import Editing
from rushmem.service.instructing import Instructing
from rushmem.service.operating import Admin
from rushmem.service.reading import Reading
from rushmem.service.reviewing import Reviewing
from rushmem.store.engine.connection import Database


class Memory(Reviewing, Editing, Reading, Accounting, Instructing):
    """Long-term memory for AI agents: add facts, recall them, read, edit and forget them.

    ``Memory()`` takes its settings from the environment (AGENT_MEMORY_*; by default an embedded
    PostgreSQL under AGENT_MEMORY_DATA_DIR and the local embedding model); ``Memory(settings)``
    or keyword overrides (``Memory(embedding_provider="hash")``) choose others, and the keyword
    collaborators stand in for the ones the settings name. Construction does no I/O: the model and
    the database connection are made on first use, then reused, and :meth:`close` (or leaving a
    ``with Memory() as m:`` block) closes the connection.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        embedder: Embedder | None = None,
        database: Database | None = None,
        extractor: Extractor | None = None,
        publisher: Publish | None = None,
        reranker: Reranker | None = None,
        **overrides: Any,
    ) -> None:
        unknown = sorted(set(overrides) - set(Settings.model_fields))
        if unknown:  # the settings ignore unknown keys (the environment's): a typo here must not pass
            raise TypeError(f"Memory() got unknown settings: {', '.join(unknown)}")
        if settings is None:
            settings = Settings(**overrides) if overrides else get_settings()
        elif overrides:
            settings = Settings.model_validate({**settings.model_dump(), **overrides})
        self._parts = Collaborators(
            settings, embedder=embedder, database=database, extractor=extractor, publisher=publisher, reranker=reranker
        )
        self.admin = Admin(self._parts, self.import_)

    @property
    def settings(self) -> Settings:
        """The settings, held once by the collaborators the verbs and the admin share: replacing them
        here replaces them for both."""
        return self._parts.settings

    @settings.setter
    def settings(self, value: Settings) -> None:
        self._parts.settings = value

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the database connections (they are opened again on next use)."""
        self._parts.close()

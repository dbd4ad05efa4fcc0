"""The public API: :class:`Memory`, the operations every door runs (the HTTP API, the queue consumer,
MCP, the CLI), callable in-process too; its :attr:`~Memory.admin` operates the store.

Memory is a thin facade: its methods are the rows of the contract's table, defined once for every
Python door (:mod:`rushmem_contract.methods`: the same names, inputs and refusals as the clients'),
each run by the dispatcher (:mod:`.dispatch`: the caller, the user's cell, the verb, then usage and
events).
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from rushmem.config import Settings, get_settings
from rushmem.embeddings import Embedder
from rushmem.rerank import Reranker
from rushmem.service import recalling
from rushmem.service.batch import QueueBatch
from rushmem.service.caller import Caller
from rushmem.service.cells import Cells
from rushmem.service.context import OPTIONS, Context
from rushmem.service.dispatch import dispatch
from rushmem.service.drain import Publish
from rushmem.service.operating import Admin
from rushmem.store.engine.connection import Database
from rushmem_contract import operations as ops
from rushmem_contract.errors import InvalidInput
from rushmem_contract.methods import Operations
from rushmem_contract.models import ConversationEnded, ImportLine, IngestOutcome, RecallQuery, RecallResult, StoredIds
from rushmem_contract.operations import Operation, Req, Res

if TYPE_CHECKING:  # the extractor is built by the write path, not by a recall
    from rushmem.extraction import Extractor

# In-process code is trusted: it names the user of each call.
IN_PROCESS = Caller()


class Memory(Operations):
    """Long-term memory for AI agents: add facts, recall them, read, edit and forget them.

    ``Memory()`` takes its settings from the environment (RUSHMEM_*; by default an embedded
    PostgreSQL under RUSHMEM_DATA_DIR and the local embedding model); ``Memory(settings)``
    or keyword overrides (``Memory(embedding_provider="hash")``) choose others, and the keyword
    collaborators stand in for the ones the settings name. With RUSHMEM_CELLS, each user's
    calls run in their cell. Construction does no I/O: the model and the database connection are
    made on first use, then reused, and :meth:`close` (or leaving a ``with Memory() as m:`` block)
    closes the connections.
    """

    OPTIONS = OPTIONS

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
        self.cells = Cells(
            settings, embedder=embedder, database=database, extractor=extractor, publisher=publisher, reranker=reranker
        )
        # Operating the store is the home cell's (where the directory lives); letting go of secrets
        # is every cell's.
        self.admin = Admin(self.cells.home_parts, self.import_, release_secrets=self.cells.release_secrets)

    @property
    def settings(self) -> Settings:
        """The settings (with cells, the ones naming every cell; each cell's own point at its database)."""
        return self.cells.settings

    @settings.setter
    def settings(self, value: Settings) -> None:
        self.cells.settings = value
        if not self.cells.configured:
            self.cells.home_parts.settings = value

    def invoke(self, op: Operation[Req, Res], request: Req, *, caller: Caller = IN_PROCESS, **options: Any) -> Res:
        """Run one operation for ``caller`` (in-process code is trusted) through the dispatcher."""
        return dispatch(self.cells, op, request, caller, **options)

    # ---- work over many users: each part in its user's cell ---------------------------------

    def recall_batch(
        self, queries: Sequence[RecallQuery], *, limit: int | None = None
    ) -> builtins.list[RecallResult | InvalidInput]:
        """Recall for many queries, each cell's texts embedded in one batch; per query its result,
        or the InvalidInput that refused it (the others still run), in the queries' order."""
        results: builtins.list[RecallResult | InvalidInput | None] = [None] * len(queries)
        for cell, indexes in self.cells.by_cell([q.user_id for q in queries], write=False).items():
            parts = self.cells.parts[cell]
            ctx = Context(caller=IN_PROCESS, user_id=None)
            answers = recalling.recall_batch(parts, [queries[i] for i in indexes], ctx, limit=limit)
            for i, answer in zip(indexes, answers, strict=True):
                results[i] = answer
        return [r for r in results if r is not None]

    def import_(
        self, lines: Sequence[ImportLine], *, source: str | None = "import", write_id: uuid.UUID | None = None
    ) -> StoredIds:
        """:func:`~rushmem.service.writing.import_lines` for lines of any users, each in its user's
        cell; ``write_id`` (a new one by default) names the import. Ids in the lines' order."""
        # The write path is imported by its first use, not by a recall's cold start (tests/unit/test_imports.py).
        from rushmem.service import moving, writing

        write_id = write_id or uuid.uuid4()
        groups = self.cells.by_cell([line.user_id for line in lines], write=True)
        parts = [
            (indexes, writing.import_lines(self.cells.parts[cell], [lines[i] for i in indexes], source=source,
                                           write_id=write_id))
            for cell, indexes in groups.items()
        ]  # fmt: skip
        if len(parts) <= 1:
            return parts[0][1] if parts else StoredIds(ids=[], created=0, refreshed=0, write_id=write_id)
        return moving.merged_imports(parts, write_id)

    @contextmanager
    def ingest_batch(self) -> Iterator[IngestBatch]:
        """A queue batch: each message ingested in its user's cell, committing without waiting for
        the disk; every cell written to is flushed once on leaving the block (BatchNotDurable if it
        could not be: none of the batch's messages may then be acknowledged). An error inside the
        block leaves it without a flush."""
        batch = QueueBatch()
        yield IngestBatch(self, batch)
        batch.flush()

    def move_user(self, user_id: str, to_cell: str) -> int:
        """Move everything the user owns to ``to_cell`` (docs/capacity.md, Cells); the memories moved."""
        from rushmem.service import moving

        return self.cells.move_user(user_id, to_cell, moving.copy_user)

    def cell_admins(self) -> dict[str, Admin]:
        """An :class:`Admin` per cell by name, the home cell's (:attr:`admin`) first: what runs on
        each cell's own database (migrations, dense users' indexes, consolidation, the change-event
        outbox). One database: ``{"": admin}``. Reads the cells (with RUSHMEM_CELLS_SECRET_ARN,
        the secret); each admin's bulk import still sends every line to its user's cell."""
        home = self.cells.home_parts
        return {
            name: self.admin if parts is home else Admin(parts, self.import_)
            for name, parts in self.cells.parts.items()
        }

    def cell_of(self, user_id: str) -> str:
        """The name of the cell that holds (or would hold) the user ("" without cells)."""
        return self.cells.cell_of(user_id)

    # ---- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the database connections (they are opened again on next use)."""
        self.cells.close()


class IngestBatch:
    """One queue batch's ingests (see :meth:`Memory.ingest_batch`); safe to use from several threads."""

    def __init__(self, memory: Memory, batch: QueueBatch) -> None:
        self._memory = memory
        self.batch = batch

    def ingest_conversation(self, message: ConversationEnded, **options: Any) -> IngestOutcome:
        """As :meth:`Memory.ingest_conversation`, durable once the batch's block is left."""
        return self._memory.invoke(ops.INGEST, ops.INGEST.build(message), batch=self.batch, **options)

    @property
    def pending(self) -> bool:
        return self.batch.pending

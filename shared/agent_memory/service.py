"""The service facade: what handlers and the CLI call. It validates, embeds, ranks and
delegates every query to :mod:`agent_memory.store`.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import datetime as dt
import hashlib
import json
import logging
import unicodedata
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel

from agent_memory import retrieval, store, temporal
from agent_memory.config import FusionMode, Settings, get_settings
from agent_memory.db import Connection, Database
from agent_memory.embeddings import Embedder, create_embedder
from agent_memory.errors import ConfigurationError, InputTooLarge, InvalidInput
from agent_memory.extraction import ExistingMemory, ExtractedMemory, Extractor, create_extractor
from agent_memory.extraction.updates import FactUpdate, resolve_updates
from agent_memory.models import (
    ConversationEnded,
    ImportLine,
    IngestOutcome,
    Memory,
    MemoryEvent,
    NewMemory,
    RecalledMemory,
    RecallResult,
    StoredIds,
    normalize_content,
)
from agent_memory.prompt import build_memory_block
from agent_memory.providers.aws import app_db_credentials

logger = logging.getLogger(__name__)

MAX_LIMIT = 50
MAX_PAGE = 500
# A user turn's head is enough to find the memories it relates to (embedders truncate anyway).
MAX_TURN_CHARS = 2000


def content_hash(text: str) -> bytes:
    """Identity of a fact: case, spacing, Unicode form and trailing punctuation don't matter."""
    key = unicodedata.normalize("NFKC", text).casefold()
    key = " ".join(key.split()).rstrip(" .!;。")
    return hashlib.sha256(key.encode("utf-8")).digest()


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class RecallOptions:
    """How to rank. Defaults come from Settings; the benchmark varies them for ablations."""

    fusion: FusionMode = "weighted"
    legs: Literal["hybrid", "vector", "text"] = "hybrid"
    vector_weight: float = 0.7
    text_weight: float = 0.3
    rrf_k: int = 60
    decay: bool = True
    half_life_days: float = 180.0
    decay_floor: float = 0.9
    mmr: bool = True
    mmr_lambda: float = 0.8
    overfetch: int = 3
    date_boost: float = 0.2
    include_inactive: bool = False

    @classmethod
    def from_settings(cls, settings: Settings) -> RecallOptions:
        return cls(
            fusion=settings.fusion,
            vector_weight=settings.vector_weight,
            text_weight=settings.text_weight,
            rrf_k=settings.rrf_k,
            half_life_days=settings.half_life_days,
            decay_floor=settings.decay_floor,
            mmr_lambda=settings.mmr_lambda,
            overfetch=settings.overfetch,
            date_boost=settings.date_boost,
        )

    def but(self, **changes: Any) -> RecallOptions:
        return replace(self, **changes)


class MemoryPage(BaseModel):
    memories: list[Memory]
    next_cursor: str | None


def _encode_cursor(row: dict[str, Any]) -> str:
    raw = json.dumps([row["created_at"].isoformat(), str(row["id"])]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[dt.datetime, uuid.UUID]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, memory_id = json.loads(raw)
        return dt.datetime.fromisoformat(created_at), uuid.UUID(memory_id)
    except (ValueError, TypeError, binascii.Error) as exc:
        raise InvalidInput("cursor is not one this service returned", field="cursor") from exc


class MemoryService:
    """Long-term memory for one deployment: remember, recall, list, forget.

    Construction is free of I/O; the embedder and the database connection are created
    on first use and then reused (one per process / Lambda container).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        database: Database | None = None,
        extractor: Extractor | None = None,
    ) -> None:
        self.settings = settings
        self._embedder = embedder
        self._database = database
        self._extractor = extractor
        self._schema: store.VectorSchema | None = None
        self.app_login: store.AppLogin | None = None  # what the last migrate() did to app_db_user

    # ---- lazily built collaborators --------------------------------------------------

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = create_embedder(self.settings)
        return self._embedder

    @property
    def db(self) -> Database:
        if self._database is None:
            self._database = Database(self.settings, setup=self._prepare_connection)
        return self._database

    def _prepare_connection(self, conn: Connection) -> None:
        self._schema = store.prepare_connection(
            conn,
            dimension=self.embedder.dimension,
            fingerprint=self.embedder.fingerprint,
            migrate=self.settings.auto_migrate,
            role=self.settings.effective_db_role(),
        )

    @cached_property
    def recall_options(self) -> RecallOptions:
        return RecallOptions.from_settings(self.settings)

    def close(self) -> None:
        if self._database is not None:
            self._database.close()

    # ---- schema ----------------------------------------------------------------------

    def migrate(self) -> list[str]:
        """Apply pending migrations (idempotent); returns what was applied now.

        Then, as the owner, sets up the roles the request-serving functions use: the login role
        ``app_db_user`` (recorded in :attr:`app_login`), and the right to SET ROLE ``db_role``.
        """
        applied: list[str] = []
        role = self.settings.effective_db_role()

        def setup(conn: Connection) -> None:
            applied.extend(
                store.apply_migrations(conn, dimension=self.embedder.dimension, fingerprint=self.embedder.fingerprint)
            )
            self.app_login = self._ensure_app_login(conn)
            if role:
                store.ensure_can_set_role(conn, role)
            store.prepare_connection(
                conn,
                dimension=self.embedder.dimension,
                fingerprint=self.embedder.fingerprint,
                migrate=False,
                role=role,
            )

        database = Database(self.settings, setup=setup)
        try:
            database.connection()
        finally:
            database.close()
        return applied

    def _ensure_app_login(self, conn: Connection) -> store.AppLogin | None:
        name, password = self.settings.app_db_user, None
        secret = app_db_credentials(self.settings)
        if secret is not None:
            username, password = secret
            if name is not None and username != name:
                raise ConfigurationError(
                    f"AGENT_MEMORY_APP_DB_SECRET_ARN holds the password of {username}, "
                    f"not of AGENT_MEMORY_APP_DB_USER={name}"
                )
            name = username
        if name is None:
            return None
        login = store.ensure_app_login(conn, name, password=password, iam=self.settings.app_db_iam_auth)
        logger.info("application login role %s", login.summary())
        return login

    # ---- writes ----------------------------------------------------------------------

    def _validate_new(self, memories: Sequence[NewMemory], field: str = "memories") -> None:
        if not memories:
            raise InvalidInput("no memories given", field=field)
        if len(memories) > self.settings.max_memories_per_request:
            raise InputTooLarge(
                f"{len(memories)} memories in one request; the limit is {self.settings.max_memories_per_request}",
                field=field,
            )
        for i, memory in enumerate(memories):
            if len(memory.content) > self.settings.max_memory_chars:
                raise InputTooLarge(
                    f"memory content is {len(memory.content)} characters; the limit is "
                    f"{self.settings.max_memory_chars}",
                    field=f"{field}[{i}].content",
                )

    def _rows(
        self,
        user_ids: Sequence[str],
        memories: Sequence[NewMemory],
        *,
        project_id: str | None,
        source: str | None,
        observed_at: dt.datetime | None,
        vectors: Sequence[np.ndarray] | None = None,
        user_wide: Sequence[bool] | None = None,
    ) -> tuple[list[store.MemoryRow], list[int]]:
        """Embed unique memories once (unless ``vectors``, one per memory, are given); returns
        the rows and, per input, its row index. ``user_wide`` memories ignore ``project_id``."""
        rows: list[store.MemoryRow] = []
        index_of: dict[tuple[str, str | None, bytes], int] = {}
        positions: list[int] = []
        pending: list[tuple[str, NewMemory, str | None, str, bytes]] = []
        given: list[np.ndarray] = []
        for i, (user_id, memory) in enumerate(zip(user_ids, memories, strict=True)):
            content = memory.content  # already normalised by its model (models.Content)
            scope_project = memory.project_id or (None if user_wide and user_wide[i] else project_id)
            key = (user_id, scope_project, content_hash(content))
            if key not in index_of:
                index_of[key] = len(pending)
                pending.append((user_id, memory, scope_project, content, key[2]))
                if vectors is not None:
                    given.append(vectors[i])
            positions.append(index_of[key])
        embedded = given if vectors is not None else self.embedder.embed([p[3] for p in pending])
        for (user_id, memory, scope_project, content, digest), vector in zip(pending, embedded, strict=True):
            rows.append(
                store.MemoryRow(
                    user_id=user_id,
                    project_id=scope_project,
                    content=content,
                    content_hash=digest,
                    category=memory.category,
                    embedding=vector,
                    source=source,
                    is_evergreen=memory.is_evergreen,
                    created_at=memory.created_at,
                    observed_at=observed_at or memory.created_at,
                    expires_at=memory.expires_at,
                    metadata=memory.metadata,
                )
            )
        return rows, positions

    def remember(
        self,
        user_id: str,
        memories: Sequence[NewMemory],
        *,
        project_id: str | None = None,
        source: str | None = None,
        observed_at: dt.datetime | None = None,
    ) -> StoredIds:
        """Store facts for a user in one transaction: embedded in one batch, upserted,
        exact and near duplicates folded into the existing rows. Ids come back in input order."""
        self._validate_new(memories)
        rows, positions = self._rows(
            [user_id] * len(memories), memories, project_id=project_id, source=source, observed_at=observed_at
        )
        threshold = self.settings.near_duplicate_threshold
        outcomes = self.db.run(
            lambda conn: store.upsert_memories(conn, rows, schema=self._schema, near_duplicate_threshold=threshold)
        )
        created = sum(1 for o in outcomes if o.action == "created")
        logger.info(
            "remembered",
            # "created" is a LogRecord attribute: logging refuses it as an extra key.
            extra={"user_id": user_id, "memories": len(rows), "memories_created": created, "source": source},
        )
        return StoredIds(ids=[outcomes[p].id for p in positions], created=created, refreshed=len(rows) - created)

    def import_memories(self, lines: Sequence[ImportLine], *, source: str | None = "import") -> StoredIds:
        """Bulk load (many users at once): one embedding pass and one upsert statement per call.

        Lines are taken as given: exact duplicates fold, near duplicates are kept.
        """
        if not lines:
            return StoredIds(ids=[], created=0, refreshed=0)
        for i, line in enumerate(lines):
            if len(line.content) > self.settings.max_memory_chars:
                raise InputTooLarge(
                    f"content is {len(line.content)} characters; the limit is {self.settings.max_memory_chars}",
                    field=f"lines[{i}].content",
                )
        rows, positions = self._rows(
            [line.user_id for line in lines], lines, project_id=None, source=source, observed_at=None
        )
        outcomes = self.db.run(lambda conn: store.upsert_memories(conn, rows, schema=self._schema))
        created = sum(1 for o in outcomes if o.action == "created")
        return StoredIds(ids=[outcomes[p].id for p in positions], created=created, refreshed=len(rows) - created)

    # ---- recall ----------------------------------------------------------------------

    def _check_query(self, query: str, limit: int | None) -> tuple[str, int]:
        query = query.strip()
        if not query:
            raise InvalidInput("query is empty", field="query")
        if "\x00" in query:
            raise InvalidInput("query contains a NUL character (U+0000)", field="query")
        if len(query) > self.settings.max_query_chars:
            raise InputTooLarge(
                f"query is {len(query)} characters; the limit is {self.settings.max_query_chars}", field="query"
            )
        limit = self.settings.default_limit if limit is None else limit
        if not 1 <= limit <= MAX_LIMIT:
            raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}, got {limit}", field="limit")
        return query, limit

    def recall(
        self,
        user_id: str,
        query: str,
        *,
        project_id: str | None = None,
        limit: int | None = None,
        now: dt.datetime | None = None,
        options: RecallOptions | None = None,
        query_vector: np.ndarray | None = None,
    ) -> RecallResult:
        """The memories most relevant to ``query`` for this user, best first, and the prompt block."""
        query, limit = self._check_query(query, limit)
        options = options or self.recall_options
        if now is not None and now.tzinfo is None:
            now = now.replace(tzinfo=dt.UTC)
        vector = self.embedder.embed_query(query) if query_vector is None else query_vector
        scope = store.Scope(user_id, project_id, now=now, include_inactive=options.include_inactive)
        k = options.overfetch * limit
        candidates = self.db.run(
            lambda conn: store.hybrid_candidates(
                conn,
                scope,
                vector,
                query,
                k,
                schema=self._schema,
                statement_timeout_ms=self.settings.recall_statement_timeout_ms,
            )
        )
        chosen = rank_candidates(candidates, options, limit=limit, now=now or utcnow(), query=query)
        if self.settings.min_score > 0:
            chosen = [(c, score) for c, score in chosen if score >= self.settings.min_score]
        memories = [
            RecalledMemory(
                id=c.memory["id"],
                content=c.memory["content"],
                category=c.memory["category"],
                score=round(score, 4),
                created_at=c.memory["created_at"],
                is_evergreen=c.memory["is_evergreen"],
                project_id=c.memory["project_id"],
                metadata=c.memory["metadata"] or {},
            )
            for c, score in chosen
        ]
        block = build_memory_block(
            (m.content for m in memories), max_chars=self.settings.max_block_chars, guard=self.settings.prompt_guard
        )
        return RecallResult(memories=memories, prompt_block=block, query=query)

    # ---- listing and forgetting ------------------------------------------------------

    def list(
        self,
        user_id: str,
        *,
        project_id: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
        include_inactive: bool = False,
    ) -> MemoryPage:
        """A page of the user's memories, newest first, and the cursor of the next page."""
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInput(f"limit must be between 1 and {MAX_PAGE}, got {limit}", field="limit")
        after = _decode_cursor(cursor) if cursor else None
        scope = store.Scope(user_id, project_id, include_inactive=include_inactive)
        rows = self.db.run(lambda conn: store.list_memories(conn, scope, limit=limit + 1, after=after))
        next_cursor = _encode_cursor(rows[limit - 1]) if len(rows) > limit else None
        return MemoryPage(memories=[Memory(**r) for r in rows[:limit]], next_cursor=next_cursor)

    def forget(self, user_id: str, memory_id: uuid.UUID | None = None, *, source: str | None = None) -> int:
        """Delete one memory of the user (0 if it is not theirs) or, without an id, all of them
        together with their history."""
        if memory_id is None:
            deleted = self.db.run(lambda conn: store.delete_user(conn, user_id))
        else:
            deleted = int(self.db.run(lambda conn: store.delete_memory(conn, user_id, memory_id, source=source)))
        logger.info("forgot", extra={"user_id": user_id, "deleted": deleted, "one": memory_id is not None})
        return int(deleted)

    # ---- lifecycle -------------------------------------------------------------------

    # `builtins.list` below: inside the class, `list` is the method above.
    def history(
        self, user_id: str, memory_id: uuid.UUID | None = None, *, limit: int = 1000
    ) -> builtins.list[MemoryEvent]:
        """Every recorded change of one memory (or of all the user's), oldest first."""
        if not 1 <= limit <= 10_000:
            raise InvalidInput(f"limit must be between 1 and 10000, got {limit}", field="limit")
        rows = self.db.run(lambda conn: store.history(conn, user_id, memory_id, limit=limit))
        return [MemoryEvent(**r) for r in rows]

    def supersede(
        self, user_id: str, old_ids: Sequence[uuid.UUID], new_id: uuid.UUID, *, source: str | None = None
    ) -> builtins.list[uuid.UUID]:
        """Mark memories as replaced by ``new_id``: kept (with their history) but out of recall."""
        marked: builtins.list[uuid.UUID] = self.db.run(
            lambda conn: store.supersede(conn, user_id, old_ids, new_id, source=source)
        )
        return marked

    def reembed(
        self,
        *,
        batch_size: int = 256,
        restart: bool = False,
        max_batches: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> dict[str, Any]:
        """Move the store to the configured embedder without taking reads down.

        Fills a shadow column in batches (each its own transaction, so an interrupted run
        resumes where it stopped), builds its HNSW index concurrently, then switches in one
        short transaction. Processes still on the old model keep reading the previous vectors
        until redeployed; ``drop_previous_vectors`` ends that grace period. Needs the owner.
        ``max_batches`` stops early (the switch then waits for a later run).
        """
        if not 1 <= batch_size <= 10_000:
            raise InvalidInput(f"batch size must be between 1 and 10000, got {batch_size}", field="batch_size")
        embedder = self.embedder
        # An owner connection: no application role, no schema check (the schema is what changes).
        admin = Database(self.settings, setup=store.register_types)
        filled = batches = late = 0
        try:
            conn = admin.connection()
            state = store.begin_reembed(
                conn, fingerprint=embedder.fingerprint, dimension=embedder.dimension, restart=restart
            )
            after: uuid.UUID | None = None
            while max_batches is None or batches < max_batches:
                rows = store.rows_to_reembed(conn, after=after, limit=batch_size)
                if not rows:
                    break
                store.store_reembedded(conn, [r[0] for r in rows], list(embedder.embed([r[1] for r in rows])))
                after, filled, batches = rows[-1][0], filled + len(rows), batches + 1
                if progress:
                    progress(filled)
            else:  # stopped by max_batches, not by running out of rows: switch on a later run
                return {"state": state, "filled": filled, "switched": False, "model": embedder.fingerprint}
            store.build_reembed_index(conn)
            # Rows written meanwhile (ids are random, so some sort before where the scan was):
            # embed them now, so the switch itself has (almost) nothing left to do.
            while rows := store.rows_to_reembed(conn, after=None, limit=batch_size):
                store.store_reembedded(conn, [r[0] for r in rows], list(embedder.embed([r[1] for r in rows])))
                filled += len(rows)
            late = store.switch_reembed(
                conn,
                lambda texts: list(embedder.embed(texts)),
                fingerprint=embedder.fingerprint,
                dimension=embedder.dimension,
            )
        finally:
            admin.close()
        self.close()  # reconnect: this process now uses the new column
        logger.info("reembedded", extra={"model": embedder.fingerprint, "filled": filled + late})
        return {"state": state, "filled": filled + late, "switched": True, "model": embedder.fingerprint}

    def drop_previous_vectors(self) -> bool:
        """After every process runs the new model: drop the previous model's vectors."""
        admin = Database(self.settings)
        try:
            return store.drop_previous_vectors(admin.connection())
        finally:
            admin.close()

    def purge(self, *, now: dt.datetime | None = None, superseded_days: float | None = None) -> dict[str, int]:
        """Remove expired memories and those superseded longer ago than the retention."""
        now = now or utcnow()
        days = self.settings.superseded_retention_days if superseded_days is None else superseded_days
        expired, superseded = self.db.run(
            lambda conn: store.purge(conn, now=now, superseded_before=now - dt.timedelta(days=days))
        )
        logger.info("purged", extra={"expired": expired, "superseded": superseded})
        return {"expired": expired, "superseded": superseded}

    def similarities(self, text: str, others: Sequence[str]) -> builtins.list[float]:
        """Cosine similarity of ``text`` to each of ``others`` with the configured embedder (no
        database): how update on write's guard (supersede_min_similarity) sees a pair."""
        vectors = self.embedder.embed([normalize_content(t) for t in (text, *others)])
        return [float(np.dot(vectors[0], v)) for v in vectors[1:]]

    # ---- the write path: "conversation ended" messages -------------------------------

    @property
    def extractor(self) -> Extractor:
        if self._extractor is None:
            self._extractor = create_extractor(self.settings)
        return self._extractor

    def _check_conversation(self, message: ConversationEnded) -> None:
        """The configured limits (the model holds only the wire format's ceilings)."""
        limit = self.settings.max_messages_per_conversation
        if len(message.messages) > limit:
            raise InputTooLarge(f"{len(message.messages)} messages; the limit is {limit}", field="messages")
        longest = self.settings.max_message_chars
        for i, chat in enumerate(message.messages):
            if len(chat.content) > longest:
                raise InputTooLarge(
                    f"message content is {len(chat.content)} characters; the limit is {longest}",
                    field=f"messages[{i}].content",
                )
        if message.memories:
            self._validate_new(message.memories)

    def _related_memories(self, message: ConversationEnded) -> builtins.list[ExistingMemory]:
        """The user's stored memories most related to the conversation's user turns, under handles
        m1, m2, ... (best first): one embedding batch, one query."""
        limit = self.settings.related_memories_shown
        window = message.messages[-self.extractor.window :]
        turns = list(dict.fromkeys(m.content.strip()[:MAX_TURN_CHARS] for m in window if m.role == "user"))
        turns = [t for t in turns if t]
        if limit <= 0 or not turns:
            return []
        vectors = list(self.embedder.embed(turns))
        scope = store.Scope(message.user_id, message.project_id)
        found = self.db.run(lambda conn: store.related_memories(conn, scope, vectors, limit=limit, schema=self._schema))
        return [
            ExistingMemory(
                handle=f"m{i}",
                id=row["id"],
                content=row["content"],
                category=row["category"],
                project_id=row["project_id"],
                embedding=row["embedding"],
            )
            for i, row in enumerate(found, start=1)
        ]

    def ingest_conversation(
        self, message: ConversationEnded, *, observed_at: dt.datetime | None = None
    ) -> IngestOutcome:
        """Turn one "conversation ended" message into memories: all of them or none.

        The client's ``memories`` are stored as given; ``messages`` go through the configured
        extractor first (outside any transaction: an LLM call never holds one open). An LLM
        extractor is shown the user's most related memories and may mark a fact as restating
        one (refreshed, nothing new stored) or replacing some (superseded by the new memory);
        see :mod:`agent_memory.extraction.updates` for the guards. The memories are embedded in
        one batch and written with those updates and the message's receipt in one transaction,
        so a redelivered message changes nothing and a failure leaves nothing behind.
        ``conversation_id`` becomes each memory's source (and the source in the history); the
        time of the facts is ``ended_at``, else ``observed_at`` (the handler passes the SQS
        SentTimestamp: stable across redeliveries), else now. Extracted expiries are checked
        against that time.
        """
        self._check_conversation(message)
        user_id, source = message.user_id, message.conversation_id
        digest = hashlib.sha256(json.dumps(message.model_dump(mode="json"), sort_keys=True).encode()).digest()
        outcome = IngestOutcome(user_id=user_id, conversation_id=source, status="duplicate")
        if self.db.run(lambda conn: store.message_ingested(conn, user_id, digest)):
            logger.info("ingest skipped: message already written", extra={"user_id": user_id, "source": source})
            return outcome
        facts: builtins.list[ExtractedMemory] = []
        shown: builtins.list[ExistingMemory] = []
        fingerprint = ""
        if message.messages:
            extractor = self.extractor
            if extractor.updates_existing:
                shown = self._related_memories(message)
            extraction = extractor.extract(message.messages, ended_at=message.ended_at or observed_at, existing=shown)
            room = self.settings.max_memories_per_request - len(message.memories)
            outcome.dropped = len(extraction.dropped) + max(0, len(extraction.memories) - room)
            facts = extraction.memories[: max(0, room)]
            fingerprint = extractor.fingerprint
        memories = [*message.memories, *(f.to_new_memory(fingerprint) for f in facts)]
        outcome.provided, outcome.extracted = len(message.memories), len(facts)
        rows: builtins.list[store.MemoryRow] = []
        positions: builtins.list[int] = []
        updates = store.Updates(project_id=message.project_id)
        if memories:
            contents = [m.content for m in memories]  # normalised by the models
            unique = builtins.list(dict.fromkeys(contents))
            embedded = dict(zip(unique, self.embedder.embed(unique), strict=True))
            vectors = [embedded[c] for c in contents]
            provided = len(message.memories)
            resolved = [FactUpdate()] * provided + resolve_updates(
                facts, vectors[provided:], shown, min_similarity=self.settings.supersede_min_similarity
            )
            rows, positions = self._rows(
                [user_id] * len(memories),
                memories,
                project_id=message.project_id,
                source=source,
                observed_at=message.ended_at or observed_at,
                vectors=vectors,
                user_wide=[u.user_wide for u in resolved],
            )
            updates = _updates_by_row(resolved, positions, project_id=message.project_id)
            outcome.updates_ignored = sum(u.ignored for u in resolved)
        threshold = self.settings.near_duplicate_threshold
        written = self.db.run(
            lambda conn: store.ingest_message(
                conn,
                user_id,
                digest,
                rows,
                conversation_id=source,
                schema=self._schema,
                near_duplicate_threshold=threshold,
                updates=updates,
            )
        )
        if written is None:  # a concurrent delivery of the same message won the race
            return outcome
        if written.stale:
            logger.warning(
                "update targets ended or left the scope before the write; their facts were kept as new",
                extra={"user_id": user_id, "source": source, "stale": [str(t) for t in written.stale]},
            )
        outcome.status = "stored" if rows else "nothing_to_store"
        outcome.created = sum(1 for o in written.outcomes if o.action == "created")
        outcome.refreshed = len(written.outcomes) - outcome.created
        outcome.superseded = len(written.superseded)
        outcome.updates_ignored += len(written.stale)
        outcome.ids = [written.outcomes[p].id for p in positions]
        logger.info("ingested", extra={"outcome": outcome.model_dump(mode="json", exclude={"ids"})})
        return outcome


def _updates_by_row(
    resolved: Sequence[FactUpdate], positions: Sequence[int], *, project_id: str | None
) -> store.Updates:
    """Per-memory updates keyed by row (memories that folded into one row share it: first wins)."""
    restates: dict[int, uuid.UUID] = {}
    replaces: dict[int, list[uuid.UUID]] = {}
    for update, row in zip(resolved, positions, strict=True):
        if update.restates is not None:
            restates.setdefault(row, update.restates)
        if update.replaces:
            targets = replaces.setdefault(row, [])
            targets.extend(t for t in update.replaces if t not in targets)
    return store.Updates(restates=restates, replaces=replaces, project_id=project_id)


def rank_candidates(
    candidates: Sequence[store.Candidate],
    options: RecallOptions,
    *,
    limit: int,
    now: dt.datetime,
    query: str = "",
) -> list[tuple[store.Candidate, float]]:
    """Fuse the legs, decay by age, boost what the query dates, diversify with MMR;
    (candidate, final score) best first."""
    if options.legs == "vector":
        candidates = [c for c in candidates if c.vector_rank is not None]
    elif options.legs == "text":
        candidates = [c for c in candidates if c.text_position is not None]
    if not candidates:
        return []
    similarity = [1.0 - c.distance for c in candidates]
    if options.legs == "vector":
        relevance = np.clip(np.asarray(similarity, dtype=np.float64), 0.0, 1.0)
    elif options.legs == "text":
        relevance = retrieval.fuse_weighted(
            similarity, [c.text_rank for c in candidates], vector_weight=0.0, text_weight=1.0
        )
    elif options.fusion == "rrf":
        relevance = retrieval.fuse_rrf(
            [c.vector_rank for c in candidates], [c.text_position for c in candidates], k=options.rrf_k
        )
    else:
        relevance = retrieval.fuse_weighted(
            similarity,
            [c.text_rank for c in candidates],
            vector_weight=options.vector_weight,
            text_weight=options.text_weight,
        )
    dated = [False] * len(candidates)
    if options.date_boost > 0 and query:
        windows = temporal.query_time_windows(query, now)
        if windows:
            dated = temporal.in_any_window([c.memory["created_at"] for c in candidates], windows)
    if options.decay:
        relevance = retrieval.apply_time_decay(
            relevance,
            [c.memory["updated_at"] for c in candidates],
            # Evergreen memories, and those from the time the query asks about, keep their score.
            [c.memory["is_evergreen"] or d for c, d in zip(candidates, dated, strict=True)],
            now=now,
            half_life_days=options.half_life_days,
            floor=options.decay_floor,
        )
    if any(dated):
        relevance = relevance + options.date_boost * np.asarray(dated, dtype=np.float64)
    if options.mmr:
        order = retrieval.mmr_select(
            relevance, np.vstack([c.embedding for c in candidates]), lam=options.mmr_lambda, limit=limit
        )
    else:
        order = [int(i) for i in np.argsort(-relevance, kind="stable")[:limit]]
    return [(candidates[i], float(relevance[i])) for i in order]


@lru_cache(maxsize=1)
def get_service() -> MemoryService:
    """The process-wide service (settings from the environment), built on first call."""
    return MemoryService(get_settings())

"""Reads: recall (one query or a batch), pages of memories, one memory, export, history; on the
reader endpoint when one is configured (see :mod:`rushmem.store.engine.readers`)."""

from __future__ import annotations

import builtins
import datetime as dt
import logging
import uuid
from collections.abc import Sequence

import numpy as np

from rushmem.config import Settings
from rushmem.ingest.facts import outdated_across_scopes
from rushmem.recall.block import build_memory_block
from rushmem.recall.explain import explain_candidates, named_explanations, plan_weights
from rushmem.recall.plan import RecallPlan
from rushmem.recall.ranking import RankTrace, rank_candidates
from rushmem.records import Candidate
from rushmem.service import pages
from rushmem.service.base import Collaborators, utcnow
from rushmem.store.memories import catalog, edits
from rushmem.store.memories.named import named_memories
from rushmem.store.memories.recall import hybrid_candidates
from rushmem.store.memories.scope import Scope
from rushmem.usage import Meter, metering
from rushmem_contract.errors import DatabaseResuming, InputTooLarge, InvalidInput, NotFound
from rushmem_contract.inputs import has_visible, lone_surrogate
from rushmem_contract.models import (
    DEFAULT_HISTORY_PAGE,
    DEFAULT_PAGE,
    MAX_EXPLAIN_IDS,
    MAX_HISTORY,
    MAX_PAGE,
    MAX_RECALL_LIMIT,
    Consistency,
    ExplainedName,
    ExportPage,
    MemoryEvent,
    MemoryFilters,
    MemoryPage,
    MemoryRecord,
    RecalledMemory,
    RecallExplanation,
    RecallQuery,
    RecallResult,
    export_line,
    normalize_content,
)
from rushmem_contract.schemas import MemoryHistory

logger = logging.getLogger(__name__)


def _aware(value: dt.datetime | None) -> dt.datetime | None:
    return value.replace(tzinfo=dt.UTC) if value is not None and value.tzinfo is None else value


def _one_value_per_slot(candidates: Sequence[Candidate]) -> list[Candidate]:
    """A project's block holds one current value per slot: a value the other scope (user-wide or
    the project's) corrected later is left out (each scope's own corrections are the write path's)."""
    facts = [(c.project_id, c.content, c.valid_from or c.created_at) for c in candidates]
    gone = outdated_across_scopes(facts)
    return [c for i, c in enumerate(candidates) if i not in gone]


class Reading:
    # Memory sets both: its settings, and the collaborators its verbs and its admin share.
    settings: Settings
    _parts: Collaborators

    # ---- recall ----------------------------------------------------------------------

    def _check_query(self, query: str, limit: int | None) -> tuple[str, int]:
        query = query.strip()
        if not query:
            raise InvalidInput("query is empty", field="query")
        if "\x00" in query:
            raise InvalidInput("query contains a NUL character (U+0000)", field="query")
        if (escape := lone_surrogate(query)) is not None:
            raise InvalidInput(f"query contains a lone surrogate ({escape}), which is not text", field="query")
        query = normalize_content(query)  # the visible form, as the memories are stored in
        if not has_visible(query):
            raise InvalidInput("query has no visible character", field="query")
        if len(query) > self.settings.max_query_chars:
            raise InputTooLarge(
                f"query is {len(query)} characters; the limit is {self.settings.max_query_chars}", field="query"
            )
        limit = self.settings.default_limit if limit is None else limit
        if not 1 <= limit <= MAX_RECALL_LIMIT:
            raise InvalidInput(f"limit must be between 1 and {MAX_RECALL_LIMIT}, got {limit}", field="limit")
        return query, limit

    def recall(  # noqa: PLR0913 -- the public verb: the operation's fields, and a caller's plan, vector, meter
        self,
        query: str,
        *,
        user_id: str,
        project_id: str | None = None,
        limit: int | None = None,
        now: dt.datetime | None = None,
        plan: RecallPlan | None = None,
        query_vector: np.ndarray | None = None,
        filters: MemoryFilters | None = None,
        usage: Meter | None = None,
        consistency: Consistency = "eventual",
        as_of: dt.datetime | None = None,
        include_inactive: bool = False,
        explain: bool = False,
        explain_ids: Sequence[uuid.UUID] | None = None,
    ) -> RecallResult:
        """The user's memories most relevant to ``query`` (among those matching ``filters``), best
        first, and the prompt block. ``consistency="strong"`` reads the writer when a reader
        endpoint is configured. ``plan``: how to find and rank (default: from the settings).
        ``query_vector``: the query already embedded by the configured embedder, and ``usage`` what
        that cost (a batch's share), counted with the recall. The two clocks (see
        :class:`~rushmem.store.memories.scope.Scope`): ``now``, when the recall is evaluated (what the
        store held then, the decay's and the date words' reference; default: the present);
        ``as_of``, valid time: among what was true then, superseded versions included while they
        held. ``include_inactive``: superseded and expired memories too (debugging). ``explain``
        (or ``explain_ids``, memories to account for): also why (:attr:`RecallResult.explanation`);
        without it, ranking records nothing and no statement is added."""
        query, limit = self._check_query(query, limit)
        if explain_ids is not None and len(explain_ids) > MAX_EXPLAIN_IDS:
            raise InvalidInput(f"explain_ids holds at most {MAX_EXPLAIN_IDS} ids", field="explain_ids")
        explain = explain or bool(explain_ids)
        plan = plan or self._parts.recall_plan
        with metering(usage) as meter:
            vector = self._parts.embedder.embed_query(query) if query_vector is None else query_vector
        meter.add("recall", calls=1, characters=len(query))
        used = self._parts.usage(meter)
        scope = Scope(
            user_id,
            project_id,
            now=_aware(now),
            include_inactive=include_inactive,
            filters=None if filters is None or filters.empty else filters,
            as_of=_aware(as_of),
        )
        k = plan.candidates_per_leg(limit)
        timeout_ms = self.settings.recall_statement_timeout_ms
        # The present is read once, so the date windows and the decay measure from the same instant.
        evaluated_at = scope.now or utcnow()
        windows = plan.windows(query, evaluated_at)
        on_reader = self._parts.reads.reader is not None and consistency == "eventual"
        # On the writer alone the recall's own statement writes its usage count; where a reader is
        # configured the count waits in the container for a batch (no writer round trip, nothing
        # the writer's health can fail).
        try:
            candidates = self._parts.reads.run(
                lambda conn: hybrid_candidates(
                    conn,
                    scope,
                    vector,
                    query,
                    k,
                    statement_timeout_ms=timeout_ms,
                    usage=() if on_reader else used,
                    windows=windows,
                    date_k=plan.date_k,
                ),
                consistency=consistency,
                user_id=user_id,
            )
        except DatabaseResuming:
            # A paused Aurora cluster wakes in ~15 s: the agent should answer now, without memories,
            # rather than wait (AGENT_MEMORY_DB_RESUME_WAIT_S bounds any wait).
            logger.warning("recall answered without memories: the database is resuming")
            return RecallResult(memories=[], prompt_block="", query=query, unavailable="database_resuming")
        if on_reader and used:
            self._parts.count_later(user_id, used)
        if project_id is not None and as_of is None and not include_inactive:
            candidates = _one_value_per_slot(candidates)
        reranker = self._parts.reranker
        trace = RankTrace() if explain else None
        chosen = rank_candidates(
            candidates,
            plan,
            limit=limit,
            now=evaluated_at,
            query=query,
            windows=windows,
            rerank=reranker.scores if reranker is not None else None,
            trace=trace,
        )
        if self.settings.min_score > 0:
            chosen = [(c, score) for c, score in chosen if score >= self.settings.min_score]
        memories = [
            RecalledMemory(
                id=c.id,
                content=c.content,
                category=c.category,
                score=round(score, 4),
                created_at=c.created_at,
                is_evergreen=c.is_evergreen,
                project_id=c.project_id,
                metadata=c.metadata,
                injection=list(c.injection),
            )
            for c, score in chosen
        ]
        block = build_memory_block(
            (m.content for m in memories), max_chars=self.settings.max_block_chars, guard=self.settings.prompt_guard
        )
        explanation = None
        if trace is not None:
            explanation = RecallExplanation(
                now=evaluated_at,
                as_of=scope.as_of,
                limit=limit,
                candidates_per_leg=k,
                min_score=self.settings.min_score,
                weights=plan_weights(plan),
                date_windows=list(windows),
                reranked=bool(trace.rerank_scores),
                candidates=explain_candidates(trace, plan, limit=limit, min_score=self.settings.min_score),
                named=self._explain_named(scope, explain_ids or (), candidates, vector, query, evaluated_at, k),
            )
        return RecallResult(memories=memories, prompt_block=block, query=query, explanation=explanation)

    def _explain_named(
        self,
        scope: Scope,
        ids: Sequence[uuid.UUID],
        candidates: Sequence[Candidate],
        vector: np.ndarray,
        query: str,
        evaluated_at: dt.datetime,
        k: int,
    ) -> builtins.list[ExplainedName]:
        """Why each named memory was (not) a candidate: one more statement, only when ids are named.
        On the writer: a memory written a moment ago is named because the caller knows it."""
        if not ids:
            return []
        rows = self._parts.reads.run(lambda conn: named_memories(conn, scope, ids, vector, query), consistency="strong")
        return named_explanations(
            ids,
            rows,
            {c.id for c in candidates},
            project_id=scope.project_id,
            now=scope.now,
            evaluated_at=evaluated_at,
            as_of=scope.as_of,
            include_inactive=scope.include_inactive,
            k=k,
        )

    def recall_batch(
        self, queries: Sequence[RecallQuery], *, limit: int | None = None
    ) -> builtins.list[RecallResult | InvalidInput]:
        """Recall for many queries, their texts embedded in one batch; per query its result, or
        the InvalidInput that refused it (the others still run)."""
        if not queries:
            return []
        texts = [normalize_content(q.query) or " " for q in queries]
        with metering() as batch:
            vectors = self._parts.embedder.embed(texts)
        total = sum(len(t) for t in texts)
        results: list[RecallResult | InvalidInput] = []
        for query, text, vector in zip(queries, texts, vectors, strict=True):
            try:
                results.append(
                    self.recall(
                        query.query,
                        user_id=query.user_id,
                        project_id=query.project_id,
                        limit=query.limit or limit,
                        now=query.now,
                        as_of=query.as_of,
                        query_vector=vector,
                        filters=query.filters,
                        usage=batch.share(len(text) / total),
                    )
                )
            except InvalidInput as exc:
                results.append(exc)
        return results

    def list(
        self,
        *,
        user_id: str,
        project_id: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
        include_inactive: bool = False,
        filters: MemoryFilters | None = None,
        consistency: Consistency = "eventual",
        as_of: dt.datetime | None = None,
    ) -> MemoryPage:
        """A page of the user's memories (those matching ``filters``), newest first, and the cursor
        of the next page; with ``as_of``, those true then (valid time)."""
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInput(f"limit must be between 1 and {MAX_PAGE}, got {limit}", field="limit")
        after = pages.decode_cursor(cursor) if cursor else None
        narrowed = None if filters is None or filters.empty else filters
        scope = Scope(user_id, project_id, include_inactive=include_inactive, filters=narrowed, as_of=_aware(as_of))
        found = self._parts.reads.run(
            lambda conn: catalog.list_memories(conn, scope, limit=limit + 1, after=after),
            consistency=consistency,
            user_id=user_id,
        )
        # Bounded by bytes too (Lambda's 6 MB answer): a page of large memories ends early and its
        # cursor carries on from its last memory.
        kept = pages.fitting(found[:limit])
        more = len(found) > kept
        next_cursor = pages.encode_cursor(found[kept - 1]) if more else None
        return MemoryPage(memories=found[:kept], next_cursor=next_cursor)

    def get(self, memory_id: uuid.UUID, *, user_id: str, consistency: Consistency = "eventual") -> MemoryRecord:
        """The user's memory with this id, live or not; NotFound when the user has none (another
        user's id looks the same as no memory at all)."""
        found: MemoryRecord | None = self._parts.reads.run(
            lambda conn: edits.get_memory(conn, user_id, memory_id), consistency=consistency, user_id=user_id
        )
        if found is None:
            raise NotFound("no memory with this id for this user")
        return found

    def export(
        self,
        *,
        user_id: str,
        history: bool = False,
        limit: int = DEFAULT_PAGE,
        cursor: str | None = None,
        consistency: Consistency = "eventual",
        as_of: dt.datetime | None = None,
    ) -> ExportPage:
        """A page of everything the user has (superseded and expired memories too), newest first,
        as import lines (:meth:`import_` restores them: same ids, timestamps and recall); with
        ``history``, each line carries its memory's recorded changes. With ``as_of``, only the
        memories true then (valid time)."""
        page = self.list(
            user_id=user_id,
            limit=limit,
            cursor=cursor,
            include_inactive=as_of is None,
            consistency=consistency,
            as_of=as_of,
        )
        events: dict[uuid.UUID, list[MemoryEvent]] = {}
        if history and page.memories:
            ids = [m.id for m in page.memories]
            found: list[MemoryEvent] = self._parts.reads.run(
                lambda conn: edits.histories(conn, user_id, ids), consistency=consistency, user_id=user_id
            )
            for event in found:
                events.setdefault(event.memory_id, []).append(event)
        lines = [export_line(m, events.get(m.id, []) if history else None) for m in page.memories]
        # Each memory's history makes its line larger than the memory: bounded again, by the lines.
        kept = pages.fitting(lines)
        if kept < len(lines):
            return ExportPage(lines=lines[:kept], next_cursor=pages.encode_cursor(page.memories[kept - 1]))
        return ExportPage(lines=lines, next_cursor=page.next_cursor)

    def history(
        self,
        memory_id: uuid.UUID | None = None,
        *,
        user_id: str,
        limit: int = 1000,
        consistency: Consistency = "eventual",
    ) -> builtins.list[MemoryEvent]:
        """Every recorded change of one memory (or of all the user's), oldest first."""
        if not 1 <= limit <= MAX_HISTORY:
            raise InvalidInput(f"limit must be between 1 and {MAX_HISTORY}, got {limit}", field="limit")
        events: list[MemoryEvent] = self._parts.reads.run(
            lambda conn: catalog.history(conn, user_id, memory_id, limit=limit),
            consistency=consistency,
            user_id=user_id,
        )
        return events

    def history_page(
        self,
        memory_id: uuid.UUID | None = None,
        *,
        user_id: str,
        limit: int = DEFAULT_HISTORY_PAGE,
        cursor: str | None = None,
        consistency: Consistency = "eventual",
    ) -> MemoryHistory:
        """A page of the recorded changes of one memory (or of all the user's), oldest first: at
        most ``limit`` events and MAX_PAGE_BYTES of them, as a Lambda answer holds them (a few
        hundred metadata edits of one memory pass 6 MB), ``next_cursor`` carrying on."""
        if not 1 <= limit <= MAX_HISTORY:
            raise InvalidInput(f"limit must be between 1 and {MAX_HISTORY}, got {limit}", field="limit")
        after = pages.decode_history_cursor(cursor) if cursor is not None else None
        rows: list[tuple[int, MemoryEvent]] = self._parts.reads.run(
            lambda conn: catalog.history_page(conn, user_id, memory_id, limit=limit + 1, after=after),
            consistency=consistency,
        )
        events = [event for _, event in rows[:limit]]
        kept = pages.fitting(events)
        if kept < len(rows):
            last_id, last = rows[kept - 1]
            return MemoryHistory(events=events[:kept], next_cursor=pages.encode_history_cursor(last.at, last_id))
        return MemoryHistory(events=events, next_cursor=None)

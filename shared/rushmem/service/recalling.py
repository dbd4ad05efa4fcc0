"""Recall: the user's memories most relevant to a query, ranked, and the prompt block; one query or a
batch (embedded together). On the reader endpoint when one is configured."""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np

from rushmem.ingest.facts import outdated_across_scopes, past_event
from rushmem.recall.block import assemble_block, block_lines, count_tokens, over_budget
from rushmem.recall.cut import relevance_cut
from rushmem.recall.explain import explain_candidates, named_explanations, plan_weights
from rushmem.recall.ranking import RankTrace, rank_candidates
from rushmem.recall.stale import ABSENCE_LINE, absence_block, is_stale, leave_out_stale, stale_mark, with_note
from rushmem.records import Candidate
from rushmem.service import pages
from rushmem.service.base import Collaborators, utcnow
from rushmem.service.context import Context
from rushmem.store.memories.named import named_memories
from rushmem.store.memories.recall import hybrid_candidates
from rushmem.store.memories.scope import Scope
from rushmem.usage import metering
from rushmem_contract.errors import DatabaseResuming, InputTooLarge, InvalidInput
from rushmem_contract.inputs import has_visible, lone_surrogate
from rushmem_contract.models import (
    MAX_PAGE_BYTES,
    ExplainedName,
    RecalledMemory,
    RecallExplanation,
    RecallQuery,
    RecallResult,
    normalize_content,
)
from rushmem_contract.operations import validated
from rushmem_contract.schemas import RecallRequest

logger = logging.getLogger(__name__)


def _one_value_per_slot(candidates: Sequence[Candidate]) -> list[Candidate]:
    """A project's block holds one current value per slot: a value the other scope (user-wide or
    the project's) corrected later is left out (each scope's own corrections are the write path's)."""
    facts = [(c.project_id, c.content, c.valid_from or c.created_at) for c in candidates]
    gone = outdated_across_scopes(facts)
    return [c for i, c in enumerate(candidates) if i not in gone]


def _fitting(candidates: list[Any], memories: Sequence[RecalledMemory]) -> list[Any]:
    """An explanation's candidates, best first, in what the memories left of the answer's budget."""
    left = MAX_PAGE_BYTES - sum(pages.lambda_bytes(m) for m in memories)
    return candidates[: pages.fitting(candidates, budget=max(left, 0))] if candidates else candidates


# What a recalled memory shows of its candidate as it is (its score is the ranking's).
_SHOWN = [name for name in RecalledMemory.model_fields if name != "score"]


def checked_query(parts: Collaborators, query: str, limit: int | None) -> tuple[str, int]:
    """The query in its visible form and the limit to use; InvalidInput naming the field."""
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
    if len(query) > parts.settings.max_query_chars:
        raise InputTooLarge(
            f"query is {len(query)} characters; the limit is {parts.settings.max_query_chars}", field="query"
        )
    # The request's limit is within MAX_RECALL_LIMIT (its model says so), as is the setting.
    return query, parts.settings.default_limit if limit is None else limit


def recall(parts: Collaborators, request: RecallRequest, ctx: Context) -> RecallResult:
    """The user's memories most relevant to the query, best first, and the prompt block (the
    request's fields: :class:`RecallRequest`; without ``explain``, ranking records nothing and no
    statement is added). The context may carry a plan, the query's vector and the meter its
    embedding cost goes to (a batch, a benchmark)."""
    user_id = ctx.user
    query, limit = checked_query(parts, request.query_text(), request.limit)
    explain_ids = request.explain_ids or ()
    explain = request.explain or bool(explain_ids)
    plan = ctx.plan or parts.recall_plan
    with metering(ctx.usage) as meter:
        vector = parts.embedder.embed_query(query) if ctx.query_vector is None else ctx.query_vector
    meter.add("recall", calls=1, characters=len(query))
    used = parts.usage(meter)
    scope = Scope(
        user_id,
        request.project_id,
        now=request.now,
        include_inactive=request.include_inactive,
        filters=request.filters,
        as_of=request.as_of,
    )
    k = plan.candidates_per_leg(limit)
    # The present is read once, so the date windows and the decay measure from the same instant.
    evaluated_at = scope.now or utcnow()
    windows = plan.windows(query, evaluated_at)
    on_reader = parts.reads.reader is not None and request.consistency == "eventual"
    # On the writer alone the recall's own statement writes its usage count; where a reader is
    # configured the count waits in the container for a batch (no writer round trip, nothing
    # the writer's health can fail).
    try:
        candidates = parts.reads.run(
            lambda conn: hybrid_candidates(
                conn,
                scope,
                vector,
                query,
                k,
                statement_timeout_ms=parts.settings.recall_statement_timeout_ms,
                usage=() if on_reader else used,
                windows=windows,
                date_k=plan.date_k,
            ),
            consistency=request.consistency,
            user_id=user_id,
        )
    except DatabaseResuming:
        # A paused Aurora cluster wakes in ~15 s: the agent should answer now, without memories,
        # rather than wait (RUSHMEM_DB_RESUME_WAIT_S bounds any wait).
        logger.warning("recall answered without memories: the database is resuming")
        return RecallResult(memories=[], prompt_block="", query=query, unavailable="database_resuming")
    if on_reader and used:
        parts.usage_buffer.count(user_id, utcnow().date(), used)
    if request.project_id is not None and request.as_of is None and not request.include_inactive:
        candidates = _one_value_per_slot(candidates)
    reranker = parts.reranker
    trace = RankTrace() if explain else None
    # A current read leaves stale memories out (rushmem.recall.stale): ranking gets a place more for
    # each, so that what is left still fills the limit.
    stale_at = scope.as_of or evaluated_at
    hide_stale = not request.include_inactive
    stale = sum(1 for c in candidates if is_stale(c, stale_at)) if hide_stale else 0
    chosen = rank_candidates(
        candidates,
        plan,
        limit=limit + stale,
        now=evaluated_at,
        query=query,
        windows=windows,
        rerank=reranker.scores if reranker is not None else None,
        trace=trace,
    )
    settings = parts.settings
    min_score = settings.min_score
    # The cut, then the budget: what is left out of the block is left out of the answer too.
    dropped = relevance_cut(
        [score for _, score in chosen], min_score=min_score, min_relative_score=plan.min_relative_score
    )
    note: str | None = None
    if stale:
        dropped, note = leave_out_stale(chosen, dropped, at=stale_at, limit=limit)
    lines = block_lines(
        (c.content for c, _ in chosen),
        max_chars=settings.max_block_chars,
        times=[_shown_time(c, stale_at) for c, _ in chosen],
    )
    if request.max_tokens is not None:
        why = f"the block would exceed the budget of {request.max_tokens} tokens"
        for place in over_budget(lines, request.max_tokens, skip=dropped, guard=settings.prompt_guard):
            dropped[place] = ("over_token_budget", why)
    kept = [place for place in range(len(chosen)) if place not in dropped]
    memories = [
        RecalledMemory(score=round(chosen[p][1], 4), **{name: getattr(chosen[p][0], name) for name in _SHOWN})
        for p in kept
    ]
    # Lambda answers at most 6 MB: the memories (and an explanation's candidates) are kept while they
    # fit MAX_PAGE_BYTES as the answer carries them, best first (50 of the largest memories would not).
    fit = pages.fitting(memories)
    memories, kept = memories[:fit], kept[:fit]
    block = assemble_block((lines[p] for p in kept), guard=settings.prompt_guard)
    if note == ABSENCE_LINE or (note is not None and not block):  # nothing current kept (or fitted)
        block = absence_block(guard=settings.prompt_guard)
    elif note is not None:
        block = with_note(block, note)
    explanation = None
    if trace is not None:
        explanation = RecallExplanation(
            now=evaluated_at,
            as_of=scope.as_of,
            limit=limit,
            candidates_per_leg=k,
            min_score=min_score,
            min_relative_score=plan.min_relative_score,
            max_tokens=request.max_tokens,
            weights=plan_weights(plan),
            date_windows=list(windows),
            reranked=bool(trace.rerank_scores),
            # Keyed by the candidate's index in the trace, as the explanation counts them.
            candidates=_fitting(
                explain_candidates(trace, plan, limit=limit, dropped={trace.order[p]: dropped[p] for p in dropped}),
                memories,
            ),
            named=_explain_named(parts, scope, explain_ids, candidates, vector, query, evaluated_at, k),
        )
    return RecallResult(
        memories=memories, prompt_block=block, block_tokens=count_tokens(block), query=query, explanation=explanation
    )


def _shown_time(candidate: Candidate, at: dt.datetime) -> str | None:
    """What the block says of a memory's time: an ended one (recalled with superseded memories) is
    never presented as current; a past event is shown with when it happened (or was said)."""
    ended = candidate.valid_until
    if ended is not None and ended <= at:  # a replacement due later leaves it current until then
        return f"no longer current since {ended:%Y-%m-%d}"
    if is_stale(candidate, at):  # kept only by a read that asks for what no longer holds
        return stale_mark(candidate)
    if past_event(candidate.content):
        return f"{(candidate.valid_from or candidate.created_at):%Y-%m-%d}"
    return None


def _explain_named(
    parts: Collaborators,
    scope: Scope,
    ids: Sequence[uuid.UUID],
    candidates: Sequence[Candidate],
    vector: np.ndarray,
    query: str,
    evaluated_at: dt.datetime,
    k: int,
) -> list[ExplainedName]:
    """Why each named memory was (not) a candidate: one more statement, only when ids are named.
    On the writer: a memory written a moment ago is named because the caller knows it."""
    if not ids:
        return []
    rows = parts.reads.run(lambda conn: named_memories(conn, scope, ids, vector, query), consistency="strong")
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
    parts: Collaborators, queries: Sequence[RecallQuery], ctx: Context, *, limit: int | None = None
) -> list[RecallResult | InvalidInput]:
    """Recall for many queries of one cell, their texts embedded in one batch; per query its result,
    or the InvalidInput that refused it (the others still run)."""
    if not queries:
        return []
    texts = [normalize_content(q.query) or " " for q in queries]
    with metering() as batch:
        vectors = parts.embedder.embed(texts)
    total = sum(len(t) for t in texts)
    results: list[RecallResult | InvalidInput] = []
    for query, text, vector in zip(queries, texts, vectors, strict=True):
        try:
            # A query's fields are a recall request's; the batch's limit where it sets none.
            request = validated(RecallRequest, {**dict(query), "limit": query.limit or limit})
            one = Context(
                caller=ctx.caller,
                user_id=query.user_id,
                query_vector=vector,
                usage=batch.share(len(text) / total),
            )
            results.append(recall(parts, request, one))
        except InvalidInput as exc:
            results.append(exc)
    return results

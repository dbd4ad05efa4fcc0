"""The memory core against a real embedded PostgreSQL: writes, recall, isolation, limits."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import psycopg
import pytest
from psycopg import sql

from rushmem.config import Settings
from rushmem.recall.block import BLOCK_GUARD
from rushmem.recall.ranking import leg_positions
from rushmem.service import Memory
from rushmem.store.indexes.dense import dense_index_names
from rushmem.store.memories import recall
from rushmem.store.memories.scope import Scope, scope_params
from rushmem.store.schema.migrate import FUNCTIONS_NAME, available_migrations
from rushmem_contract.errors import InputTooLarge, InvalidInput, NotFound, SchemaMismatch
from rushmem_contract.models import NewMemory

# The same behaviour on a connection and through the RDS Data API (tests/support/data_api.py).
pytestmark = pytest.mark.both_backends

FACTS = [
    "The user's tech stack is TypeScript.",
    "The user's product is an SVG editor with live preview, code editing and export.",
    "Every SVG modification must be synced to the defaultSVG variable.",
    "The user lives in Lisbon.",
]


def remember(service: Memory, user: str, *texts: str, **kwargs: object) -> list[str]:
    stored = service.add([NewMemory(content=t) for t in texts], user_id=user, **kwargs)  # type: ignore[arg-type]
    return [str(i) for i in stored.ids]


def rows(database_url: str, sql: str, *params: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(database_url) as conn:
        return conn.execute(sql, params).fetchall()


def test_remember_then_recall_returns_the_block_and_scores(service: Memory) -> None:
    ids = remember(service, "u1", *FACTS)
    result = service.recall("SVG editor export", user_id="u1")
    assert {str(m.id) for m in result.memories} == set(ids)
    assert result.memories[0].content == FACTS[1]
    assert result.prompt_block.startswith("[RUSH_MEMORY]\n" + BLOCK_GUARD + "\nRelevant memories:\n1. " + FACTS[1])
    scores = [m.score for m in result.memories]
    assert all(0 <= s <= 1.2 for s in scores)


def test_the_same_fact_twice_is_one_row_with_updated_at_refreshed(service: Memory, database_url: str) -> None:
    first = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    later = dt.datetime(2026, 2, 1, tzinfo=dt.UTC)
    (a,) = remember(service, "u1", "Prefers TypeScript.", observed_at=first)
    stored = service.add(
        [NewMemory(content="prefers   typescript"), NewMemory(content="Prefers TypeScript!")],
        user_id="u1",
        observed_at=later,
    )
    assert [str(i) for i in stored.ids] == [a, a] and stored.created == 0
    ((count, created_at, updated_at),) = rows(
        database_url, "SELECT count(*), min(created_at), max(updated_at) FROM user_memories WHERE user_id = 'u1'"
    )
    assert count == 1 and updated_at == later and created_at <= updated_at


def test_redelivery_with_the_same_time_changes_nothing(service: Memory, database_url: str) -> None:
    when = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    remember(service, "u1", "Uses pnpm, not npm.", source="c-1", observed_at=when)
    before = rows(database_url, "SELECT id, content, updated_at, metadata, source FROM user_memories")
    remember(service, "u1", "Uses pnpm, not npm.", source="c-1", observed_at=when)
    assert rows(database_url, "SELECT id, content, updated_at, metadata, source FROM user_memories") == before


def test_near_duplicates_refresh_the_existing_memory(database_url: str) -> None:
    service = Memory(Settings(database_url=database_url, embedding_provider="hash", near_duplicate_threshold=0.9))
    (a,) = remember(service, "u1", "The user prefers dark mode in every editor they use")
    stored = service.add([NewMemory(content="The user prefers dark mode in every editor they use daily")], user_id="u1")
    assert [str(i) for i in stored.ids] == [a]
    (b,) = remember(service, "u1", "The user has a cat")
    assert b != a
    assert rows(database_url, "SELECT count(*) FROM user_memories")[0][0] == 2


def test_users_never_see_each_others_memories(service: Memory) -> None:
    remember(service, "alice", "Alice prefers TypeScript for the SVG editor.")
    (bob_id,) = remember(service, "bob", "Bob prefers TypeScript for the SVG editor.")
    found = service.recall("TypeScript SVG editor", user_id="alice", limit=50)
    assert [m.content for m in found.memories] == ["Alice prefers TypeScript for the SVG editor."]
    assert all(m.content.startswith("Alice") for m in service.list(user_id="alice").memories)
    with pytest.raises(NotFound):  # not hers to delete: as if there were none
        service.delete(__import__("uuid").UUID(bob_id), user_id="alice")
    assert len(service.list(user_id="bob").memories) == 1
    assert service.forget_user("alice").deleted.memories == 1
    assert len(service.list(user_id="bob").memories) == 1


@pytest.mark.parametrize(
    "query",
    [
        "it's a 'quoted' & | ! :* <-> (((",
        "\\",
        '"unterminated',
        "-",
        "OR OR OR",
        "NOT AND",
        "'; DROP TABLE user_memories; --",
        "emoji 🚀 and 中文 and ümlauts",
        "a:*B & !c",
        "the a an",  # stop words only: an empty tsquery
        "x" * 4000,
    ],
)
def test_any_user_text_is_a_safe_query(service: Memory, query: str) -> None:
    remember(service, "u1", *FACTS)
    result = service.recall(query, user_id="u1")
    assert len(result.memories) == len(FACTS)


def test_query_limits_are_clear_errors(service: Memory) -> None:
    with pytest.raises(InvalidInput) as err:
        service.recall("   ", user_id="u1")
    assert err.value.field == "query"
    with pytest.raises(InputTooLarge) as err:
        service.recall("x" * 4001, user_id="u1")
    assert err.value.field == "query"
    for bad in (0, 51):
        with pytest.raises(InvalidInput) as err:
            service.recall("ok", user_id="u1", limit=bad)
        assert err.value.field == "limit"
    with pytest.raises(InputTooLarge) as err:
        service.add([NewMemory(content="y" * 2001)], user_id="u1")
    assert err.value.field == "memories[0].content"


def test_project_scope_sees_its_project_and_user_wide_memories(service: Memory) -> None:
    remember(service, "u1", "Global: prefers TypeScript")
    remember(service, "u1", "Editor project: sync SVG to defaultSVG", project_id="svg-editor")
    remember(service, "u1", "Blog project: uses Hugo", project_id="blog")
    contents = {m.content for m in service.recall("project", user_id="u1", project_id="svg-editor").memories}
    assert contents == {"Global: prefers TypeScript", "Editor project: sync SVG to defaultSVG"}
    assert len(service.recall("project", user_id="u1").memories) == 3  # no project: everything of the user


def test_recall_as_of_hides_later_memories_and_applies_decay(service: Memory) -> None:
    old = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    service.add([NewMemory(content="Deploys with Terraform", created_at=old)], user_id="u1")
    service.add(
        [NewMemory(content="Deploys with SAM", created_at=dt.datetime(2025, 1, 1, tzinfo=dt.UTC))], user_id="u1"
    )
    as_of = service.recall("Deploys with", user_id="u1", now=dt.datetime(2024, 6, 1, tzinfo=dt.UTC))
    assert [m.content for m in as_of.memories] == ["Deploys with Terraform"]
    both = service.recall("Deploys with", user_id="u1", now=dt.datetime(2025, 1, 2, tzinfo=dt.UTC))
    assert both.memories[0].content == "Deploys with SAM"  # equally relevant, newer wins


def test_a_user_gets_min_limit_and_their_memories_despite_a_crowd(
    service: Memory, database_url: str, backend: str
) -> None:
    """A dense user's own HNSW index under the scope filter can return fewer rows than asked;
    recall must not: it recomputes the leg exactly."""
    if backend == "data-api":
        pytest.skip("forces the failure with a session-level SET on the service's connection: the Data API has none")
    mine = [f"note {i}: the user likes topic {i} in the editor" for i in range(40)]
    remember(service, "lonely", *mine)
    for start in range(0, 300, 100):
        old = (f"old note {i}: zebra quantum harmonica, replaced long ago" for i in range(start, start + 100))
        remember(service, "lonely", *old)
    with psycopg.connect(database_url, autocommit=True) as owner:
        # 20,000 rows of 1,000 other users (20 each: none of them dense).
        owner.execute(
            "INSERT INTO user_memories (user_id, content, content_hash, embedding) "
            "SELECT 'crowd-' || (g % 1000), 'crowd memory ' || g, sha256(g::text::bytea), "
            "(SELECT array_agg(random() - 0.5)::vector(384) FROM generate_series(1, 384) WHERE g > 0) "
            "FROM generate_series(1, 20000) g"
        )
        # Ended memories stay in the user's index; the scope filter drops them during the scan.
        owner.execute("UPDATE user_memories SET superseded_at = now() WHERE user_id = 'lonely' AND content LIKE 'old%'")
    assert service.admin.refresh_dense_users(min_memories=100).indexed == 1

    conn = service.admin.db.connection()
    # Force the failure mode: the index scan gives up after a few tuples.
    conn.execute("SET hnsw.max_scan_tuples = 20")
    # The user's partition is small: left alone, the planner reads it exactly (a scan and a sort).
    conn.execute("SET enable_seqscan = off")
    conn.execute("SET enable_sort = off")
    scope = Scope("lonely")
    # A query like the ended notes (they fill the index scan's first batch), unlike the live ones.
    query = "zebra quantum harmonica"
    vector = service.admin.embedder.embed_query(query)
    params = {**scope_params(scope), "query_vector": vector, "k": 30, "text_query": recall.text_query(query)}
    dense_shape = recall.hybrid_sql(recall.HybridShape(scope.shape(), "embedding", dense=True))
    with conn.transaction():
        conn.execute("SELECT set_config('agent_memory.user_id', 'lonely', true)")
        conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + dense_shape, params).fetchall())
    assert dense_index_names("lonely")[0] in plan  # the user's own HNSW index
    # The index alone comes back short. HNSW levels are random: now and then a graph leads the
    # search to the live notes anyway; a rebuilt index draws new levels.
    ann_only = (
        "SELECT count(*) FROM (SELECT id FROM dense_memories WHERE user_id = 'lonely' AND superseded_at IS NULL "
        "ORDER BY embedding <=> %(query_vector)s LIMIT 30) ann"
    )
    for _attempt in range(5):
        with conn.transaction():
            conn.execute("SELECT set_config('agent_memory.user_id', 'lonely', true)")
            (found,) = conn.execute(ann_only, params).fetchone() or (0,)
        if found < 30:
            break
        with psycopg.connect(database_url, autocommit=True) as owner:
            owner.execute(sql.SQL("REINDEX INDEX {}").format(sql.Identifier(dense_index_names("lonely")[0])))
    assert found < 30
    # The statement makes up for it itself: the exact leg, in the same round trip.
    indexed = recall._run_hybrid(conn, dense_shape, params, 30, 0)
    assert sum(r["in_vector"] for r in indexed) == 30

    for limit, expected in ((10, 10), (50, 40)):
        result = service.recall(query, user_id="lonely", limit=limit)
        assert len(result.memories) == expected
        assert all(m.content.startswith("note ") for m in result.memories)


def test_an_embedder_of_another_dimension_is_refused(database_url: str) -> None:
    other = Memory(Settings(database_url=database_url, embedding_provider="hash", embedding_dimensions=256))
    with pytest.raises(SchemaMismatch) as err:
        other.recall("anything", user_id="u1")
    message = str(err.value)
    assert "384-dimensional" in message and "256" in message and "reembed" in message


def test_another_model_of_the_same_dimension_is_refused(database_url: str) -> None:
    # The local model also makes 384-dimensional vectors: same size, different meaning.
    local = Memory(Settings(database_url=database_url, embedding_provider="local"))
    with pytest.raises(SchemaMismatch) as err:
        local.list(user_id="u1")
    assert "hash:feature-hash-v1:384" in str(err.value) and "all-MiniLM-L6-v2" in str(err.value)


def test_migrations_are_idempotent_and_safe_concurrently(blank_database_url: str) -> None:
    settings = Settings(database_url=blank_database_url, embedding_provider="hash", auto_migrate=False)
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(Memory(settings).admin.migrate().applied)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    applied = sorted(name for r in results for name in r)
    # Each migration applied exactly once, whichever thread got to it, and the functions once after them.
    assert applied == sorted([*(f"{m.version:04d}_{m.name}" for m in available_migrations()), FUNCTIONS_NAME])
    assert Memory(settings).admin.migrate().applied == []


def test_an_unmigrated_database_without_auto_migrate_says_what_to_run(blank_database_url: str) -> None:
    service = Memory(Settings(database_url=blank_database_url, embedding_provider="hash", auto_migrate=False))
    with pytest.raises(SchemaMismatch) as err:
        service.list(user_id="u1")
    assert "rushmem migrate" in str(err.value)


def test_list_pages_with_a_cursor(service: Memory) -> None:
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    service.add(
        [NewMemory(content=f"fact {i}", created_at=base + dt.timedelta(minutes=i)) for i in range(7)], user_id="u1"
    )
    seen: list[str] = []
    cursor = None
    while True:
        page = service.list(user_id="u1", limit=3, cursor=cursor)
        seen += [m.content for m in page.memories]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [f"fact {i}" for i in reversed(range(7))]


@pytest.mark.model
def test_the_local_model_recalls_by_meaning(blank_database_url: str, local_embedder) -> None:  # type: ignore[no-untyped-def]
    service = Memory(Settings(database_url=blank_database_url), embedder=local_embedder)
    remember(
        service, "u1", *FACTS, "The user has a golden retriever named Biscuit.", "The user's favourite food is ramen."
    )
    result = service.recall("Which programming language should I write the new feature in?", user_id="u1")
    assert result.memories[0].content == "The user's tech stack is TypeScript."


def test_min_score_keeps_unrelated_memories_out_of_the_block(database_url: str) -> None:
    settings = Settings(database_url=database_url, embedding_provider="hash", min_score=0.2)
    service = Memory(settings)
    remember(service, "u1", "The user's product is an SVG editor with export", "The user has a dog named Biscuit")
    result = service.recall("SVG editor export button", user_id="u1")
    assert [m.content for m in result.memories] == ["The user's product is an SVG editor with export"]
    everything = Memory(Settings(database_url=database_url, embedding_provider="hash")).recall("SVG", user_id="u1")
    assert len(everything.memories) == 2  # without a floor or the relevance cut the limit is filled, as in the article


def test_equal_matches_rank_the_same_in_every_database(service: Memory) -> None:
    # Full-text ranks tie often. Ties used to go by the random memory ids, so the same
    # memories imported twice (or into two databases) could recall differently.
    filler = " ".join(f"w{j}" for j in range(40))
    # One text match each (equal text ranks); lengths differ, so vector distances do not tie.
    facts = [f"Note {i}: the user keeps apples {' '.join(filler.split()[:i])}".strip() for i in range(40)]
    service.add([NewMemory(content=f) for f in facts], user_id="u1")
    service.add([NewMemory(content=f) for f in reversed(facts)], user_id="u2")
    text_only = service.admin.recall_plan.but(legs="text", decay=False, mmr=False, date_boost=0.0)
    first = [m.content for m in service.recall("apples", user_id="u1", plan=text_only).memories]
    second = [m.content for m in service.recall("apples", user_id="u2", plan=text_only).memories]
    assert len(first) == 10 and first == second


def test_the_text_leg_keeps_the_most_recent_of_equal_matches(service: Memory) -> None:
    # 60 old notes and one recent note match "apples" equally; the leg keeps 30 of them.
    now = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
    old = [
        NewMemory(content=f"Old note {i}: the user keeps apples", created_at=now - dt.timedelta(days=30))
        for i in range(60)
    ]
    recent = NewMemory(content="Recent note: the user keeps apples in a bowl", created_at=now - dt.timedelta(days=1))
    service.add([*old, recent], user_id="u1")
    vector = service.admin.embedder.embed_query("apples")
    found = service.admin.db.run(lambda conn: recall.hybrid_candidates(conn, Scope("u1", None), vector, "apples", 30))
    text_leg = {c.content for c in found if c.in_text}
    assert len(text_leg) == 30 and recent.content in text_leg
    # In the text leg's order, the tie goes to the recent note.
    legs = leg_positions(found)
    first = legs.candidates[legs.text_position.index(1)]
    assert first.content == recent.content

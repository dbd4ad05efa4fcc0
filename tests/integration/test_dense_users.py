"""Recall whose cost follows the user's data, not the table's: no table-wide vector index (any
dimension migrates), and users with many memories get their own HNSW and GIN indexes from
`agent-memory dense-users`, which recall detects in the same statement (migration 0005,
agent_memory.store.indexes)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agent_memory.config import Settings
from agent_memory.service import Memory
from agent_memory.store import recall as candidates
from agent_memory.store.dense import dense_index_names
from agent_memory.store.migrate import _apply, available_migrations
from agent_memory.store.transactions import user_transaction
from agent_memory_contract.models import ImportLine, MemoryFilters, NewMemory
from agent_memory_tools.cli.main import main
from tests.db_support import round_trips

EARLIER = dt.datetime.now(dt.UTC) - dt.timedelta(days=3)


TEXT_LEG = (
    "SELECT * FROM agent_memory_dense_text_leg('axolotl'::tsquery, 10, NULL, NULL, false, NULL, NULL, NULL, NULL)"
)


@pytest.fixture(autouse=True)
def _forget_dense_users() -> Iterator[None]:
    """What the process remembers about dense users must not leak from one database to the next."""
    candidates.DENSE_USERS.clear()
    yield
    candidates.DENSE_USERS.clear()


def remember(service: Memory, user: str, *texts: str) -> None:
    for start in range(0, len(texts), 100):
        service.add([NewMemory(content=t) for t in texts[start : start + 100]], user_id=user)


def owner_rows(database_url: str, query: str, *params: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(database_url) as conn:
        conn.execute("SET ROLE agent_memory_maintenance")
        return conn.execute(query, params).fetchall()


def dense_indexes(database_url: str) -> set[str]:
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'user_memories' "
            "AND indexname LIKE 'user_memories_dense_%'"
        ).fetchall()
    return {r[0] for r in rows}


@pytest.fixture
def busy(service: Memory) -> Memory:
    """User 'busy' with 121 memories (120 alike, one about an axolotl), dense at a threshold of 100."""
    remember(service, "busy", *(f"the user wrote memo number {i}" for i in range(120)))
    remember(service, "busy", "the user keeps a pet axolotl called Quetzal")
    remember(service, "other", "the other user also keeps an axolotl")
    return service


def test_a_new_database_has_no_table_wide_vector_index(database_url: str) -> None:
    with psycopg.connect(database_url) as conn:
        vector_indexes = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'user_memories' AND indexdef LIKE '%hnsw%'"
        ).fetchall()
    assert vector_indexes == []


def test_a_3072_dimension_embedder_migrates_and_recalls(blank_database_url: str) -> None:
    """OpenAI's text-embedding-3-large: above HNSW's 2,000 dimensions (migration 0001 built a
    table-wide HNSW index, which refused the column)."""
    settings = Settings(database_url=blank_database_url, embedding_provider="hash", embedding_dimensions=3072)
    service = Memory(settings)
    try:
        assert "0005_dense_users" in service.admin.migrate().applied
        remember(service, "wide", *(f"wide fact {i} about gardening" for i in range(30)))
        remember(service, "wide", "the user grows purple carrots")
        assert (
            service.recall("purple carrots", user_id="wide", limit=3).memories[0].content
            == "the user grows purple carrots"
        )
        # As a dense user: their HNSW index is on the halfvec cast (HNSW takes halfvec up to 4,000).
        assert service.admin.refresh_dense_users(min_memories=20).indexed == 1
        with psycopg.connect(blank_database_url) as conn:
            definition = conn.execute(
                "SELECT indexdef FROM pg_indexes WHERE indexname = %s", [dense_index_names("wide")[0]]
            ).fetchone()
        assert definition is not None and "halfvec(3072)" in definition[0]
        found = service.recall("purple carrots", user_id="wide", limit=10)
        assert len(found.memories) == 10
        assert found.memories[0].content == "the user grows purple carrots"
    finally:
        service.close()


def test_a_database_migrated_before_0005_gets_it_on_the_next_migrate(blank_database_url: str) -> None:
    """Deployed stores have 0006-0009 and the table-wide HNSW index: 0005 comes after them."""
    settings = Settings(database_url=blank_database_url, embedding_provider="hash", auto_migrate=False)
    service = Memory(settings)
    with psycopg.connect(blank_database_url, autocommit=True) as conn:
        older = [m for m in available_migrations() if m.version != 5]
        _apply(conn, older, dimension=384, fingerprint=service.admin.embedder.fingerprint)
        conn.execute(
            "CREATE INDEX user_memories_embedding_idx ON user_memories USING hnsw (embedding vector_cosine_ops)"
        )
    try:
        assert service.admin.migrate().applied == ["0005_dense_users"]
        assert service.admin.migrate().applied == []
        with psycopg.connect(blank_database_url) as conn:
            assert conn.execute("SELECT to_regclass('user_memories_embedding_idx')").fetchone() == (None,)
        remember(service, "u1", "the user prefers tea")
        assert service.recall("tea", user_id="u1").memories[0].content == "the user prefers tea"
    finally:
        service.close()


def test_a_dense_users_text_leg_finds_their_rare_words(busy: Memory, database_url: str) -> None:
    """The words most of a dense user's memories contain are left out of their text leg; the rest
    is found through their GIN index (row-level security keeps the app's own query from it)."""
    busy._engine.settings = busy.settings.model_copy(update={"dense_max_text_matches": 50})
    report = busy.admin.refresh_dense_users(min_memories=100)
    assert (report.indexed, report.done) == (1, True)
    assert dense_indexes(database_url) == set(dense_index_names("busy"))
    (common,) = owner_rows(database_url, "SELECT common_lexemes FROM agent_memory_dense_users WHERE user_id = 'busy'")
    assert {"user", "memo"} <= set(common[0]) and "axolotl" not in common[0]
    found = busy.recall("does the user have an axolotl?", user_id="busy", limit=3)
    assert found.memories[0].content == "the user keeps a pet axolotl called Quetzal"
    assert candidates.DENSE_USERS.seen("busy")  # the next recall starts with the dense shape
    assert all(m.content != "the other user also keeps an axolotl" for m in found.memories)
    # Quotes and backslashes in the words reach the reduced tsquery escaped, not as syntax.
    odd = busy.recall("O'Brien's axolotl at C:\\pets\\quetzal", user_id="busy", limit=3)
    assert odd.memories[0].content == "the user keeps a pet axolotl called Quetzal"
    # Every word common: no text leg at all, the vector leg still answers.
    assert len(busy.recall("user memo", user_id="busy", limit=5).memories) == 5


def test_a_dense_users_text_leg_keeps_the_scope_and_filters(busy: Memory) -> None:
    busy.add([NewMemory(content="the user keeps a second axolotl", category="decision")], user_id="busy")
    busy.add([NewMemory(content="a project axolotl tank")], user_id="busy", project_id="aquarium")
    busy.admin.refresh_dense_users(min_memories=100)
    filtered = busy.recall("axolotl", user_id="busy", limit=3, filters=MemoryFilters(categories=["decision"]))
    assert [m.content for m in filtered.memories] == ["the user keeps a second axolotl"]
    elsewhere = [m.content for m in busy.recall("axolotl tank", user_id="busy", limit=20, project_id="garden").memories]
    assert "a project axolotl tank" not in elsewhere  # another project's memory
    assert "the user keeps a second axolotl" in elsewhere  # user-wide memories are in every project
    in_project = [
        m.content for m in busy.recall("axolotl tank", user_id="busy", limit=3, project_id="aquarium").memories
    ]
    assert in_project[0] == "a project axolotl tank"


def test_the_dense_text_leg_sees_nothing_without_a_user_scope(busy: Memory, app_login_url: str) -> None:
    busy.admin.refresh_dense_users(min_memories=100)
    with psycopg.connect(app_login_url) as conn:
        rows = conn.execute(TEXT_LEG).fetchall()
        assert rows == []
        conn.execute("SELECT set_config('agent_memory.user_id', 'other', false)")
        rows = conn.execute(TEXT_LEG).fetchall()
        assert len(rows) == 1  # the other user's own memory, never busy's


def test_a_dense_recall_counts_its_usage_once_and_takes_the_extra_legs(busy: Memory, tmp_path: Path) -> None:
    busy.import_(
        [
            ImportLine(user_id="busy", content="the axolotl tank got a new filter", created_at=EARLIER),
            ImportLine(user_id="busy", content="a heron was seen by the pond", created_at=EARLIER),
        ],
    )
    busy.admin.refresh_dense_users(min_memories=100)
    before = {(ln.kind, ln.model): ln.calls for ln in busy.usage("busy").lines}.get(("recall", ""), 0)
    plan = busy.admin.recall_plan.but(hop_seeds=1, hop_boost=1.0, date_k=10)
    query = "axolotl tank filter 3 days ago"  # a date window: the date leg is in the statement
    first = busy.recall(query, user_id="busy", limit=3, plan=plan)  # ordinary shape, then dense
    assert first.memories[0].content == "the axolotl tank got a new filter"
    result: list[Any] = []
    assert round_trips(busy, lambda: result.append(busy.recall(query, user_id="busy", plan=plan)), tmp_path) == 1
    contents = [m.content for m in result[0].memories]
    assert contents[0] == "the axolotl tank got a new filter"
    assert "a heron was seen by the pond" in contents  # the date leg's find, lifted by the date boost and the hop
    after = {(ln.kind, ln.model): ln.calls for ln in busy.usage("busy").lines}[("recall", "")]
    assert after - before == 2


def test_a_user_with_fewer_memories_than_the_limit_is_one_statement(service: Memory, tmp_path: Path) -> None:
    """The exact re-run is for a dense user's approximate leg: an ordinary user's is exact already."""
    remember(service, "u1", "the user prefers tea", "the user lives in Lisbon")
    result: list[Any] = []
    assert round_trips(service, lambda: result.append(service.recall("tea", user_id="u1", limit=10)), tmp_path) == 1
    assert len(result[0].memories) == 2


def test_users_below_half_the_threshold_go_back_to_exact_search(
    busy: Memory, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = busy.settings.model_copy(update={"dense_min_memories": 100})
    assert main(["dense-users"], settings=settings) == 0
    assert json.loads(capsys.readouterr().out)["indexed"] == 1
    assert (
        busy.recall("axolotl", user_id="busy", limit=3).memories[0].content
        == "the user keeps a pet axolotl called Quetzal"
    )
    # 70 left: above half the threshold, still dense (no flapping around the threshold).
    with psycopg.connect(database_url) as conn:
        conn.execute("DELETE FROM user_memories WHERE user_id = 'busy' AND content LIKE '%memo number 1__'")
        conn.commit()
    assert busy.admin.refresh_dense_users(min_memories=100).refreshed == 1
    with psycopg.connect(database_url) as conn:
        conn.execute("DELETE FROM user_memories WHERE user_id = 'busy' AND content LIKE '%memo number __'")
        conn.commit()
    report = busy.admin.refresh_dense_users(min_memories=100)
    assert (report.unlisted, report.refreshed) == (1, 0)
    assert dense_indexes(database_url) == set()
    assert owner_rows(database_url, "SELECT user_id FROM agent_memory_dense_users") == []
    # Recall notices on its own (the process still thought them dense).
    assert (
        busy.recall("axolotl", user_id="busy", limit=3).memories[0].content
        == "the user keeps a pet axolotl called Quetzal"
    )
    assert not candidates.DENSE_USERS.seen("busy")


def test_an_erased_dense_user_leaves_no_registry_row_and_the_next_run_drops_their_indexes(
    busy: Memory, database_url: str
) -> None:
    busy.admin.refresh_dense_users(min_memories=100)
    busy.forget_user("busy")
    assert owner_rows(database_url, "SELECT user_id FROM agent_memory_dense_users") == []
    assert busy.admin.refresh_dense_users(min_memories=100).orphans_dropped == 2
    assert dense_indexes(database_url) == set()


def test_an_interrupted_build_and_an_index_on_the_previous_column_are_built_again(
    busy: Memory, database_url: str
) -> None:
    busy.admin.refresh_dense_users(min_memories=100)
    vec, tsv = dense_index_names("busy")
    with psycopg.connect(database_url, autocommit=True) as conn:
        # What a re-embedding switch leaves: the user's HNSW index on the renamed column.
        conn.execute("ALTER TABLE user_memories ADD COLUMN embedding_prev vector(384)")
        conn.execute(f"DROP INDEX {vec}")
        conn.execute(
            f"CREATE INDEX {vec} ON user_memories USING hnsw (embedding_prev vector_cosine_ops) WHERE user_id = 'busy'"
        )
        # What an interrupted CREATE INDEX CONCURRENTLY leaves: an invalid index.
        conn.execute(f"UPDATE pg_index SET indisvalid = false WHERE indexrelid = '{tsv}'::regclass")
    report = busy.admin.refresh_dense_users(min_memories=100)
    assert (report.rebuilt, report.indexed) == (1, 0)
    with psycopg.connect(database_url) as conn:
        definition = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [vec]).fetchone()
        valid = conn.execute("SELECT indisvalid FROM pg_index WHERE indexrelid = %s::regclass", [tsv]).fetchone()
    assert definition is not None and "(embedding vector_cosine_ops)" in definition[0]
    assert valid == (True,)


def test_the_near_duplicate_check_of_a_dense_user_is_planned_with_its_values(busy: Memory) -> None:
    busy.admin.refresh_dense_users(min_memories=100)
    for _ in range(7):  # psycopg would prepare it after 5 runs
        busy.add([NewMemory(content="the user keeps a pet axolotl called Quetzal!")], user_id="busy")
    conn = busy.admin.db.connection()
    prepared = conn.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE '%WITH ORDINALITY%'")
    assert prepared.fetchone() == (0,)
    with user_transaction(conn, "busy"):
        count = conn.execute("SELECT count(*) FROM user_memories WHERE content LIKE '%axolotl%'").fetchone()
    assert count == (1,)  # folded into the existing memory each time

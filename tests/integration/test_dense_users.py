"""Recall whose cost follows the user's data, not the table's: no table-wide vector index (any
dimension migrates), and users with many memories get their own partition of dense_memories with
an HNSW and a GIN index from `rushmem dense-users`, which recall detects in the same statement
(migrations 0005 and 0013, rushmem.store.indexes.partitions)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pgvector.psycopg import register_vector

from rushmem.config import Settings
from rushmem.service import Memory
from rushmem.store.engine.pg import PgSession
from rushmem.store.engine.transactions import user_transaction
from rushmem.store.indexes.dense import dense_index_names, partition_name
from rushmem.store.memories import recall
from rushmem.store.memories.filters import dense_filters_sql, filter_params, filter_shape
from rushmem.store.memories.scope import Scope, scope_params
from rushmem.store.schema.migrate import FUNCTIONS_NAME, _apply, available_migrations
from rushmem_contract.models import ImportLine, MemoryFilters, NewMemory
from rushmem_tools.cli.main import main
from tests.support.db import round_trips

EARLIER = dt.datetime.now(dt.UTC) - dt.timedelta(days=3)


TEXT_LEG = "SELECT * FROM agent_memory_dense_text_leg('axolotl'::tsquery, 10, NULL, NULL, false, '[]'::jsonb)"


@pytest.fixture(autouse=True)
def _forget_dense_users() -> Iterator[None]:
    """What the process remembers about dense users must not leak from one database to the next."""
    recall.DENSE_USERS.clear()
    yield
    recall.DENSE_USERS.clear()


def remember(service: Memory, user: str, *texts: str) -> None:
    for start in range(0, len(texts), 100):
        service.add([NewMemory(content=t) for t in texts[start : start + 100]], user_id=user)


def owner_rows(database_url: str, query: str, *params: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(database_url) as conn:
        conn.execute("SET ROLE agent_memory_maintenance")
        return conn.execute(query, params).fetchall()


def dense_indexes(database_url: str) -> set[str]:
    """The HNSW and GIN indexes of dense users' partitions (and any partial index left on user_memories)."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE (tablename LIKE 'dense\\_memories\\_%' "
            "AND indexname NOT LIKE '%\\_pkey') OR indexname LIKE 'user_memories\\_dense\\_%'"
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
    with PgSession.connect(blank_database_url, autocommit=True) as conn:
        older = [m for m in available_migrations() if m.version != 5 and m.version < 13]
        _apply(conn, older, dimension=384, fingerprint=service.admin.embedder.fingerprint)
        conn.execute(
            "CREATE INDEX user_memories_embedding_idx ON user_memories USING hnsw (embedding vector_cosine_ops)"
        )
    try:
        later = [f"{m.version:04d}_{m.name}" for m in available_migrations() if m.version >= 13]
        assert service.admin.migrate().applied == ["0005_dense_users", *later, FUNCTIONS_NAME]
        assert later[0] == "0013_dense_partitions"
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
    busy.settings = busy.settings.model_copy(update={"dense_max_text_matches": 50})
    report = busy.admin.refresh_dense_users(min_memories=100)
    assert (report.indexed, report.done) == (1, True)
    assert dense_indexes(database_url) == set(dense_index_names("busy"))
    (common,) = owner_rows(database_url, "SELECT common_lexemes FROM agent_memory_dense_users WHERE user_id = 'busy'")
    assert {"user", "memo"} <= set(common[0]) and "axolotl" not in common[0]
    found = busy.recall("does the user have an axolotl?", user_id="busy", limit=3)
    assert found.memories[0].content == "the user keeps a pet axolotl called Quetzal"
    assert recall.DENSE_USERS.seen("busy")  # the next recall starts with the dense shape
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


def dense_text_leg(app_login_url: str, user: str, filters: MemoryFilters | None, rows: str | None = None) -> set[str]:
    """The contents the dense text leg finds for 'axolotl', called as the application calls it."""
    where = rows if rows is not None else dense_filters_sql(filter_shape(filters))
    with psycopg.connect(app_login_url) as conn:
        conn.execute("SELECT set_config('agent_memory.user_id', %s, false)", [user])
        found = conn.execute(
            f"SELECT m.content FROM agent_memory_dense_text_leg('axolotl'::tsquery, 10, NULL, NULL, false, {where}) l"
            " JOIN user_memories m USING (id)",
            filter_params(filters),
        ).fetchall()
    return {r[0] for r in found}


def test_the_dense_text_leg_applies_every_filter_row(busy: Memory, app_login_url: str) -> None:
    """Each row of the filter table reaches the dense text leg as data (migration 0014)."""
    busy.import_(
        [
            ImportLine(user_id="busy", content="an axolotl decision", category="decision", created_at=EARLIER,
                       metadata={"team": "web", "tags": ["pond"]}),
            ImportLine(user_id="busy", content="an axolotl for billing", metadata={"team": "billing"}),
        ]
    )  # fmt: skip
    busy.admin.refresh_dense_users(min_memories=100)
    pet = "the user keeps a pet axolotl called Quetzal"
    decision, billing = "an axolotl decision", "an axolotl for billing"
    day_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=1)
    every = MemoryFilters(categories=["fact", "decision"], metadata={"team": "billing"}, created_after=day_ago)
    cases: list[tuple[MemoryFilters | None, set[str]]] = [
        (None, {pet, decision, billing}),
        (MemoryFilters(categories=["decision"]), {decision}),
        (MemoryFilters(metadata={"tags": ["pond"]}), {decision}),
        (MemoryFilters(created_after=day_ago), {pet, billing}),
        (MemoryFilters(created_before=day_ago), {decision}),
        (every, {billing}),
    ]
    for filters, expected in cases:
        assert dense_text_leg(app_login_url, "busy", filters) == expected, filters


@pytest.mark.parametrize(
    "row",
    [
        {"condition": "true) OR (true", "type": "text", "value": "x"},  # not a comparison of one column
        {"condition": "category = {} OR true", "type": "text", "value": "x"},
        {"condition": "category = {}", "type": "text) OR (true", "value": "x"},  # not a type
        {"condition": "category = {}", "type": "no_such_type", "value": "x"},
    ],
)
def test_the_dense_text_leg_refuses_what_is_not_a_filter(busy: Memory, app_login_url: str, row: dict[str, str]) -> None:
    busy.admin.refresh_dense_users(min_memories=100)
    with pytest.raises(psycopg.errors.InvalidParameterValue):
        dense_text_leg(app_login_url, "busy", None, rows=f"'{json.dumps([row])}'::jsonb")


def test_the_dense_text_leg_sees_nothing_without_a_user_scope(busy: Memory, app_login_url: str) -> None:
    busy.admin.refresh_dense_users(min_memories=100)
    with psycopg.connect(app_login_url) as conn:
        rows = conn.execute(TEXT_LEG).fetchall()
        assert rows == []
        conn.execute("SELECT set_config('agent_memory.user_id', 'other', false)")
        assert conn.execute(TEXT_LEG).fetchall() == []  # never busy's memory
        conn.execute("SELECT set_config('agent_memory.user_id', 'busy', false)")
        assert len(conn.execute(TEXT_LEG).fetchall()) == 1


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
    assert not recall.DENSE_USERS.seen("busy")


def test_an_erased_dense_user_leaves_no_registry_row_and_the_next_run_drops_their_indexes(
    busy: Memory, database_url: str
) -> None:
    busy.admin.refresh_dense_users(min_memories=100)
    busy.forget_user("busy")
    assert owner_rows(database_url, "SELECT user_id FROM agent_memory_dense_users") == []
    with psycopg.connect(database_url) as conn:  # nothing of theirs is left in the copy either
        assert conn.execute("SELECT count(*) FROM dense_memories WHERE user_id = 'busy'").fetchone() == (0,)
    assert busy.admin.refresh_dense_users(min_memories=100).orphans_dropped == 1
    assert dense_indexes(database_url) == set()


def test_an_interrupted_build_is_finished_by_the_next_run(busy: Memory, database_url: str) -> None:
    busy.admin.refresh_dense_users(min_memories=100)
    vec, tsv = dense_index_names("busy")
    with psycopg.connect(database_url, autocommit=True) as conn:
        # What an interrupted CREATE INDEX CONCURRENTLY leaves: an invalid index; an interrupted
        # fill: a listed user who is not ready, with rows missing from the copy.
        conn.execute(f"UPDATE pg_index SET indisvalid = false WHERE indexrelid = '{tsv}'::regclass")
        conn.execute(f"DROP INDEX {vec}")
        conn.execute("UPDATE agent_memory_dense_users SET ready = false")
        conn.execute(
            "DELETE FROM dense_memories WHERE user_id = 'busy' AND id IN "
            "(SELECT id FROM user_memories WHERE content LIKE '%axolotl%')"
        )
    # Not ready: searched exactly, and still right.
    assert busy.recall("axolotl", user_id="busy", limit=3).memories[0].content == (
        "the user keeps a pet axolotl called Quetzal"
    )
    report = busy.admin.refresh_dense_users(min_memories=100)
    assert (report.rebuilt, report.indexed) == (1, 0)
    with psycopg.connect(database_url) as conn:
        valid = conn.execute(
            "SELECT indisvalid FROM pg_index WHERE indexrelid = ANY(ARRAY[%s::regclass, %s::regclass])", [vec, tsv]
        ).fetchall()
        copied = conn.execute("SELECT count(*) FROM dense_memories WHERE user_id = 'busy'").fetchone()
    assert valid == [(True,), (True,)]
    assert copied == (121,)
    assert owner_rows(database_url, "SELECT ready FROM agent_memory_dense_users") == [(True,)]


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


def crowd(service: Memory, database_url: str, *, dense: int, ordinary: int, each: int = 12) -> None:
    """``dense`` users with ``each`` + 1 memories (dense at a threshold of ``each`` + 1) and
    ``ordinary`` users with ``each``; user d<i> and o<i>, their memories name them."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO user_memories (user_id, content, content_hash, embedding) "
            "SELECT u, 'memory ' || n || ' of ' || u, sha256(convert_to(u || n, 'UTF8')), "
            "(SELECT array_agg(sin(n * 7 + g + length(u)))::vector(384) FROM generate_series(1, 384) g) "
            "FROM (SELECT 'd' || i AS u, %(each)s + 1 AS k FROM generate_series(1, %(dense)s) i "
            "      UNION ALL SELECT 'o' || i, %(each)s FROM generate_series(1, %(ordinary)s) i) users, "
            "LATERAL generate_series(1, k) n",
            {"dense": dense, "ordinary": ordinary, "each": each},
        )
    assert service.admin.refresh_dense_users(min_memories=each + 1).indexed == dense


def locks_of_a_recall(service: Memory, user: str) -> int:
    """Relation locks one recall statement of ``user`` takes (held until its transaction ends)."""
    conn = service.admin.db.connection()
    scope = Scope(user)
    vector = service.admin.embedder.embed_query("memory")
    params = {**scope_params(scope), "query_vector": vector, "k": 10, "text_query": "memory"}
    dense = (
        owner_rows(
            service.settings.database_url.get_secret_value(),  # type: ignore[union-attr]
            "SELECT count(*) FROM agent_memory_dense_users WHERE user_id = %s AND ready",
            user,
        )[0][0]
        > 0
    )
    query = recall.hybrid_sql(recall.HybridShape(scope.shape(), "embedding", dense=bool(dense)))
    with conn.transaction():
        conn.execute("SELECT set_config('agent_memory.user_id', %s, true)", [user])
        conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
        conn.execute(query, params).fetchall()
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'relation'"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_what_a_recall_or_a_write_locks_does_not_grow_with_the_dense_users(service: Memory, database_url: str) -> None:
    """0005's partial indexes made every statement plan and lock every dense user's indexes; a dense
    user's partition is pruned away from anyone else's statements (migration 0013)."""
    crowd(service, database_url, dense=2, ordinary=3)
    few = (locks_of_a_recall(service, "o1"), locks_of_a_recall(service, "d1"))
    for batch in range(3):
        with psycopg.connect(database_url, autocommit=True) as owner:
            owner.execute(
                "INSERT INTO user_memories (user_id, content, content_hash, embedding) "
                "SELECT 'e' || %(b)s || '-' || i, 'extra ' || n, sha256(convert_to(i || '-' || n || %(b)s, 'UTF8')), "
                "(SELECT array_agg(cos(n + g + i))::vector(384) FROM generate_series(1, 384) g) "
                "FROM generate_series(1, 10) i, generate_series(1, 13) n",
                {"b": batch},
            )
    assert service.admin.refresh_dense_users(min_memories=13).indexed == 30
    assert (locks_of_a_recall(service, "o1"), locks_of_a_recall(service, "d1")) == few
    # A write of an ordinary user locks what it locked before too.
    conn = service.admin.db.connection()
    with user_transaction(conn, "o2", lock=True):
        service_rows = conn.execute(
            "INSERT INTO user_memories (user_id, content, content_hash, embedding) "
            "SELECT 'o2', 'a new one', sha256('a new one'::bytea), embedding FROM user_memories WHERE user_id = 'o2' "
            "LIMIT 1 RETURNING id"
        ).fetchall()
        locks = conn.execute(
            "SELECT c.relname FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            "WHERE l.pid = pg_backend_pid() AND starts_with(c.relname, 'dense_memories_')"
        ).fetchall()
    assert len(service_rows) == 1 and locks == []


def test_every_user_gets_min_limit_and_their_memories_among_many_dense_users(
    service: Memory, database_url: str
) -> None:
    crowd(service, database_url, dense=20, ordinary=5)
    for user, n in (("d3", 13), ("o4", 12)):
        for limit in (5, 12, 13, 40):
            found = service.recall("memory of", user_id=user, limit=limit).memories
            assert len(found) == min(limit, n)
            assert all(m.content.endswith(f" of {user}") for m in found)


def test_a_dense_users_writes_edits_and_deletes_reach_recall_at_once(busy: Memory, database_url: str) -> None:
    busy.admin.refresh_dense_users(min_memories=100)
    busy.recall("axolotl", user_id="busy")  # the process now knows busy is dense
    written = busy.add([NewMemory(content="the user adopted a capybara named Bruno")], user_id="busy")
    memory_id = written.ids[0]
    found = busy.recall("capybara Bruno", user_id="busy", limit=3).memories
    assert found[0].content == "the user adopted a capybara named Bruno"
    busy.delete(memory_id, user_id="busy")
    assert all("capybara" not in m.content for m in busy.recall("capybara Bruno", user_id="busy", limit=5).memories)
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM dense_memories WHERE id = %s", [memory_id]).fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM dense_memories").fetchone() == (121,)
    # Another user's memories never come back from busy's partition, nor busy's from theirs.
    assert all(
        m.content != "the other user also keeps an axolotl"
        for m in busy.recall("axolotl", user_id="busy", limit=50).memories
    )
    assert [m.content for m in busy.recall("axolotl", user_id="other", limit=50).memories] == [
        "the other user also keeps an axolotl"
    ]


def test_the_copy_is_out_of_reach_of_another_user(busy: Memory, app_login_url: str) -> None:
    busy.admin.refresh_dense_users(min_memories=100)
    with psycopg.connect(app_login_url) as conn:
        assert conn.execute("SELECT count(*) FROM dense_memories").fetchone() == (0,)
        conn.execute("SELECT set_config('agent_memory.user_id', 'other', false)")
        assert conn.execute("SELECT count(*) FROM dense_memories").fetchone() == (0,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"SELECT count(*) FROM {partition_name('busy')}")


def test_a_store_with_0005s_partial_indexes_moves_to_partitions(blank_database_url: str) -> None:
    """A running stack migrated to 0010 with a dense user: 0013 unlists them (exact search, still
    right), and the next dense-users run builds their partition and drops the partial indexes."""
    settings = Settings(database_url=blank_database_url, embedding_provider="hash", auto_migrate=False)
    service = Memory(settings)
    with PgSession.connect(blank_database_url, autocommit=True) as conn:
        older = [m for m in available_migrations() if m.version < 13]
        _apply(conn, older, dimension=384, fingerprint=service.admin.embedder.fingerprint)
    texts = [*(f"the user wrote memo number {i}" for i in range(30)), "the user keeps a pet axolotl called Quetzal"]
    vectors = service.admin.embedder.embed(texts)
    try:
        with psycopg.connect(blank_database_url, autocommit=True) as conn:
            register_vector(conn)
            for text, vector in zip(texts, vectors, strict=True):  # written by the code before 0013
                conn.execute(
                    "INSERT INTO user_memories (user_id, content, content_hash, embedding) "
                    "VALUES ('busy', %s, sha256(convert_to(%s, 'UTF8')), %s)",
                    [text, text, vector],
                )
            old = "user_memories_dense_0123456789abcdef0123"
            conn.execute(
                f"CREATE INDEX {old}_vec ON user_memories USING hnsw (embedding vector_cosine_ops) "
                "WHERE user_id = 'busy'"
            )
            conn.execute("SET ROLE agent_memory_maintenance")
            conn.execute("INSERT INTO agent_memory_dense_users (user_id, memories) VALUES ('busy', 31)")
        later = [f"{m.version:04d}_{m.name}" for m in available_migrations() if m.version >= 13]
        assert service.admin.migrate().applied == [*later, FUNCTIONS_NAME] and later[0] == "0013_dense_partitions"
        assert owner_rows(blank_database_url, "SELECT user_id FROM agent_memory_dense_users") == []
        assert len(service.recall("axolotl", user_id="busy", limit=40).memories) == 31
        assert service.admin.refresh_dense_users(min_memories=20).indexed == 1
        assert dense_indexes(blank_database_url) == set(dense_index_names("busy"))
        found = service.recall("axolotl", user_id="busy", limit=40).memories
        assert len(found) == 31 and found[0].content == "the user keeps a pet axolotl called Quetzal"
    finally:
        service.close()


def test_a_partition_left_while_its_user_was_unlisted_is_built_anew(busy: Memory, database_url: str) -> None:
    """What a re-embedding's switch leaves: every user unlisted, the partitions holding the previous
    model's vectors, which the triggers no longer follow."""
    busy.admin.refresh_dense_users(min_memories=100)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("DELETE FROM agent_memory_dense_users")
        conn.execute(
            "UPDATE user_memories SET embedding = "
            "(SELECT array_agg(cos(g))::vector(384) FROM generate_series(1, 384) g) WHERE user_id = 'busy'"
        )
    report = busy.admin.refresh_dense_users(min_memories=100)
    assert (report.indexed, report.orphans_dropped) == (1, 1)
    with psycopg.connect(database_url) as conn:
        stale = conn.execute(
            "SELECT count(*) FROM dense_memories d JOIN user_memories m USING (user_id, id) "
            "WHERE d.embedding IS DISTINCT FROM m.embedding"
        ).fetchone()
        copied = conn.execute("SELECT count(*) FROM dense_memories").fetchone()
    assert (stale, copied) == ((0,), (121,))


def test_a_row_whose_memory_is_gone_leaves_the_copy_on_the_next_run(busy: Memory, database_url: str) -> None:
    """A delete that committed while its user was being listed saw no listing: the copy keeps the
    memory's words until the next run removes them."""
    busy.admin.refresh_dense_users(min_memories=100)
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE user_memories DISABLE TRIGGER user_memories_dense_delete")
        conn.execute("DELETE FROM user_memories WHERE user_id = 'busy' AND content LIKE '%axolotl%'")
        conn.execute("ALTER TABLE user_memories ENABLE TRIGGER user_memories_dense_delete")
        assert conn.execute("SELECT count(*) FROM dense_memories").fetchone() == (121,)
    busy.admin.refresh_dense_users(min_memories=100)
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM dense_memories").fetchone() == (120,)
        assert conn.execute(
            "SELECT count(*) FROM dense_memories WHERE content_tsv @@ to_tsquery('english', 'axolotl')"
        ).fetchone() == (0,)


def test_a_dense_user_recalls_what_was_true_then_and_what_is_true_now(busy: Memory) -> None:
    """``as_of`` and ``now`` read the validity a dense user's partition does not copy: such a recall
    goes to user_memories, and a dense user gets the version valid at that time, as anyone does."""
    march = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    june = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
    busy.add([NewMemory(content="The user's axolotl is 3 years old", valid_from=march)], user_id="busy")
    busy.add([NewMemory(content="The user's axolotl is 4 years old", valid_from=june)], user_id="busy")
    assert busy.admin.refresh_dense_users(min_memories=100).indexed == 1
    busy.recall("axolotl", user_id="busy")  # the process now takes 'busy' for dense
    assert recall.DENSE_USERS.seen("busy")

    def ages(as_of: dt.datetime | None = None, now: dt.datetime | None = None) -> list[str]:
        found = busy.recall("how old is the axolotl?", user_id="busy", limit=10, as_of=as_of, now=now).memories
        return [m.content for m in found if "years old" in m.content]

    assert ages() == ["The user's axolotl is 4 years old"]
    assert ages(as_of=march + dt.timedelta(days=30)) == ["The user's axolotl is 3 years old"]
    # ``now``: as if asked at that moment (memories stated by then, valid then).
    assert ages(now=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)) == ["The user's axolotl is 4 years old"]

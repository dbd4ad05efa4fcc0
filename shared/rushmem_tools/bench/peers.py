"""`rushmem bench peers`: mem0 (open source, the ``peers`` extra) beside ours, on the same
PostgreSQL server, with the same vectors and the same data.

Two parts (either can be skipped):

- quality: the split's memories go into ours by import (as `bench quality` does) and into mem0 by
  ``Memory.add(messages, user_id=..., metadata=..., infer=False)``, which stores each fact as given
  (no LLM); every question is answered by ours (default ranking, and vector only) and by mem0's
  ``Memory.search``, and scored recall@k by the rules of ``locomo_score.py``.
- latency: the synthetic corpus of `bench latency` (hash vectors) loaded into both (ours by COPY;
  mem0 by its own ``PGVector.insert`` in batches, indexes built after, or with ``--mem0-load add``
  by ``Memory.add`` one memory at a time), then the same queries timed through
  ours (``rushmem.Memory.recall``) and mem0's ``Memory.search``, the query embedding excluded from both, with the
  number of memories each returns.

mem0 gets our embedder's vectors through its embedder slot (:class:`VectorTable`), so the two
sides rank identical vectors and only retrieval differs; it stores them in its pgvector store, in
a database of its own on the same server. Nothing leaves the machine: mem0's telemetry is turned
off before it is imported, its spaCy model download is blocked, and no LLM is ever called.

mem0 is imported only inside this command (``pip install 'rushmem[peers]'``). One module
for one comparison: each side's load, search and report sit next to the other's.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import functools
import hashlib
import itertools
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import psycopg

from rushmem.config import Settings
from rushmem.embeddings.base import Embedder
from rushmem.recall.plan import RecallPlan
from rushmem.service import Memory
from rushmem_contract.errors import ConfigurationError
from rushmem_contract.models import ImportLine
from rushmem_tools.bench import scoring
from rushmem_tools.bench.common import (
    ScratchServer,
    Stopwatch,
    add_database_arguments,
    load_average,
    open_service,
    owner_database,
    print_table,
    say,
)
from rushmem_tools.bench.latency import WARM_UP, load_corpus
from rushmem_tools.bench.quality import IMPORT_CHUNK, QualityQuery, default_bench_file, read_lines, variants
from rushmem_tools.bench.synthetic import SyntheticCorpus, memory_rows

# The release this command was written against and its mode description checked on.
MEM0_TESTED = "2.2.1"
MEM0_COLLECTION = "mem0"
MEM0_INSERT_CHUNK = 2_000
# mem0's Memory.search asks its vector store for max(4 x top_k, 60) candidates (mem0/memory/main.py).
MEM0_OVERFETCH = (4, 60)


# --------------------------------------------------------------------------------------
# mem0, offline
# --------------------------------------------------------------------------------------


@dataclasses.dataclass
class Mem0Mode:
    """How mem0 ran, as far as it decides what it returns."""

    version: str
    spacy: str
    keyword_leg: str
    entity_boost: str
    ef_search: str = "?"
    iterative_scan: str = "?"
    plans: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def spacy_installed(self) -> bool:
        return not self.spacy.startswith("not installed")


def import_mem0() -> tuple[Any, Mem0Mode]:
    """mem0's ``Memory`` class and the mode it will run in, with nothing able to leave the machine.

    Its telemetry (PostHog events and a remote notice config) is read from MEM0_TELEMETRY when
    mem0 is first imported, so the variable is set before; its state files go to a temporary
    MEM0_DIR unless one is set. spaCy, when installed without its model, would make mem0 download
    en_core_web_sm on first use: that is blocked, and the keyword leg then works on raw text.
    """
    os.environ["MEM0_TELEMETRY"] = "false"
    os.environ.setdefault("MEM0_DIR", str(Path(tempfile.gettempdir()) / "agent-memory-bench-mem0"))
    try:
        import mem0
        from mem0 import Memory
        from mem0.memory import telemetry
        from mem0.utils import spacy_models
    except ImportError as exc:
        raise ConfigurationError(
            f"bench peers needs mem0: pip install 'rushmem[peers]' (mem0ai {MEM0_TESTED}); {exc}"
        ) from exc
    if telemetry.MEM0_TELEMETRY:
        raise ConfigurationError("mem0 was imported with its telemetry on; run bench peers in a fresh process")

    spacy_state = _spacy_state(spacy_models)
    if spacy_state.endswith("with en_core_web_sm"):
        keyword = "lemmatized by spaCy (stop words and punctuation dropped)"
        entity = "on: spaCy extracts the query's entities; only memories linked to an entity are boosted"
    else:
        keyword = (
            "spaCy unavailable: lemmatize_for_bm25 returns the text unchanged, so the leg matches "
            "plainto_tsquery('simple', question) (every word ANDed, stop words included) on raw text"
        )
        entity = "off: extract_entities returns no entity without spaCy"
    entity += "; add(infer=False) links no entities either, so no memory can be boosted"
    return Memory, Mem0Mode(str(getattr(mem0, "__version__", "?")), spacy_state, keyword, entity)


def _spacy_state(spacy_models: Any) -> str:
    import importlib.util

    if importlib.util.find_spec("spacy") is None:
        return "not installed"
    import spacy

    if spacy.util.is_package("en_core_web_sm"):
        return f"spaCy {spacy.__version__} with en_core_web_sm"
    # mem0 would run `spacy download en_core_web_sm` on first use: no network in a benchmark.
    spacy_models._load_failed_full = True
    spacy_models._load_failed_lemma = True
    return f"spaCy {spacy.__version__} installed without en_core_web_sm (mem0's download of it blocked)"


class VectorTable:
    """mem0's embedder slot filled with our embedder's vectors: known texts are looked up (so a
    timed search does not embed), others are embedded by ours on demand."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.vectors: dict[str, np.ndarray] = {}
        self.config = None

    def add(self, texts: Sequence[str], vectors: np.ndarray | None = None) -> None:
        todo = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if vectors is None:
            vectors = self.embedder.embed(todo) if todo else np.zeros((0, self.embedder.dimension))
            texts = todo
        self.vectors.update(zip(texts, vectors, strict=True))

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        if text not in self.vectors:
            self.add([text])
        return [float(x) for x in self.vectors[text]]

    def embed_batch(self, texts: Sequence[str], memory_action: str = "add") -> list[list[float]]:
        return [self.embed(t, memory_action) for t in texts]


@dataclasses.dataclass
class LegCounts:
    """What mem0's two vector-store legs returned, query by query."""

    semantic: list[int] = dataclasses.field(default_factory=list)
    keyword: list[int] = dataclasses.field(default_factory=list)
    boosted: list[int] = dataclasses.field(default_factory=list)
    # mem0's keyword_search returns None when its statement fails (logged at debug only): counted
    # apart, or a broken leg would read as a leg that found nothing.
    keyword_failed: int = 0

    def clear(self) -> None:
        self.semantic.clear()
        self.keyword.clear()
        self.boosted.clear()
        self.keyword_failed = 0

    def short(self, returned: Sequence[int], k: int) -> tuple[int, int]:
        """Searches that returned fewer than k: (those whose semantic leg already had fewer than k
        rows, those cut below k by the threshold). ``returned`` aligns with the searches counted."""
        scan = sum(r < k and s < k for s, r in zip(self.semantic, returned, strict=True))
        return scan, sum(r < k for r in returned) - scan


class Peer(Protocol):
    """What the bench asks of a peer: :class:`Mem0Peer`, or a stand-in in the tests (which run
    without mem0)."""

    table: VectorTable
    counts: LegCounts

    def add(self, user_id: str, content: str, metadata: dict[str, Any]) -> None: ...

    def search(self, user_id: str, query: str, *, limit: int, threshold: float) -> list[dict[str, Any]]: ...

    def bulk_insert(self, rows: Iterator[tuple[str, str, np.ndarray, dt.datetime | None]]) -> int: ...

    def analyze(self) -> None: ...

    def row_count(self) -> int: ...

    def semantic_plan(self, vector: np.ndarray, user_id: str, limit: int) -> str: ...

    def session_settings(self) -> tuple[str, str]: ...

    def close(self) -> None: ...


# A peer on a database: (database URL, the vectors, a scratch folder) -> peer.
PeerFactory = Callable[[str, VectorTable, Path], Peer]


class Mem0Peer:
    """A mem0 ``Memory`` on its own database: pgvector store, our vectors, an LLM it never calls."""

    def __init__(self, memory_class: Any, database_url: str, table: VectorTable, work_dir: Path) -> None:
        self.database_url = database_url
        config = {
            "vector_store": {
                "provider": "pgvector",
                "config": {
                    "connection_string": database_url,
                    "collection_name": MEM0_COLLECTION,
                    "embedding_model_dims": table.embedder.dimension,
                },
            },
            # Built, then replaced by `table` below; a client object only, nothing is sent.
            "embedder": {
                "provider": "openai",
                "config": {"api_key": "unused", "embedding_dims": table.embedder.dimension},
            },
            # add(infer=False) and search never call the LLM; mem0 builds one anyway.
            "llm": {"provider": "openai", "config": {"api_key": "unused"}},
            "history_db_path": str(work_dir / "history.db"),
        }
        self.memory = memory_class.from_config(config)
        self.memory.embedding_model = table
        self.table = table
        self.counts = LegCounts()
        self._count_legs()

    def _count_legs(self) -> None:
        """Record how many rows each leg of every search returns (instance attributes shadow the
        methods; the counting costs microseconds, outside the database)."""
        store, counts = self.memory.vector_store, self.counts
        semantic, keyword = store.search, store.keyword_search
        boosts = self.memory._compute_entity_boosts

        def counted_search(*args: Any, **kwargs: Any) -> Any:
            rows = semantic(*args, **kwargs)
            counts.semantic.append(len(rows))
            return rows

        def counted_keyword(*args: Any, **kwargs: Any) -> Any:
            rows = keyword(*args, **kwargs)
            counts.keyword.append(len(rows or []))
            counts.keyword_failed += rows is None
            return rows

        def counted_boosts(*args: Any, **kwargs: Any) -> Any:
            found = boosts(*args, **kwargs)
            counts.boosted.append(len(found))
            return found

        store.search, store.keyword_search = counted_search, counted_keyword
        self.memory._compute_entity_boosts = counted_boosts

    def add(self, user_id: str, content: str, metadata: dict[str, Any]) -> None:
        self.memory.add([{"role": "user", "content": content}], user_id=user_id, metadata=metadata, infer=False)

    def search(self, user_id: str, query: str, *, limit: int, threshold: float) -> list[dict[str, Any]]:
        found = self.memory.search(query, top_k=limit, filters={"user_id": user_id}, threshold=threshold)
        return list(found["results"])

    def bulk_insert(self, rows: Iterator[tuple[str, str, np.ndarray, dt.datetime | None]]) -> int:
        """Rows (user, content, vector, created_at) through mem0's own ``PGVector.insert``, with the
        payload its ``add(infer=False)`` writes; the search indexes are dropped before and rebuilt
        after by its own ``create_col`` (the same order as our bulk load)."""
        from mem0.utils.lemmatization import lemmatize_for_bm25

        store = self.memory.vector_store
        store.create_col()
        with store._get_cursor(commit=True) as cur:
            for suffix in ("hnsw_idx", "text_lemmatized_idx"):
                cur.execute(f'DROP INDEX IF EXISTS "{MEM0_COLLECTION}_{suffix}"')
        loaded = 0
        while chunk := list(itertools.islice(rows, MEM0_INSERT_CHUNK)):
            payloads = []
            for user, content, _vector, created in chunk:
                stamp = (created or dt.datetime.now(dt.UTC)).isoformat()
                payloads.append(
                    {
                        "user_id": user,
                        "role": "user",
                        "data": content,
                        "hash": hashlib.md5(content.encode()).hexdigest(),  # noqa: S324 - mem0's dedup key, not security
                        "created_at": stamp,
                        "updated_at": stamp,
                        "text_lemmatized": lemmatize_for_bm25(content),
                    }
                )
            store.insert(
                vectors=[[float(x) for x in row[2]] for row in chunk],
                payloads=payloads,
                ids=[str(uuid.uuid4()) for _ in chunk],
            )
            loaded += len(chunk)
            if loaded % 20_000 < MEM0_INSERT_CHUNK or loaded < MEM0_INSERT_CHUNK * 2:
                say(f"  mem0: inserted {loaded}")
        store.create_col()
        return loaded

    def analyze(self) -> None:
        """Planner statistics as autovacuum would have them after a load (the plan depends on them)."""
        with self.memory.vector_store._get_cursor(commit=True) as cur:
            cur.execute(f'ANALYZE "{MEM0_COLLECTION}"')

    def row_count(self) -> int:
        return _count_rows(self.database_url, MEM0_COLLECTION)

    def semantic_plan(self, vector: np.ndarray, user_id: str, limit: int) -> str:
        return semantic_plan(self.database_url, vector, user_id, limit)

    def session_settings(self) -> tuple[str, str]:
        """hnsw.ef_search and hnsw.iterative_scan in mem0's own connections (it sets neither)."""
        with self.memory.vector_store._get_cursor() as cur:
            cur.execute("SELECT '[1]'::vector")  # loads pgvector in this session, and with it its settings
            cur.execute("SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')")
            row = cur.fetchone()
        return str(row[0]), str(row[1])

    def close(self) -> None:
        for store in (self.memory.vector_store, self.memory._entity_store):
            if store is not None:
                with contextlib.suppress(Exception):
                    store.connection_pool.close()
        with contextlib.suppress(Exception):
            self.memory.db.close()


def semantic_plan(database_url: str, vector: np.ndarray, user_id: str, limit: int) -> str:
    """The plan of mem0's semantic statement (its shape in mem0/vector_stores/pgvector.py) for one
    query: the scan that serves it and where the user filter is applied."""
    statement = (
        f'SELECT id, vector <=> %s::vector AS distance, payload FROM "{MEM0_COLLECTION}"'
        " WHERE payload->>%s = %s ORDER BY distance LIMIT %s"
    )
    with psycopg.connect(database_url) as conn:
        lines = [
            str(row[0]).strip().removeprefix("-> ")
            for row in conn.execute(f"EXPLAIN {statement}", [vector.tolist(), "user_id", user_id, limit])
        ]
    wanted = [line.strip() for line in lines if "Scan" in line or line.startswith("Filter")]
    return "; ".join(line.split("  (cost")[0] for line in wanted)


def _mem0_limit(k: int) -> int:
    return max(k * MEM0_OVERFETCH[0], MEM0_OVERFETCH[1])


# --------------------------------------------------------------------------------------
# the two parts
# --------------------------------------------------------------------------------------


@dataclasses.dataclass
class QualityPart:
    split: Path
    queries: int
    ours_rows: int
    mem0_rows: int
    reports: dict[str, scoring.Report]
    returned: dict[str, list[int]]
    mem0_counts: LegCounts
    ours_load_s: float
    mem0_load_s: float
    texts: list[str]
    plan: str = ""
    settings: tuple[str, str] = ("?", "?")
    load_before: str = ""
    load_after: str = ""


@dataclasses.dataclass
class LatencyPart:
    memories: int
    users: int
    ours: Stopwatch
    mem0: Stopwatch
    ours_returned: list[int]
    mem0_returned: list[int]
    mem0_counts: LegCounts
    ours_load_s: float
    mem0_load_s: float
    load_before: str = ""
    load_after: str = ""
    plan: str = ""
    settings: tuple[str, str] = ("?", "?")
    mem0_load: str = "insert"


def ours_variants(plan: RecallPlan) -> dict[str, RecallPlan]:
    """Our two rows, taken from `bench quality`'s variants so that they stay its rows: its
    "vector only" turns every other leg off, which a copy here once missed when legs were added."""
    wanted = {"ours (default)": "ours (default)", "vector only": "ours, vector only"}
    found = {wanted[v.name]: v.plan for v in variants(plan) if v.name in wanted and v.plan is not None}
    return {name: found[name] for name in wanted.values()}


def quality_part(
    server: ScratchServer, base: Settings, make_peer: PeerFactory, work_dir: Path, args: argparse.Namespace
) -> QualityPart:
    split = Path(args.split_dir).expanduser() if args.split_dir else default_bench_file("locomo-dev")
    lines: list[ImportLine] = read_lines(split / "memories.jsonl", ImportLine, "split_dir")
    queries: list[QualityQuery] = read_lines(split / "queries.jsonl", QualityQuery, "split_dir")
    judged = [scoring.Judged(q.user_id, q.evidence, q.category) for q in queries]
    k = args.k

    ours_url, mem0_url = server.new_database("peers_ours"), server.new_database("peers_mem0")
    bench = open_service(base, ours_url, provider=args.embedder)
    peer: Peer | None = None
    try:
        say(f"quality: importing {len(lines)} memories from {split} into ours ({bench.admin.embedder.fingerprint})")
        started = time.perf_counter()
        for start in range(0, len(lines), IMPORT_CHUNK):
            bench.import_(lines[start : start + IMPORT_CHUNK], source="bench")
        ours_load_s = time.perf_counter() - started

        table = VectorTable(bench.admin.embedder)
        table.add([line.content for line in lines])
        texts = [q.query.strip() for q in queries]
        table.add([t for t in texts if t])
        peer = make_peer(mem0_url, table, work_dir)
        say(f"quality: adding them to mem0 one by one (add, infer=False); {load_average()}")
        started = time.perf_counter()
        for line in lines:
            peer.add(line.user_id, line.content, dict(line.metadata))
        mem0_load_s = time.perf_counter() - started

        # Planner statistics as autovacuum would have them in a steady state: without them the
        # planner's choice between mem0's HNSW index and a sequential scan changed within a run.
        for url in (ours_url, mem0_url):
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("ANALYZE")

        first = next(((q.user_id, t) for q, t in zip(queries, texts, strict=True) if t), None)
        plan = peer.semantic_plan(table.vectors[first[1]], first[0], _mem0_limit(k)) if first else ""

        ours = ours_variants(bench.admin.recall_plan)
        results: dict[str, list[list[dict[str, Any]]]] = {name: [] for name in [*ours, "mem0"]}
        say(f"quality: {len(queries)} questions to each")
        load_before = load_average()
        peer.counts.clear()
        for query, text in zip(queries, texts, strict=True):
            for name, chosen in ours.items():
                if not text:
                    results[name].append([])
                    continue
                vector = table.vectors[text]
                found = bench.recall(
                    query.query, user_id=query.user_id, limit=k, now=query.now, plan=chosen, query_vector=vector
                )
                results[name].append([{"content": m.content, "metadata": m.metadata} for m in found.memories])
            results["mem0"].append(
                peer.search(query.user_id, text, limit=k, threshold=args.mem0_threshold) if text else []
            )
        load_after = load_average()
        ours_rows, mem0_rows = _count_rows(ours_url, "user_memories"), peer.row_count()
        part = QualityPart(
            split=split,
            queries=len(queries),
            ours_rows=ours_rows,
            mem0_rows=mem0_rows,
            reports={name: scoring.score(judged, found, k=k) for name, found in results.items()},
            returned={name: [len(r) for r in found] for name, found in results.items()},
            mem0_counts=peer.counts,
            ours_load_s=ours_load_s,
            mem0_load_s=mem0_load_s,
            texts=texts,
        )
        part.plan = plan
        part.settings = peer.session_settings()
        part.load_before, part.load_after = load_before, load_after
        return part
    finally:
        bench.close()
        if peer is not None:
            peer.close()
        server.drop_database(ours_url)
        server.drop_database(mem0_url)


def latency_part(
    server: ScratchServer, base: Settings, make_peer: PeerFactory, work_dir: Path, args: argparse.Namespace
) -> LatencyPart:
    corpus = SyntheticCorpus(args.memories, args.users)
    ours_url, mem0_url = server.new_database("peers_ours"), server.new_database("peers_mem0")
    bench = open_service(base, ours_url, provider="hash", dimension=384)
    owner = owner_database(bench)
    peer: Peer | None = None
    try:
        say(f"latency: {corpus.memories} memories over {corpus.users} users into ours (COPY, indexes after)")
        ours_load_s = sum(load_corpus(owner, bench.admin.embedder, corpus, vectors="hash"))
        megabytes = min(8192, max(256, corpus.memories * (384 * 4 + 1000) * 3 // 2 // 2**20))
        # The same room for mem0's index build as ours had (its create_col cannot be given it).
        name = psycopg.conninfo.conninfo_to_dict(mem0_url)["dbname"]
        with psycopg.connect(server.admin_url, autocommit=True) as conn:
            conn.execute(f"ALTER DATABASE \"{name}\" SET maintenance_work_mem = '{megabytes}MB'")
        peer = mem0 = make_peer(mem0_url, VectorTable(bench.admin.embedder), work_dir)
        rows = (
            (r.user_id, r.content, r.embedding, r.created_at) for r in memory_rows(corpus.facts(), bench.admin.embedder)
        )
        started = time.perf_counter()
        if args.mem0_load == "add":
            say("latency: the same memories and vectors into mem0 (Memory.add, infer=False, one at a time)")
            _add_one_by_one(mem0, rows, corpus.memories)
        else:
            say("latency: the same memories and vectors into mem0 (its PGVector.insert, indexes after)")
            mem0.bulk_insert(rows)
        mem0.analyze()
        mem0_load_s = time.perf_counter() - started

        asked = corpus.queries(args.queries)
        vectors = bench.admin.embedder.embed([text for _user, text in asked])
        peer.table.add([text for _user, text in asked], vectors)
        limit = args.k
        result = LatencyPart(
            corpus.memories, corpus.users, Stopwatch(), Stopwatch(), [], [], peer.counts, ours_load_s, mem0_load_s
        )
        pairs = list(zip(asked, vectors, strict=True))
        (user, _text), vector = pairs[0]
        result.mem0_load = args.mem0_load
        result.plan = mem0.semantic_plan(vector, user, _mem0_limit(limit))
        result.load_before = load_average()

        # The count measures the search (mem0's filtered HNSW loses rows), so our relevance cut is off.
        filling = bench.admin.recall_plan.but(min_relative_score=0.0)

        def ours(user: str, text: str, vector: np.ndarray) -> int:
            return len(bench.recall(text, user_id=user, limit=limit, query_vector=vector, plan=filling).memories)

        def theirs(user: str, text: str, _vector: np.ndarray) -> int:
            return len(mem0.search(user, text, limit=limit, threshold=args.mem0_threshold))

        # One after the other, as `bench latency` does, each after a few untimed runs.
        _time(ours, pairs, result.ours, result.ours_returned)
        say(f"  ours: p50 {result.ours.p50:.2f} ms, p95 {result.ours.p95:.2f} ms")
        _time(theirs, pairs, result.mem0, result.mem0_returned, before=peer.counts.clear)
        say(f"  mem0: p50 {result.mem0.p50:.2f} ms, p95 {result.mem0.p95:.2f} ms")
        result.load_after = load_average()
        result.settings = peer.session_settings()
        return result
    finally:
        bench.close()
        owner.close()
        if peer is not None:
            peer.close()
        server.drop_database(ours_url)
        server.drop_database(mem0_url)


def _add_one_by_one(peer: Peer, rows: Iterator[tuple[str, str, np.ndarray, dt.datetime | None]], total: int) -> None:
    """mem0's own write path for every memory: its HNSW and GIN indexes maintained row by row,
    and its SQLite history written, as an application using mem0 would load them."""
    for done, (user, content, vector, _created) in enumerate(rows, 1):
        # The vector first, so mem0's embed() is a lookup (ours computed it, as for the bulk path).
        peer.table.add([content], vector[np.newaxis, :])
        peer.add(user, content, {})
        if done % 10_000 == 0:
            say(f"  mem0: added {done}/{total}; {load_average()}")


def _time(
    search: Callable[[str, str, np.ndarray], int],
    pairs: Sequence[tuple[tuple[str, str], np.ndarray]],
    watch: Stopwatch,
    returned: list[int],
    before: Callable[[], None] | None = None,
) -> None:
    for (user, text), vector in pairs[:WARM_UP]:
        search(user, text, vector)
    if before is not None:
        before()
    for (user, text), vector in pairs:
        with watch.time():
            count = search(user, text, vector)
        returned.append(count)


def _count_rows(database_url: str, table: str) -> int:
    with psycopg.connect(database_url) as conn:
        row = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()
    return int(row[0]) if row else 0


# --------------------------------------------------------------------------------------
# the command
# --------------------------------------------------------------------------------------


def load_mem0() -> tuple[PeerFactory, Mem0Mode]:
    """Peers on the installed mem0, and the mode it runs in (the tests, which run without mem0,
    replace this with a stand-in)."""
    memory_class, mode = import_mem0()
    return functools.partial(Mem0Peer, memory_class), mode


def run(service: Memory, args: argparse.Namespace) -> int:
    make_peer, mode = load_mem0()
    quality: QualityPart | None = None
    latency: LatencyPart | None = None
    with tempfile.TemporaryDirectory(prefix="agent-memory-peers-") as work, ScratchServer.from_args(args) as server:
        database = server.describe()
        if not args.skip_quality:
            quality = quality_part(server, service.settings, make_peer, Path(work), args)
            mode.plans["quality"] = quality.plan
            mode.ef_search, mode.iterative_scan = quality.settings
        if not args.skip_latency:
            latency = latency_part(server, service.settings, make_peer, Path(work), args)
            mode.plans["latency"] = latency.plan
            mode.ef_search, mode.iterative_scan = latency.settings
    _print(database, mode, quality, latency, args)
    return 0


def _mean(values: Sequence[int]) -> float:
    return float(np.mean(values)) if values else float("nan")


def _print(
    database: str, mode: Mem0Mode, quality: QualityPart | None, latency: LatencyPart | None, args: argparse.Namespace
) -> None:
    k = args.k
    print(f"database: {database} (one database for ours, one for mem0, on the same server)")
    print(f"mem0: mem0ai {mode.version} (written against {MEM0_TESTED}), the open-source Memory class:")
    print(
        f"  search: Memory.search(query, top_k={k}, filters={{'user_id': ...}}, threshold={args.mem0_threshold:g}), "
        "sync, no reranker; semantic candidates + keyword scores + entity boosts, added and divided by the "
        "signals present; semantic score below the threshold dropped"
    )
    print(f"  writes: add(messages, infer=False): each fact stored as given, no LLM; {_mem0_limit(k)} candidates asked")
    if not args.skip_latency:
        how = (
            "Memory.add, one memory at a time (indexes maintained row by row, SQLite history written)"
            if args.mem0_load == "add"
            else "PGVector.insert in batches of its add() payload, indexes dropped and rebuilt by its create_col "
            "(no SQLite history rows: search never reads them)"
        )
        print(f"  latency load: {how}")
    ef = mode.ef_search if mode.ef_search != "?" else "pgvector default"
    scan = mode.iterative_scan if mode.iterative_scan != "?" else "pgvector default"
    print(
        f"  vector store: pgvector, HNSW (vector_cosine_ops, pgvector's default m and ef_construction); in its "
        f"sessions hnsw.ef_search={ef}, hnsw.iterative_scan={scan}: the user filter is applied to what the HNSW "
        "scan returns, so a user whose memories are not among the nearest of the whole table gets fewer"
    )
    for part, plan in mode.plans.items():
        print(f"  plan of its semantic statement, {part} data: {plan or 'none'}")
    print(f"  spaCy: {mode.spacy}")
    print(f"  keyword (BM25) leg: {mode.keyword_leg}")
    print(f"  entity boost: {mode.entity_boost}")
    print("  embedder: our embedder's vectors in its embedder slot (the same model and vectors as ours)")
    print("  telemetry: off (MEM0_TELEMETRY=false set by the bench); history in a temporary SQLite file")

    if quality is not None:
        _print_quality(quality, k)
    if latency is not None:
        _print_latency(latency, k)

    keys = {
        "mem0_version": mode.version,
        "spacy": "yes" if mode.spacy_installed else "no",
        "k": str(k),
    }
    if quality is not None:
        ours, theirs = quality.reports["ours (default)"].total, quality.reports["mem0"].total
        keys |= {
            "ours_any": f"{ours.any:.3f}",
            "mem0_any": f"{theirs.any:.3f}",
            "ours_all": f"{ours.all:.3f}",
            "mem0_all": f"{theirs.all:.3f}",
            "mem0_keyword_hits": f"{sum(n > 0 for n in quality.mem0_counts.keyword) / max(quality.queries, 1):.3f}",
        }
    else:
        keys |= dict.fromkeys(("ours_any", "mem0_any", "ours_all", "mem0_all", "mem0_keyword_hits"), "-")
    if latency is not None:
        keys |= {
            "memories": str(latency.memories),
            "users": str(latency.users),
            "ours_p50_ms": f"{latency.ours.p50:.2f}",
            "ours_p95_ms": f"{latency.ours.p95:.2f}",
            "mem0_p50_ms": f"{latency.mem0.p50:.2f}",
            "mem0_p95_ms": f"{latency.mem0.p95:.2f}",
            "ours_results_mean": f"{_mean(latency.ours_returned):.2f}",
            "mem0_results_mean": f"{_mean(latency.mem0_returned):.2f}",
            "mem0_results_min": str(min(latency.mem0_returned, default=0)),
            "mem0_short_share": f"{sum(n < k for n in latency.mem0_returned) / max(len(latency.mem0_returned), 1):.3f}",
        }
    else:
        keys |= dict.fromkeys(
            (
                "memories",
                "users",
                "ours_p50_ms",
                "ours_p95_ms",
                "mem0_p50_ms",
                "mem0_p95_ms",
                "ours_results_mean",
                "mem0_results_mean",
                "mem0_results_min",
                "mem0_short_share",
            ),
            "-",
        )
    # Added after the first release of this line (the contract: add keys, never rename or remove).
    if quality is not None:
        keys |= {
            "ours_vector_any": f"{quality.reports['ours, vector only'].total.any:.3f}",
            "quality_load1": _load1(quality.load_before),
        }
    else:
        keys |= dict.fromkeys(("ours_vector_any", "quality_load1"), "-")
    if latency is not None:
        keys |= {"latency_load1": _load1(latency.load_before), "mem0_load": args.mem0_load}
    else:
        keys |= dict.fromkeys(("latency_load1", "mem0_load"), "-")
    failed = sum(part.mem0_counts.keyword_failed for part in (quality, latency) if part is not None)
    keys["mem0_keyword_failed"] = str(failed)
    print("peers " + " ".join(f"{key}={value}" for key, value in keys.items()))


def _load1(described: str) -> str:
    """The number in load_average()'s text, for the summary line ("-" when unknown)."""
    words = described.split()
    return words[2] if len(words) > 2 and words[:2] == ["load", "average"] else "-"


def _print_quality(part: QualityPart, k: int) -> None:
    print()
    print(
        f"quality: {part.split} ({part.queries} queries; stored: ours {part.ours_rows} memories in "
        f"{part.ours_load_s:.1f} s by import, mem0 {part.mem0_rows} in {part.mem0_load_s:.1f} s by add); recall@{k}"
    )
    print(f"machine: {part.load_before} before the questions, {part.load_after} after (shared: other work runs on it)")
    categories = list(part.reports["ours (default)"].by_category)
    headers = ["system", "any", "all", *(f"cat {c} any" for c in categories), "results mean", "results < k"]
    rows = []
    for name, report in part.reports.items():
        returned = part.returned[name]
        rows.append(
            [
                name,
                f"{report.total.any:.3f}",
                f"{report.total.all:.3f}",
                *(f"{report.by_category[c].any:.3f}" for c in categories),
                f"{_mean(returned):.2f}",
                sum(n < k for n in returned),
            ]
        )
    print_table(headers, rows)
    counts = part.mem0_counts
    searched = [n for n, text in zip(part.returned["mem0"], part.texts, strict=True) if text]
    scan, threshold = counts.short(searched, k)
    print(
        f"mem0's legs per question: semantic {_mean(counts.semantic):.1f} rows on average (min "
        f"{min(counts.semantic, default=0)}, of {_mem0_limit(k)} asked); keyword rows for "
        f"{sum(n > 0 for n in counts.keyword)} of {len(counts.keyword)} questions; entity boosts for "
        f"{sum(n > 0 for n in counts.boosted)}; fewer than {k} results: {scan} with fewer than {k} semantic "
        f"rows, {threshold} cut by the threshold; keyword statement failed {counts.keyword_failed} times"
    )


def _print_latency(part: LatencyPart, k: int) -> None:
    print()
    print(
        f"latency: {part.memories} memories over {part.users} users ({part.memories // part.users} each), 384-d hash "
        f"vectors (the same rows in both); load + index build: ours {part.ours_load_s:.1f} s (COPY), mem0 "
        f"{part.mem0_load_s:.1f} s ({part.mem0_load}); limit {k}; query embedding excluded from both"
    )
    print(f"machine: {part.load_before} before timing, {part.load_after} after (shared: other work runs on it)")
    rows = []
    for name, watch, returned, what in (
        ("ours: rushmem.Memory.recall", part.ours, part.ours_returned, "scoped legs, fusion, MMR, block"),
        ("mem0: Memory.search", part.mem0, part.mem0_returned, "semantic + keyword legs, additive score"),
    ):
        rows.append(
            [
                name,
                len(watch.samples),
                f"{watch.p50:.2f}",
                f"{watch.p95:.2f}",
                f"{_mean(returned):.2f}",
                min(returned, default=0),
                sum(n < k for n in returned),
                what,
            ]
        )
    print_table(["search", "queries", "p50 ms", "p95 ms", "results mean", "min", "< k", "what"], rows)
    counts = part.mem0_counts
    scan, threshold = counts.short(part.mem0_returned, k)
    print(
        f"mem0's semantic leg returned {_mean(counts.semantic):.1f} rows per query on average (min "
        f"{min(counts.semantic, default=0)}, of {_mem0_limit(k)} asked); its keyword leg returned rows for "
        f"{sum(n > 0 for n in counts.keyword)} of {len(counts.keyword)} queries (its statement failed "
        f"{counts.keyword_failed} times); fewer than {k} results: {scan} with fewer than {k} semantic rows (the user "
        f"filter after the scan), {threshold} cut by the threshold"
    )


def register(sub: Any) -> None:
    p = sub.add_parser(
        "peers",
        help="mem0 beside ours: recall@10 on the dev split, latency and result count at scale",
        description="Run mem0 (open source, `pip install 'rushmem[peers]'`) on the same PostgreSQL server "
        "with the same vectors and data as ours: recall@k on a LoCoMo-format split (mem0 stores the facts with "
        "add(infer=False), no LLM), then recall latency and the number of results on synthetic data. Prints "
        "mem0's exact mode, the tables, and one summary line.",
    )
    p.add_argument(
        "split_dir", nargs="?", help="folder with memories.jsonl and queries.jsonl (default ../shared/bench/locomo-dev)"
    )
    p.add_argument("--k", type=int, default=10, help="memories recalled per query, and scored (default 10)")
    p.add_argument(
        "--embedder",
        choices=["local", "hash"],
        default="local",
        help="vectors of the quality part, for both (default local: all-MiniLM-L6-v2)",
    )
    p.add_argument("--memories", type=int, default=100_000, help="latency: memories to load (default 100000)")
    p.add_argument("--users", type=int, default=1_000, help="latency: users they are spread over (default 1000)")
    p.add_argument("--queries", type=int, default=200, help="latency: timed queries per system (default 200)")
    p.add_argument(
        "--mem0-threshold", type=float, default=0.1, help="mem0's search threshold (default 0.1, mem0's own)"
    )
    p.add_argument(
        "--mem0-load",
        choices=["insert", "add"],
        default="insert",
        help="latency: how the memories go into mem0: its PGVector.insert in batches, indexes built after (default; "
        "as ours is loaded by COPY), or Memory.add one at a time (its own write path: 13 x slower at 100000 here)",
    )
    p.add_argument("--skip-quality", action="store_true", help="only the latency part")
    p.add_argument("--skip-latency", action="store_true", help="only the quality part")
    add_database_arguments(p)
    p.set_defaults(func=run)

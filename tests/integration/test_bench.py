"""`rushmem bench ...` smoke runs (tiny synthetic inputs, summary-line format only, never
timings) and the store functions only the benchmarks use."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from rushmem.config import Settings
from rushmem.embeddings.hashing import HashEmbedder
from rushmem.records import MemoryRow
from rushmem.service import Memory
from rushmem.store.engine.pg import PgSession
from rushmem.store.memories.scope import Scope
from rushmem_contract.kinds import EXIT_USAGE
from rushmem_contract.models import content_hash
from rushmem_tools.bench import sql as bench_sql
from rushmem_tools.cli import main
from tests.support.db import bench_databases

NUMBER = r"\d+(\.\d+)?"


def summary(capsys: pytest.CaptureFixture[str], code: int) -> str:
    out = capsys.readouterr().out
    assert code == 0, out
    return out.rstrip("\n").splitlines()[-1]


@pytest.fixture
def split(tmp_path: Path) -> Path:
    """A 20-memory, 2-user split in the LoCoMo import format (made up here, never the real data)."""
    folder = tmp_path / "tiny-split"
    folder.mkdir()
    facts = {
        "alice": ["Alice adopted a grey cat named Pixel", "Alice works as a nurse in Porto", "Alice plays the cello"],
        "bob": ["Bob is learning Rust", "Bob ran the Berlin marathon", "Bob's sister lives in Oslo"],
    }
    lines, queries = [], []
    for user, texts in facts.items():
        for i in range(10):
            text = texts[i % 3] if i < 3 else f"{user.title()} mentioned detail number {i} about the weekend"
            evidence = [f"D{i + 1}:1"]
            lines.append(
                {
                    "user_id": user,
                    "content": text,
                    "created_at": f"2023-05-{i + 1:02d}T10:00:00+00:00",
                    "metadata": {"evidence": evidence, "session": i + 1},
                }
            )
        for i, question in enumerate(["What pet does {u} have?", "Where does {u} work or run?", "What about music?"]):
            queries.append(
                {
                    "user_id": user,
                    "query": question.format(u=user.title()),
                    "now": "2023-06-01T00:00:00+00:00",
                    "evidence": [f"D{i + 1}:1"],
                    "category": i % 2 + 1,
                }
            )
    (folder / "memories.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (folder / "queries.jsonl").write_text("".join(json.dumps(x) + "\n" for x in queries))
    conversations = [
        {
            "sample_id": user,
            "conversation": {
                "speaker_a": user.title(),
                "speaker_b": "Friend",
                "session_1_date_time": "1 May 2023",
                "session_1": [
                    {"speaker": user.title(), "dia_id": f"D1:{i}", "text": f"{text}, you know. " * 20}
                    for i, text in enumerate(texts)
                ],
            },
        }
        for user, texts in facts.items()
    ]
    (folder / "conversations.json").write_text(json.dumps(conversations))
    return folder


def test_bench_quality_prints_every_variant_and_the_summary_line(
    capsys: pytest.CaptureFixture[str], settings: Settings, pg_server: str, split: Path, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    argv = ["bench", "quality", str(split), "--embedder", "hash", "--results-dir", str(results)]
    code = main([*argv, "--server-url", pg_server], settings=settings)
    out = capsys.readouterr().out
    assert code == 0
    for variant in (
        "vector only",
        "full text only",
        "article query",
        "ours (default)",
        "ours - MMR",
        "ours, previous defaults",
        "ours - date leg",
        "ours - one hop",
        "ours + equal-scores rerank",
    ):
        assert variant in out
    assert "rrf" not in out and "entity" not in out  # removed: no measured gain
    assert "ours + rerank" not in out  # no reranker configured
    assert re.search(r"@5 any +@5 all", out)  # recall@5 beside recall@10
    assert re.search(r"cat \S+ any .*cat \S+ all", out)  # per category, any and all
    last = out.rstrip("\n").splitlines()[-1]
    assert re.fullmatch(
        rf"quality split=tiny-split ours_any={NUMBER} ours_all={NUMBER} article_any={NUMBER} vector_any={NUMBER}"
        rf" ours_any_at5={NUMBER} ours_all_at5={NUMBER} previous_any={NUMBER} previous_all={NUMBER}"
        rf" equal_rerank_any={NUMBER} equal_rerank_all={NUMBER}"
        # Issue 43's keys, after the old ones: the block as sent, its size, per category.
        rf" block_any={NUMBER} block_all={NUMBER} block_memories={NUMBER} block_tokens={NUMBER}"
        rf" filled_tokens={NUMBER} cut={NUMBER}(?: ours_any_cat\S+={NUMBER} block_any_cat\S+={NUMBER})+",
        last,
    )
    # A reranker that scores every candidate the same leaves the ranking as it was.
    figures = dict(pair.split("=") for pair in last.split()[1:])
    assert (figures["equal_rerank_any"], figures["equal_rerank_all"]) == (figures["ours_any"], figures["ours_all"])
    # The block is the default's answer cut: never more recall, never more memories or tokens.
    assert float(figures["block_any"]) <= float(figures["ours_any"]) and float(figures["block_memories"]) <= 10
    assert 0 < float(figures["block_tokens"]) <= float(figures["filled_tokens"])
    assert "ours, block as sent" in out and re.search(r"share +block any +block all", out)
    # Results in locomo_score.py's input format: one line per query, memories with their metadata.
    lines = (results / "ours-default.jsonl").read_text().splitlines()
    assert len(lines) == 6 and "evidence" in json.loads(lines[0])["memories"][0]["metadata"]
    assert bench_databases(pg_server) == []  # the scratch database is gone


def test_bench_quality_names_a_missing_split(
    capsys: pytest.CaptureFixture[str], settings: Settings, tmp_path: Path
) -> None:
    code = main(["bench", "quality", str(tmp_path / "nowhere"), "--embedder", "hash"], settings=settings)
    assert code == 2
    assert "nowhere/memories.jsonl does not exist" in capsys.readouterr().err


def test_bench_latency_summary_line(capsys: pytest.CaptureFixture[str], settings: Settings, pg_server: str) -> None:
    argv = ["bench", "latency", "--memories", "200", "--users", "10", "--queries", "5", "--no-end-to-end"]
    last = summary(capsys, main([*argv, "--server-url", pg_server], settings=settings))
    assert re.fullmatch(
        rf"latency memories=200 users=10 ours_p50_ms={NUMBER} ours_p95_ms={NUMBER} "
        rf"seed_p95_ms={NUMBER} speedup_p95={NUMBER}",
        last,
    )
    assert bench_databases(pg_server) == []


def test_bench_latency_compares_sizes_and_times_a_heavy_user(
    capsys: pytest.CaptureFixture[str], settings: Settings, pg_server: str
) -> None:
    argv = ["bench", "latency", "--memories", "200,400", "--users", "10,20", "--queries", "5", "--no-end-to-end"]
    argv += ["--heavy-user", "1200", "--seed-queries", "2", "--load-order", "conversations"]
    code = main([*argv, "--server-url", pg_server], settings=settings)
    out = capsys.readouterr().out
    assert code == 0, out
    lines = out.strip().splitlines()
    # Each size keeps its own line (the single-size keys), then one line compares them.
    per_size = [line for line in lines if line.startswith("latency memories=")]
    assert [line.split()[1] for line in per_size] == ["memories=200", "memories=400"]
    assert all(re.search(rf" speedup_p95={NUMBER} heavy_user_p95_ms={NUMBER}$", line) for line in per_size)
    assert "plus heavy-user with 1200" in out and "loaded conversations" in out
    assert re.fullmatch(
        rf"latency-sizes ours_p95_ms_200={NUMBER} ours_p95_ms_400={NUMBER} p95_ratio={NUMBER} "
        rf"heavy_user_p95_ms={NUMBER}",
        lines[-1],
    )
    assert bench_databases(pg_server) == []


def test_bench_latency_sweeps_heavy_user_counts_and_keeps_the_old_keys(
    capsys: pytest.CaptureFixture[str], settings: Settings, pg_server: str
) -> None:
    argv = ["bench", "latency", "--memories", "200", "--users", "10", "--queries", "12", "--no-end-to-end"]
    argv += ["--heavy", "0,3", "--heavy-ordinary", "15", "--seed-queries", "2"]
    code = main([*argv, "--server-url", pg_server], settings=settings)
    out = capsys.readouterr().out
    assert code == 0, out
    heavy = rf"heavy3_ordinary_p50_ms={NUMBER} heavy3_ordinary_p95_ms={NUMBER} heavy3_write_p50_ms={NUMBER} "
    heavy += rf"heavy3_heavy_p50_ms={NUMBER} heavy3_heavy_p95_ms={NUMBER} heavy3_heavy_write_p50_ms={NUMBER}"
    assert re.fullmatch(
        rf"latency memories=200 users=10 ours_p50_ms={NUMBER} ours_p95_ms={NUMBER} "
        rf"seed_p95_ms={NUMBER} speedup_p95={NUMBER} "
        rf"heavy0_ordinary_p50_ms={NUMBER} heavy0_ordinary_p95_ms={NUMBER} heavy0_write_p50_ms={NUMBER} {heavy} "
        rf"heavy_ordinary_p50_ratio={NUMBER} heavy_write_p50_ratio={NUMBER}",
        out.strip().splitlines()[-1],
    )
    assert bench_databases(pg_server) == []


def test_bench_capacity_summary_line(capsys: pytest.CaptureFixture[str], settings: Settings, pg_server: str) -> None:
    argv = ["bench", "capacity", "--memories", "300", "--users", "10", "--recalls", "5", "--writes", "3"]
    last = summary(capsys, main([*argv, "--server-url", pg_server], settings=settings))
    assert re.fullmatch(
        rf"capacity memories=300 db_cpu_ms_per_recall={NUMBER} recalls_per_s_per_vcpu=({NUMBER}|inf) "
        rf"db_cpu_ms_per_memory_written={NUMBER} memories_written_per_s_per_vcpu=({NUMBER}|inf) "
        rf"bytes_per_memory={NUMBER}",
        last,
    )
    assert bench_databases(pg_server) == []


def test_bench_latency_refuses_unpaired_sizes(capsys: pytest.CaptureFixture[str], settings: Settings) -> None:
    argv = ["bench", "latency", "--memories", "200,400,800", "--users", "10,20", "--no-end-to-end"]
    assert main(argv, settings=settings) == EXIT_USAGE
    assert "--users" in capsys.readouterr().err


@pytest.mark.parametrize("via", ["handler", "service"])
def test_bench_ingest_summary_line(
    capsys: pytest.CaptureFixture[str], settings: Settings, pg_server: str, repo_root: Path, via: str
) -> None:
    argv = ["bench", "ingest", "--memories", "200", "--workers", "2", "--via", via]
    argv += ["--template", str(repo_root / "template.yaml"), "--server-url", pg_server]
    code = main(argv, settings=settings)
    out = capsys.readouterr().out
    assert code == 0
    assert "; 200 rows stored" in out  # every memory written (the warm-up rows not counted)
    assert re.fullmatch(r"ingest memories=200 per_second=\d+ cpu_s=\d+\.\d\d per_cpu_second=\d+", out.splitlines()[-1])


def test_bench_ingest_index_ceiling_row(capsys: pytest.CaptureFixture[str], settings: Settings, pg_server: str) -> None:
    argv = ["bench", "ingest", "--memories", "100", "--via", "service", "--index-ceiling", "--server-url", pg_server]
    assert main(argv, settings=settings) == 0
    out = capsys.readouterr().out
    assert re.search(r"HNSW inserts alone, bare table, 1 writer \(10 per transaction\) +100 .* \d+\n", out)
    assert bench_databases(pg_server) == []  # the scratch table went with the scratch database


@pytest.mark.model
def test_bench_tokens_summary_line(
    capsys: pytest.CaptureFixture[str], settings: Settings, pg_server: str, split: Path
) -> None:
    argv = ["bench", "tokens", str(split / "conversations.json"), "--embedder", "hash", "--server-url", pg_server]
    last = summary(capsys, main(argv, settings=settings))
    match = re.fullmatch(rf"tokens full_history=(\d+) memory_block=(\d+) saving=({NUMBER})%", last)
    assert match and int(match.group(1)) > int(match.group(2)) > 0


@pytest.mark.model
def test_bench_embed_summary_line(capsys: pytest.CaptureFixture[str], settings: Settings, split: Path) -> None:
    argv = ["bench", "embed", "--memories", str(split / "memories.jsonl"), "--texts", "30", "--queries", "3"]
    last = summary(capsys, main([*argv, "--repeat", "1", "--batch-size", "8"], settings=settings))
    assert re.fullmatch(rf"embed backend=numpy texts=30 load_ms=\d+ query_p50_ms={NUMBER} per_s={NUMBER}", last)


def test_bench_embed_names_a_missing_file(
    capsys: pytest.CaptureFixture[str], settings: Settings, tmp_path: Path
) -> None:
    assert main(["bench", "embed", "--memories", str(tmp_path / "none.jsonl")], settings=settings) == 2
    assert "none.jsonl does not exist (memories)" in capsys.readouterr().err


def test_bench_plot_writes_the_png_and_its_numbers(
    capsys: pytest.CaptureFixture[str], settings: Settings, pg_server: str, tmp_path: Path
) -> None:
    out = tmp_path / "docs" / "latency.png"
    argv = ["bench", "plot", "--sizes", "100,200", "--queries", "3", "--out", str(out), "--server-url", pg_server]
    last = summary(capsys, main(argv, settings=settings))
    pair = f"{NUMBER},{NUMBER}"
    assert re.fullmatch(rf"plot sizes=100,200 ours_p95_ms={pair} seed_p95_ms={pair} out=\S+", last)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [r["memories"] for r in json.loads(out.with_suffix(".json").read_text())["runs"]] == [100, 200]


# ---- the store functions behind the benchmarks -----------------------------------------


def owner_connection(database_url: str) -> PgSession:
    conn = PgSession.connect(database_url, autocommit=True)
    register_vector(conn)
    return conn


def rows_for(user: str, texts: list[str]) -> list[MemoryRow]:
    vectors = HashEmbedder().embed(texts)
    return [
        MemoryRow(user, None, t, content_hash(t), "fact", v, source="bench")
        for t, v in zip(texts, vectors, strict=True)
    ]


def indexes(conn: psycopg.Connection[Any]) -> dict[str, str]:
    query = "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'user_memories'"
    return {str(name): str(definition) for name, definition in conn.execute(query)}


def test_copied_rows_are_recalled_and_indexes_come_back_as_the_migration_made_them(
    database_url: str, service: Memory
) -> None:
    with owner_connection(database_url) as conn:
        before = indexes(conn)
        bench_sql.drop_search_indexes(conn)
        assert bench_sql.copy_memories(conn, rows_for("u1", ["Prefers TypeScript", "Lives in Lisbon"])) == 2
        bench_sql.copy_memories(conn, rows_for("u2", ["Prefers TypeScript too"]))
        bench_sql.build_search_indexes(conn, maintenance_work_mem="64MB")
        after = indexes(conn)
        events = conn.execute("SELECT count(*) FROM memory_events WHERE event = 'created'").fetchone()
    assert after == before
    assert events == (3,)  # the history trigger saw the bulk load too
    result = service.recall("TypeScript", user_id="u1")
    assert result.memories[0].content == "Prefers TypeScript"
    assert {m.content for m in result.memories} == {"Prefers TypeScript", "Lives in Lisbon"}


def test_copy_needs_a_role_that_row_level_security_does_not_restrict(app_login_url: str) -> None:
    from rushmem_contract.errors import ConfigurationError

    with owner_connection(app_login_url) as conn, pytest.raises(ConfigurationError, match="bypasses row-level"):
        bench_sql.copy_memories(conn, rows_for("u1", ["Prefers TypeScript"]))


def test_the_article_query_ranks_every_users_memories_unless_scoped(database_url: str) -> None:
    with owner_connection(database_url) as conn:
        bench_sql.copy_memories(conn, rows_for("alice", ["Alice prefers TypeScript for the editor"]))
        bench_sql.copy_memories(conn, rows_for("mallory", ["Mallory prefers TypeScript for the editor too"]))
        query = "Which language for the editor?"  # to_tsquery would raise on this; plainto_tsquery does not
        vector = HashEmbedder().embed_query(query)
        unscoped = bench_sql.article_seed_query(conn, vector, query, limit=10)
        scoped = bench_sql.article_seed_query(conn, vector, query, limit=10, scope=Scope("alice"))
    assert {r["user_id"] for r in unscoped} == {"alice", "mallory"}  # the article's leak, kept as written
    assert [r["user_id"] for r in scoped] == ["alice"]
    scores = [float(r["total_score"]) for r in unscoped]
    assert scores == sorted(scores, reverse=True)
    assert np.isfinite(scores).all()


def test_bench_quality_compares_a_configured_reranker_with_the_rest_off() -> None:
    from rushmem.recall.plan import RecallPlan
    from rushmem_tools.bench.quality import EQUAL_RERANK, variants

    base = RecallPlan.from_settings(Settings(rerank_provider="cohere"))
    with_reranker = {v.name: v for v in variants(base, reranker=True)}
    reranked = with_reranker.pop("ours + rerank").plan
    assert reranked is not None and reranked.rerank
    # Every other row runs without the configured reranker (the equal-scores row brings its own).
    assert not any(v.plan.rerank for v in with_reranker.values() if v.plan is not None and v.reranker is None)
    assert with_reranker[EQUAL_RERANK].reranker is not None
    assert "ours + rerank" not in {v.name for v in variants(base)}


def test_bench_truth_summary_line(capsys: pytest.CaptureFixture[str], settings: Settings, pg_server: str) -> None:
    argv = ["bench", "truth", "--users", "2", "--embedder", "hash", "--server-url", pg_server]
    last = summary(capsys, main(argv, settings=settings))
    keys = [
        "now_current",
        "now_stale",
        "at_valid",
        "at_other",
        "wrong_folds",
        "superseded",
        "dup_per_100",
        "restated_refreshed",
        "swaps_kept",
        "echoes",
        "echoes_added",
        "fold_only_now_stale",
        "fold_only_dup_per_100",
        "block_echoes",
        "block_echoes_added",
        "import_dup_per_100",
        "consolidated_dup_per_100",
        # Issue 32: conversations, future valid times, edits, scopes, distinct look-alikes; the
        # adversarial inputs' times against ordinary ones.
        "conv_corrected",
        "future_ok",
        "edit_past_kept",
        "cross_scope_one_value",
        "distinct_facts",
        "distinct_retired",
        "match_numbers_s",
        "match_ordinary_s",
        "consolidate_numbers_s",
        "consolidate_ordinary_s",
        "redact_digits_s",
        "redact_emails_s",
        "redact_ordinary_s",
        "redact_metadata_s",
        "recall_4000_s",
        "recall_2000_s",
        "adversarial_max_ratio",
        # Issue 42: deletes after edits, held writes decided at once, as of with ended memories.
        "deletes_after_edits",
        "delete_after_edit_clean",
        "racing_decisions",
        "racing_decisions_one_outcome",
        "as_of_inactive_only_then",
        # Issue 42: everyday corrections, ended events and controls as people word them, through
        # Memory.add and conversations; a development set and a held-out one.
        "first_person_corrected",
        "events_ended",
        "first_person_controls_kept",
        "conv_first_person_corrected",
        "conv_events_ended",
        "conv_first_person_controls_kept",
        "held_out_corrected",
        "held_out_events_ended",
        "held_out_controls_kept",
        "conv_held_out_corrected",
        "conv_held_out_controls_kept",
        # Issue 42 item 6: a project's correction of the user's own state ends the user-wide value.
        "project_correction_ended",
        # Issue 45: MEME-shaped cascades and absences (dependents stale, never shown as current).
        "cascade_cases",
        "cascade_correct",
        "absence_cases",
        "absence_correct",
        "absence_controls",
        "absence_controls_answered",
        "cascade_base_kept",
    ]
    match = re.fullmatch(r"truth users=2 writes=\d+ " + " ".join(f"{k}=({NUMBER})" for k in keys), last)
    assert match, last
    found = dict(zip(keys, (float(g) for g in match.groups()[::2]), strict=True))
    # A correction never folds into the old value and "now" never recalls a stale one; without
    # the supersession it does.
    assert found["wrong_folds"] == 0 and found["now_stale"] == 0 and found["now_current"] == 1
    assert found["conv_corrected"] == found["future_ok"] == found["edit_past_kept"] == 1
    assert found["cross_scope_one_value"] == 1 and found["distinct_facts"] > 0 and found["distinct_retired"] == 0
    assert found["fold_only_now_stale"] > 0
    assert found["deletes_after_edits"] == found["racing_decisions"] == 2
    assert found["delete_after_edit_clean"] == found["racing_decisions_one_outcome"] == 1
    assert found["as_of_inactive_only_then"] == 1
    assert found["project_correction_ended"] == 1
    # Two users: a home city with three dependents and an employer with two, each corrected.
    assert found["cascade_cases"] == found["absence_cases"] == 5 and found["cascade_correct"] == 1
    assert found["absence_controls"] == 2 and found["absence_controls_answered"] == 1
    # Whatever the embedder (hash vectors here: few corrections reach the update threshold), no
    # control is ended.
    assert found["first_person_controls_kept"] == found["held_out_controls_kept"] == 1
    # A recalled block handed back in a conversation adds nothing; consolidation merges duplicates.
    assert found["block_echoes"] > 0 and found["block_echoes_added"] == 0
    assert found["consolidated_dup_per_100"] < found["import_dup_per_100"]
    assert bench_databases(pg_server) == []


def test_bench_readers_summary_line(capsys: pytest.CaptureFixture[str], settings: Settings) -> None:
    argv = ["bench", "readers", "--memories", "300", "--users", "10", "--recalls", "20"]
    last = summary(capsys, main(argv, settings=settings))
    value = rf"({NUMBER}|inf|nan)"
    assert re.fullmatch(
        rf"readers memories=300 users=10 recalls_per_s_0={value} recalls_per_s_1={value} recalls_per_s_2={value} "
        rf"ratio_1={value} ratio_2={value} writer_cpu_ms_per_recall={NUMBER} "
        rf"writer_cpu_ms_per_reader_recall={NUMBER} reader_cpu_ms_per_recall={NUMBER}",
        last,
    )

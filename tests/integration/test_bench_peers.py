"""`rushmem bench peers` without the ``peers`` extra: the refusal, and our side of the bench
with a stand-in peer; with mem0 installed, once end to end on tiny data."""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib.util
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rushmem.config import Settings
from rushmem.embeddings.hashing import HashEmbedder
from rushmem_tools.bench import peers
from rushmem_tools.cli import main
from tests.support.db import bench_databases

NUMBER = r"\d+\.\d+"
KEYS = [
    *("mem0_version", "spacy", "k", "ours_any", "mem0_any", "ours_all", "mem0_all", "mem0_keyword_hits"),
    *("memories", "users", "ours_p50_ms", "ours_p95_ms", "mem0_p50_ms", "mem0_p95_ms", "ours_results_mean"),
    *("mem0_results_mean", "mem0_results_min", "mem0_short_share"),
    # added by the second round
    *("ours_vector_any", "quality_load1", "latency_load1", "mem0_load", "mem0_keyword_failed"),
]


def summary_of(out: str) -> dict[str, str]:
    """The last line's key=value pairs, checked to be exactly the contract's keys in order."""
    last = out.rstrip("\n").splitlines()[-1]
    assert last.startswith("peers "), last
    pairs = dict(pair.split("=", 1) for pair in last.removeprefix("peers ").split(" "))
    assert list(pairs) == KEYS
    return pairs


@pytest.fixture
def split(tmp_path: Path) -> Path:
    """Two users with 8 memories each, questions whose evidence is one memory (made up here, never the real data)."""
    folder = tmp_path / "peer-split"
    folder.mkdir()
    facts = {
        "ana": ["Ana keeps bees on a rooftop", "Ana studies Portuguese poetry", "Ana climbed Mont Blanc in July"],
        "ben": ["Ben repairs old radios", "Ben cooks ramen every Friday", "Ben's daughter plays chess"],
    }
    lines, queries = [], []
    now = "2024-01-01T00:00:00+00:00"
    for user, texts in facts.items():
        for i in range(8):
            text = texts[i] if i < 3 else f"{user.title()} noted item {i} of the weekly planning list"
            created = f"2023-05-{i + 1:02d}T10:00:00+00:00"  # before the questions' "now": recall is as of then
            lines.append(
                {"user_id": user, "content": text, "created_at": created, "metadata": {"evidence": [f"D{i + 1}:1"]}}
            )
        # The second question's words are the filler memories' (a miss at k=3), the others' a fact's; no
        # memory holds every word of a question (mem0's keyword leg ANDs them: "items" is not "item").
        for i, question in enumerate(["bees rooftop radios", "noted weekly planning items", "climbed chess July"]):
            evidence = [f"D{i + 1}:1"]
            queries.append({"user_id": user, "query": question, "now": now, "evidence": evidence, "category": i + 1})
    (folder / "memories.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (folder / "queries.jsonl").write_text("".join(json.dumps(x) + "\n" for x in queries))
    return folder


class StandInPeer:
    """mem0's place in the bench without mem0: exact cosine search in Python, over the user's
    memories, or (``scan``) over the nearest ``scan`` of the whole table with the user filter
    applied after, as mem0's pgvector store does on its HNSW index."""

    def __init__(self, database_url: str, table: peers.VectorTable, work_dir: Path, scan: int | None) -> None:
        self.table = table
        self.counts = peers.LegCounts()
        self.scan = scan
        self.rows: list[tuple[str, str, np.ndarray, dict[str, Any]]] = []
        self.added = self.inserted = 0
        self.returned: list[int] = []
        self.closed = False

    def add(self, user_id: str, content: str, metadata: dict[str, Any]) -> None:
        self.added += 1
        self.rows.append((user_id, content, np.asarray(self.table.embed(content)), metadata))

    def bulk_insert(self, rows: Iterator[tuple[str, str, np.ndarray, dt.datetime | None]]) -> int:
        for user_id, content, vector, _created in rows:
            self.inserted += 1
            self.rows.append((user_id, content, vector, {}))
        return self.inserted

    def search(self, user_id: str, query: str, *, limit: int, threshold: float) -> list[dict[str, Any]]:
        q = np.asarray(self.table.embed(query))
        nearest = sorted(self.rows, key=lambda r: -float(np.dot(q, r[2]) / np.linalg.norm(q) / np.linalg.norm(r[2])))
        mine = [r for r in nearest[: self.scan] if r[0] == user_id]
        self.counts.semantic.append(len(mine))
        self.counts.keyword.append(0)
        self.returned.append(min(len(mine), limit))
        return [{"memory": content, "metadata": metadata} for _u, content, _v, metadata in mine[:limit]]

    def analyze(self) -> None:
        pass

    def row_count(self) -> int:
        return len(self.rows)

    def semantic_plan(self, vector: np.ndarray, user_id: str, limit: int) -> str:
        return "stand-in scan"

    def session_settings(self) -> tuple[str, str]:
        return "40", "off"

    def close(self) -> None:
        self.closed = True


@dataclasses.dataclass
class StandIns:
    scan: int | None = None  # of the peers made from now on
    made: list[StandInPeer] = dataclasses.field(default_factory=list)

    def make(self, database_url: str, table: peers.VectorTable, work_dir: Path) -> StandInPeer:
        self.made.append(StandInPeer(database_url, table, work_dir, self.scan))
        return self.made[-1]


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> StandIns:
    """mem0 replaced by stand-ins, kept for the test to inspect."""
    stand_ins = StandIns()
    mode = peers.Mem0Mode("stand-in", "not installed", "none", "none")
    monkeypatch.setattr(peers, "load_mem0", lambda: (stand_ins.make, mode))
    return stand_ins


def test_peers_refuses_without_mem0_naming_the_extra(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    settings: Settings,
    pg_server: str,
    tmp_path: Path,
) -> None:
    monkeypatch.setitem(sys.modules, "mem0", None)  # `import mem0` raises ImportError, installed or not
    # The command sets both before importing mem0: set here, they are restored afterwards.
    monkeypatch.setenv("MEM0_TELEMETRY", "false")
    monkeypatch.setenv("MEM0_DIR", str(tmp_path / "mem0"))
    code = main(["bench", "peers", "--server-url", pg_server], settings=settings)
    captured = capsys.readouterr()
    assert code == 3  # a configuration error
    assert "pip install 'rushmem[peers]'" in captured.err
    assert "peers " not in captured.out  # no summary line: nothing was measured
    assert bench_databases(pg_server) == []  # refused before creating any database


def test_quality_part_gives_the_peer_our_vectors_and_scores_both_alike(
    capsys: pytest.CaptureFixture[str], settings: Settings, pg_server: str, split: Path, stand_in: StandIns
) -> None:
    argv = ["bench", "peers", str(split), "--embedder", "hash", "--k", "3", "--skip-latency"]
    code = main([*argv, "--server-url", pg_server], settings=settings)
    out = capsys.readouterr().out
    assert code == 0, out
    keys = summary_of(out)
    [peer] = stand_in.made
    assert peer.added == 16 and peer.closed  # every memory through add(), one by one
    assert re.search(r"stored: ours 16 memories .* mem0 16 ", out)
    # An exact search over the same vectors finds what our vector leg finds: the peer got our
    # embedder's vectors (memories and questions), and both sides were scored by the same rules.
    assert keys["mem0_any"] == keys["ours_vector_any"]
    assert 0 < float(keys["mem0_any"]) < 1  # some hits, some misses: the equality says something
    assert re.fullmatch(NUMBER, keys["ours_any"]) and re.fullmatch(NUMBER, keys["quality_load1"])
    assert keys["memories"] == "-" and keys["mem0_load"] == "-"
    assert "mem0's legs per question: semantic 8.0 rows on average" in out
    assert bench_databases(pg_server) == []


@pytest.mark.parametrize("load", ["insert", "add"])
def test_latency_part_reports_the_results_the_peer_returned(
    capsys: pytest.CaptureFixture[str], settings: Settings, pg_server: str, stand_in: StandIns, load: str
) -> None:
    stand_in.scan = 40  # the user filter after the nearest 40 of all 400
    argv = ["bench", "peers", "--skip-quality", "--memories", "400", "--users", "10", "--queries", "12"]
    code = main([*argv, "--mem0-load", load, "--server-url", pg_server], settings=settings)
    out = capsys.readouterr().out
    assert code == 0, out
    keys = summary_of(out)
    [peer] = stand_in.made
    assert (peer.inserted, peer.added) == ((400, 0) if load == "insert" else (0, 400))
    assert keys["mem0_load"] == load and keys["memories"] == "400" and keys["users"] == "10"
    if load == "add":  # what mem0 stores for a memory is our embedder's vector of it
        _user, content, vector, _meta = peer.rows[0]
        assert np.allclose(vector, HashEmbedder(384).embed([content])[0])
    timed = peer.returned[-12:]  # after the warm-up runs
    assert keys["ours_results_mean"] == "10.00"  # ours is scoped to the user: 40 memories each
    assert keys["mem0_results_mean"] == f"{np.mean(timed):.2f}"
    assert keys["mem0_results_min"] == str(min(timed))
    assert keys["mem0_short_share"] == f"{sum(n < 10 for n in timed) / 12:.3f}"
    assert min(timed) < 10  # the stand-in's scan-then-filter shape shows up as a short result
    assert bench_databases(pg_server) == []


@pytest.mark.skipif(importlib.util.find_spec("mem0") is None, reason="mem0 (the peers extra) is not installed")
def test_peers_with_mem0_end_to_end(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    settings: Settings,
    pg_server: str,
    split: Path,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("MEM0_TELEMETRY", "false")
    monkeypatch.setenv("MEM0_DIR", str(tmp_path / "mem0"))
    argv = ["bench", "peers", str(split), "--embedder", "hash", "--k", "3", "--mem0-threshold", "0"]
    argv += ["--memories", "300", "--users", "10", "--queries", "5", "--server-url", pg_server]
    code = main(argv, settings=settings)
    out = capsys.readouterr().out
    assert code == 0, out
    keys = summary_of(out)
    assert keys["mem0_version"] == peers.MEM0_TESTED
    assert keys["mem0_keyword_failed"] == "0"
    assert keys["mem0_load"] == "insert" and keys["memories"] == "300"
    assert re.search(r"stored: ours 16 memories .* mem0 16 ", out)
    # 16 rows: an exact scan, no threshold and no keyword match (no memory holds every word of a
    # question, and the keyword leg ANDs them): mem0 ranks by cosine, as our vector leg does.
    assert "Seq Scan on mem0" in out
    assert keys["mem0_keyword_hits"] == "0.000"
    assert keys["mem0_any"] == keys["ours_vector_any"]
    assert 0 < float(keys["mem0_any"]) < 1
    assert bench_databases(pg_server) == []

"""`rushmem bench quality [SPLIT_DIR]`: recall@10 (and @5) on a LoCoMo-format split, ours against
baselines and ablations (each leg and option of the ranking on or off).

The split's memories.jsonl is imported into a fresh database; every question of
queries.jsonl is recalled as of its ``now`` by each variant and scored by the rules of
``locomo_score.py`` (see :mod:`rushmem_tools.bench.scoring`).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from rushmem.config import Settings
from rushmem.recall.block import assemble_block, block_lines, count_tokens
from rushmem.recall.cut import relevance_cut
from rushmem.recall.plan import RecallPlan
from rushmem.rerank import Reranker
from rushmem.service import Memory
from rushmem.store.memories.scope import Scope
from rushmem_contract.errors import InvalidInput
from rushmem_contract.models import AwareDatetime, ImportLine, UserId
from rushmem_tools.bench import scoring
from rushmem_tools.bench import sql as bench_sql
from rushmem_tools.bench.common import ScratchServer, open_service, print_table, say

IMPORT_CHUNK = 512
SHORT_K = 5  # recall@5 too: the prompt block is often trimmed to the first few memories
PREVIOUS = "ours, previous defaults"
EQUAL_RERANK = "ours + equal-scores rerank"
BLOCK = "ours, block as sent"
# Shares of the best score the cut sweep tries (0: fill the limit), for docs/recall-quality.md.
CUT_SWEEP = (0.0, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8)


class EqualScores(Reranker):
    """A reranker that scores every document the same: it must leave the ranking as it was."""

    provider = "constant"
    model = "equal-scores"

    def _scores(self, query: str, documents: list[str]) -> list[float]:
        return [0.5] * len(documents)


class QualityQuery(BaseModel):
    """One line of queries.jsonl."""

    model_config = ConfigDict(extra="ignore")

    user_id: UserId
    query: str
    now: AwareDatetime | None = None
    evidence: list[str]
    category: int | str | None = None


def default_bench_file(*parts: str) -> Path:
    """A file of ../shared/bench beside the repository (the data stays out of it: licence).

    The repository is found from this package's location (an editable install), else
    taken to be the current directory.
    """
    candidates = [Path(__file__).resolve().parents[3], Path.cwd()]
    paths = [(root / ".." / "shared" / "bench").resolve().joinpath(*parts) for root in candidates]
    return next((p for p in paths if p.exists()), paths[0])


def read_lines(path: Path, model: type[BaseModel], field: str) -> list[Any]:
    if not path.is_file():
        raise InvalidInput(f"{path} does not exist", field=field)
    out = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                out.append(model.model_validate_json(line))
            except ValidationError as exc:
                raise InvalidInput(f"{path}:{number}: {exc.errors()[0]['msg']}", field=field) from exc
    if not out:
        raise InvalidInput(f"{path} holds no lines", field=field)
    return out


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str
    plan: RecallPlan | None  # None: the article's query
    note: str
    reranker: Reranker | None = None  # instead of the configured one


def variants(base: RecallPlan, *, reranker: bool = False) -> list[Variant]:
    """Baselines, our configured ranking and its ablations (one change each), all filling the limit
    (recall@k measures the ranking), then our default again with its relevance cut: the block as
    sent. A configured reranker is off in every row but "ours + rerank" (present only when there is one)."""
    sent = base.but(rerank=False)
    base = sent.but(min_relative_score=0.0)
    plain = {"decay": False, "mmr": False, "date_boost": 0.0, "date_k": 0, "hop_seeds": 0}
    toggles = [
        Variant("ours - time decay", base.but(decay=False), "default without decay"),
        Variant("ours - MMR", base.but(mmr=False), "default without MMR"),
        Variant("ours - date boost", base.but(date_boost=0.0), "default without the date boost"),
    ]
    if base.date_k > 0:
        toggles.append(Variant("ours - date leg", base.but(date_k=0), "no candidates fetched by the query's dates"))
    else:
        toggles.append(Variant("ours + date leg", base.but(date_k=10), "up to 10 memories from the query's dates"))
    toggles.append(
        Variant(
            "ours - date ranges" if base.date_ranges else "ours + date ranges",
            base.but(date_ranges=not base.date_ranges),
            ("without" if base.date_ranges else "with") + " years, seasons and 'N ... ago' as date windows",
        )
    )
    if base.hop_seeds > 0 and base.hop_boost > 0:
        toggles.append(Variant("ours - one hop", base.but(hop_seeds=0), "no bonus for the best candidates' neighbours"))
    else:
        toggles.append(Variant("ours + one hop", base.but(hop_seeds=3, hop_boost=0.1), "3 seeds, +0.1 x seed"))
    toggles.append(Variant("ours, overfetch 5", base.but(overfetch=5), "50 candidates per leg instead of 30"))
    toggles.append(
        Variant(
            EQUAL_RERANK,
            base.but(rerank=True),
            f"a reranker scoring all {base.rerank_top_n} the same: must equal the default row",
            reranker=EqualScores(),
        )
    )
    if reranker:
        toggles.append(
            Variant(
                "ours + rerank",
                base.but(rerank=True),
                f"the configured reranker on the best {base.rerank_top_n}, weight {base.rerank_weight:g}",
            )
        )
    previous = base.but(date_k=0, date_ranges=False, hop_seeds=0)
    return [
        Variant("vector only", base.but(legs="vector", **plain), "cosine <=>, top 10, no rerank"),
        Variant("full text only", base.but(legs="text", **plain), "ts_rank_cd of the OR-ed words, no rerank"),
        Variant("article query", None, "0.7 x (1 - L2 <->) + 0.3 x raw ts_rank, plainto_tsquery"),
        Variant("ours (default)", base, _describe(base)),
        Variant(PREVIOUS, previous, "vector + text legs only, named days and months (before issue 14)"),
        *toggles,
        Variant("fusion only (weighted)", base.but(**plain), "no decay, MMR, date or hop"),
        Variant(BLOCK, sent, f"the default with its relevance cut ({sent.min_relative_score:g} x the best score)"),
    ]


def _describe(o: RecallPlan) -> str:
    decay = f"decay {o.half_life_days:g}d floor {o.decay_floor:g}" if o.decay else "no decay"
    mmr = f"MMR {o.mmr_lambda:g}" if o.mmr else "no MMR"
    legs = [f"date leg {o.date_k}"] if o.date_k else []
    if o.hop_seeds and o.hop_boost:
        legs.append(f"hop {o.hop_seeds} seeds +{o.hop_boost:g}")
    return ", ".join([f"weighted {o.vector_weight}/{o.text_weight}", mmr, decay, f"date boost {o.date_boost:g}", *legs])


def run(service: Memory, args: argparse.Namespace) -> int:
    split = Path(args.split_dir).expanduser() if args.split_dir else default_bench_file("locomo-dev")
    lines: list[ImportLine] = read_lines(split / "memories.jsonl", ImportLine, "split_dir")
    queries: list[QualityQuery] = read_lines(split / "queries.jsonl", QualityQuery, "split_dir")
    judged = [scoring.Judged(q.user_id, q.evidence, q.category) for q in queries]
    k = args.k
    chosen = variants(service.admin.recall_plan, reranker=service.settings.rerank_provider != "none")

    with ScratchServer.from_args(args) as server:
        url = server.new_database("quality")
        bench = open_service(service.settings, url, provider=args.embedder)
        try:
            say(f"importing {len(lines)} memories from {split} ({bench.admin.embedder.fingerprint})")
            for start in range(0, len(lines), IMPORT_CHUNK):
                bench.import_(lines[start : start + IMPORT_CHUNK], source="bench")
            say(f"embedding {len(queries)} queries")
            vectors = bench.admin.embedder.embed([q.query.strip() or " " for q in queries])
            results: dict[str, list[list[dict[str, Any]]]] = {}
            tokens: dict[str, list[int]] = {}
            for variant in chosen:
                say(f"recalling: {variant.name}")
                # The same database and embedder; only the reranker differs (never closed here).
                service_of = (
                    bench
                    if variant.reranker is None
                    else Memory(
                        bench.settings,
                        embedder=bench.admin.embedder,
                        database=bench.admin.db,
                        reranker=variant.reranker,
                    )
                )
                results[variant.name], tokens[variant.name] = _recall_all(service_of, variant, queries, vectors, k)
        finally:
            bench.close()

    if args.results_dir:
        _write_results(Path(args.results_dir), results)
    reports = {name: scoring.score(judged, res, k=k) for name, res in results.items()}
    short = min(SHORT_K, k)
    shorter = {name: scoring.score(judged, res, k=short) for name, res in results.items()}
    top = scoring.ceiling(judged, ({"user_id": line.user_id, "metadata": line.metadata} for line in lines))
    _print_report(split, len(lines), queries, reports, shorter, chosen, top, k, short)
    ours, article, vector = reports["ours (default)"], reports["article query"], reports["vector only"]
    previous, equal = reports[PREVIOUS], reports[EQUAL_RERANK]
    configured = reports.get("ours + rerank")
    sweep = cut_sweep(judged, results["ours (default)"], service.settings, k)
    _print_sweep(sweep, ours)
    block = reports[BLOCK]
    block_memories = _mean(len(m) for m in results[BLOCK])
    block_tokens, filled_tokens = _mean(tokens[BLOCK]), _mean(tokens["ours (default)"])
    print(
        f"the block as sent (cut {service.admin.recall_plan.min_relative_score:g} x the best score): "
        f"recall any={block.total.any:.3f} all={block.total.all:.3f}, {block_memories:.2f} memories and "
        f"{block_tokens:.0f} tokens on average; filling the limit: {filled_tokens:.0f} tokens"
    )
    per_category = " ".join(
        f"ours_any_cat{c}={ours.by_category[c].any:.3f} block_any_cat{c}={block.by_category[c].any:.3f}"
        for c in ours.by_category
    )
    print(
        f"quality split={split.name} ours_any={ours.total.any:.3f} ours_all={ours.total.all:.3f} "
        f"article_any={article.total.any:.3f} vector_any={vector.total.any:.3f} "
        f"ours_any_at{short}={shorter['ours (default)'].total.any:.3f} "
        f"ours_all_at{short}={shorter['ours (default)'].total.all:.3f} "
        f"previous_any={previous.total.any:.3f} previous_all={previous.total.all:.3f} "
        f"equal_rerank_any={equal.total.any:.3f} equal_rerank_all={equal.total.all:.3f}"
        + (f" rerank_any={configured.total.any:.3f} rerank_all={configured.total.all:.3f}" if configured else "")
        + f" block_any={block.total.any:.3f} block_all={block.total.all:.3f} block_memories={block_memories:.2f}"
        f" block_tokens={block_tokens:.0f} filled_tokens={filled_tokens:.0f}"
        f" cut={service.admin.recall_plan.min_relative_score:g} {per_category}"
    )
    return 0


def _recall_all(
    bench: Memory, variant: Variant, queries: Sequence[QualityQuery], vectors: np.ndarray, k: int
) -> tuple[list[list[dict[str, Any]]], list[int]]:
    """Per query the memories recalled (with their scores) and the block's tokens (0 for the article's query)."""
    out: list[list[dict[str, Any]]] = []
    tokens: list[int] = []
    for query, vector in zip(queries, vectors, strict=True):
        if not query.query.strip():
            out.append([])
            tokens.append(0)
            continue
        if variant.plan is None:
            rows = bench.admin.db.run(_article_query(query, vector, k))
            out.append([{"content": r["content"], "metadata": r["metadata"] or {}} for r in rows])
            tokens.append(0)
        else:
            result = bench.recall(
                query.query, user_id=query.user_id, limit=k, now=query.now, plan=variant.plan, query_vector=vector
            )
            out.append([{"content": m.content, "metadata": m.metadata, "score": m.score} for m in result.memories])
            tokens.append(result.block_tokens)
    return out, tokens


def cut_sweep(
    judged: Sequence[scoring.Judged], filled: Sequence[Sequence[dict[str, Any]]], settings: Settings, k: int
) -> list[tuple[float, scoring.Report, float, float]]:
    """Per share of the best score in CUT_SWEEP: the block's recall, mean memories and mean tokens,
    cutting the default's full answers with the service's own cut and block (no second recall)."""
    out = []
    for share in CUT_SWEEP:
        blocks = []
        for memories in filled:
            dropped = relevance_cut([m["score"] for m in memories], min_score=0.0, min_relative_score=share)
            blocks.append([m for place, m in enumerate(memories) if place not in dropped])
        lines = [block_lines((m["content"] for m in b), max_chars=settings.max_block_chars) for b in blocks]
        sizes = [count_tokens(assemble_block(one, guard=settings.prompt_guard)) for one in lines]
        out.append((share, scoring.score(judged, blocks, k=k), _mean(map(len, blocks)), _mean(sizes)))
    return out


def _mean(values: Any) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def _article_query(query: QualityQuery, vector: np.ndarray, k: int) -> Callable[[Any], list[dict[str, Any]]]:
    """The article's query, scoped to the asking user as of the query's time."""
    scope = Scope(query.user_id, now=query.now)
    return lambda conn: bench_sql.article_seed_query(conn, vector, query.query, limit=k, scope=scope)


def _write_results(folder: Path, results: dict[str, list[list[dict[str, Any]]]]) -> None:
    """One JSON Lines file per variant, in the format locomo_score.py reads."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, per_query in results.items():
        slug = "".join(c if c.isalnum() else "-" for c in name).strip("-")
        while "--" in slug:
            slug = slug.replace("--", "-")
        with (folder / f"{slug}.jsonl").open("w", encoding="utf-8") as out:
            for memories in per_query:
                out.write(json.dumps({"memories": memories}, ensure_ascii=False, default=_json_default) + "\n")
    say(f"results written to {folder}")


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    raise TypeError(type(value).__name__)


def _print_report(
    split: Path,
    memories: int,
    queries: Sequence[QualityQuery],
    reports: dict[str, scoring.Report],
    shorter: dict[str, scoring.Report],
    described: Sequence[Variant],
    top: float,
    k: int,
    short: int,
) -> None:
    """One row per variant: recall@k any and all, per category any and all, and recall@short any and all
    (the first ``short`` of the same k memories: the greedy ranking picks them first either way)."""
    categories = list(next(iter(reports.values())).by_category)
    print(f"split: {split} ({memories} memories, {len(queries)} queries); recall@{k}; ceiling any={top:.3f}")
    headers = [
        "variant",
        "any",
        "all",
        *(f"cat {c} any" for c in categories),
        *(f"cat {c} all" for c in categories),
        f"@{short} any",
        f"@{short} all",
        "what",
    ]
    notes = {v.name: v.note for v in described}
    rows = []
    for name, report in reports.items():
        per_cat = [f"{report.by_category[c].any:.3f}" for c in categories]
        per_cat += [f"{report.by_category[c].all:.3f}" for c in categories]
        at_short = shorter[name].total
        rows.append(
            [
                name,
                f"{report.total.any:.3f}",
                f"{report.total.all:.3f}",
                *per_cat,
                f"{at_short.any:.3f}",
                f"{at_short.all:.3f}",
                notes.get(name, ""),
            ]
        )
    print_table(headers, rows)
    counts = ", ".join(f"cat {c}: n={reports['ours (default)'].by_category[c].n}" for c in categories)
    print(f"questions per category: {counts}")


def _print_sweep(sweep: Sequence[tuple[float, scoring.Report, float, float]], ours: scoring.Report) -> None:
    """The cut's trade: block recall against its size, per share of the best score (0: fill the limit)."""
    print(f"relevance cut (leave out what scores below share x the best); recall@k any={ours.total.any:.3f}")
    categories = list(ours.by_category)
    rows = [
        [
            f"{share:g}",
            f"{report.total.any:.3f}",
            f"{report.total.all:.3f}",
            *(f"{report.by_category[c].any:.3f}" for c in categories),
            f"{memories:.2f}",
            f"{tokens:.0f}",
        ]
        for share, report, memories, tokens in sweep
    ]
    print_table(["share", "block any", "block all", *(f"cat {c} any" for c in categories), "memories", "tokens"], rows)


def register(sub: Any) -> None:
    from rushmem_tools.bench.common import add_database_arguments

    p = sub.add_parser(
        "quality",
        help="recall@10 and @5 on a LoCoMo-format split: ours, ablations and baselines",
        description="Import SPLIT_DIR/memories.jsonl into a fresh database, recall every query of "
        "SPLIT_DIR/queries.jsonl as of its `now` with each variant, and score recall@k by the rules of "
        "locomo_score.py.",
    )
    p.add_argument(
        "split_dir", nargs="?", help="folder with memories.jsonl and queries.jsonl (default ../shared/bench/locomo-dev)"
    )
    p.add_argument("--k", type=int, default=10, help="memories recalled and scored per query (default 10)")
    p.add_argument("--embedder", choices=["local", "hash"], default="local", help="local = all-MiniLM-L6-v2 (default)")
    p.add_argument("--results-dir", help="also write each variant's results as JSON Lines for locomo_score.py")
    add_database_arguments(p)
    p.set_defaults(func=run)

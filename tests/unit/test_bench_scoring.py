"""The benchmark helpers that need no database: LoCoMo scoring rules, synthetic data, history text."""

from __future__ import annotations

import io

import pytest

from rushmem_contract.models import content_hash
from rushmem_tools.bench import scoring
from rushmem_tools.bench.common import print_table
from rushmem_tools.bench.synthetic import SyntheticCorpus
from rushmem_tools.bench.tokens import history_text


def memory(*evidence: str) -> dict[str, object]:
    return {"content": "x", "metadata": {"evidence": list(evidence)}}


def test_any_and_all_follow_locomo_score_rules() -> None:
    questions = [
        scoring.Judged("u", ["D1:1", "D1:2"], 1),  # one of two cited: any, not all
        scoring.Judged("u", ["D2:1"], 1),  # cited only at rank 3 with k=2: miss
        scoring.Judged("u", ["D3:1", "D3:2"], 2),  # both cited across two memories: any and all
        scoring.Judged("u", [], 2),  # no evidence: never "any", always "all" (as the script counts)
    ]
    results = [
        [memory("D1:1"), memory("D9:9")],
        [memory("D9:9"), memory("D9:8"), memory("D2:1")],
        [memory("D3:2"), memory("D3:1")],
        [memory("D1:1")],
    ]
    report = scoring.score(questions, results, k=2)
    assert (report.total.n, report.total.hits_any, report.total.hits_all) == (4, 2, 2)
    assert report.by_category[1].any == pytest.approx(0.5) and report.by_category[1].all == 0.0
    assert report.by_category[2].any == pytest.approx(0.5) and report.by_category[2].all == 1.0
    assert scoring.score(questions, results, k=3).total.hits_any == 3


def test_evidence_may_be_a_single_value_and_metadata_may_be_missing() -> None:
    assert scoring.cited([{"metadata": {"evidence": "D1:1"}}, {"metadata": None}, {}]) == {"D1:1"}


def test_ceiling_counts_questions_whose_evidence_some_memory_of_their_user_cites() -> None:
    questions = [scoring.Judged("a", ["D1:1"]), scoring.Judged("b", ["D1:1"]), scoring.Judged("a", ["D7:7"])]
    stored = [{"user_id": "a", "metadata": {"evidence": ["D1:1"]}}]
    assert scoring.ceiling(questions, stored) == pytest.approx(1 / 3)


def test_results_must_align_with_queries() -> None:
    with pytest.raises(ValueError, match="2 queries but 1 results"):
        scoring.score([scoring.Judged("u", ["a"]), scoring.Judged("u", ["b"])], [[]])


def test_synthetic_corpus_is_deterministic_unique_per_user_and_spread_evenly() -> None:
    first = list(SyntheticCorpus(300, 7, seed=3).facts())
    again = list(SyntheticCorpus(300, 7, seed=3).facts())
    assert [(f.user_id, f.content) for f in first] == [(f.user_id, f.content) for f in again]
    per_user: dict[str, set[bytes]] = {}
    for fact in first:
        per_user.setdefault(fact.user_id, set()).add(content_hash(fact.content))
    assert len(per_user) == 7
    assert sum(len(hashes) for hashes in per_user.values()) == 300  # no duplicate fact within a user
    assert {len(h) for h in per_user.values()} <= {42, 43}
    queries = SyntheticCorpus(300, 7, seed=3).queries(5)
    assert len(queries) == 5 and all(user in per_user for user, _text in queries)


def test_history_text_keeps_session_order_dates_speakers_and_photo_captions() -> None:
    conversation = {
        "speaker_a": "Ann",
        "speaker_b": "Bo",
        "session_10_date_time": "2 May 2023",
        "session_10": [{"speaker": "Bo", "dia_id": "D10:1", "text": "Later."}],
        "session_2_date_time": "1 May 2023",
        "session_2": [
            {"speaker": "Ann", "dia_id": "D2:1", "text": "Hi!"},
            {"speaker": "Bo", "dia_id": "D2:2", "text": "Look", "blip_caption": "a dog on a beach"},
        ],
    }
    assert history_text(conversation) == (
        "Session 2 (1 May 2023):\nAnn: Hi!\nBo: Look [shares a photo: a dog on a beach]\n"
        "Session 10 (2 May 2023):\nBo: Later."
    )


def test_tables_align_numbers_right_and_text_left() -> None:
    out = io.StringIO()
    print_table(["name", "ms"], [["ours", "3.25"], ["article's", "120.50"]], out)
    assert out.getvalue().splitlines() == [
        "name           ms",
        "---------  ------",
        "ours         3.25",
        "article's  120.50",
    ]
